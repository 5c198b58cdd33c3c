import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261122000001_initial } from '../../../migrations/Migration20261122000001_initial';
import { Migration20261124000001_profile_unscoped } from '../../../migrations/Migration20261124000001_profile_unscoped';
import { Migration20261124000708_session_origin } from '../../../migrations/Migration20261124000708_session_origin';
import { Migration20261124070001_change_feed } from '../../../migrations/Migration20261124070001_change_feed';
import { Migration20261126000001_session_idp_sid } from '../../../migrations/Migration20261126000001_session_idp_sid';
import { Migration20261128000001_user_sessions_revoked_at } from '../../../migrations/Migration20261128000001_user_sessions_revoked_at';
import { Migration20261128000002_identity_version } from '../../../migrations/Migration20261128000002_identity_version';
import { Migration20261128120001_audit_event_id } from '../../../migrations/Migration20261128120001_audit_event_id';
import { Migration20261202000001_audit_call_decisions } from '../../../migrations/Migration20261202000001_audit_call_decisions';
import { Migration20261202000002_session_idp_id_token } from '../../../migrations/Migration20261202000002_session_idp_id_token';

/**
 * Every migration, oldest first, handed to MikroORM as `migrations.migrationsList`. Listing them
 * explicitly (instead of globbing `migrations/`) makes the same code work under ts-jest and from the
 * compiled `dist/`. A new migration is added here; names are never changed once released, because the
 * history table stores them.
 */
export const IAM_MIGRATIONS: MigrationObject[] = [
  { name: 'Migration20261122000001_initial', class: Migration20261122000001_initial },
  { name: 'Migration20261124000001_profile_unscoped', class: Migration20261124000001_profile_unscoped },
  { name: 'Migration20261124000708_session_origin', class: Migration20261124000708_session_origin },
  { name: 'Migration20261124070001_change_feed', class: Migration20261124070001_change_feed },
  { name: 'Migration20261126000001_session_idp_sid', class: Migration20261126000001_session_idp_sid },
  { name: 'Migration20261128000001_user_sessions_revoked_at', class: Migration20261128000001_user_sessions_revoked_at },
  { name: 'Migration20261128000002_identity_version', class: Migration20261128000002_identity_version },
  { name: 'Migration20261128120001_audit_event_id', class: Migration20261128120001_audit_event_id },
  { name: 'Migration20261202000001_audit_call_decisions', class: Migration20261202000001_audit_call_decisions },
  { name: 'Migration20261202000002_session_idp_id_token', class: Migration20261202000002_session_idp_id_token },
];
