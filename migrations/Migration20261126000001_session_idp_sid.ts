import { Migration } from '@mikro-orm/migrations';

/**
 * OpenID Connect back-channel logout (docs/oidc.md): a session opened by an OpenID Connect login records the
 * provider's session id (`sid`), so a logout token naming that `sid` ends exactly those sessions. Null otherwise.
 */
export class Migration20261126000001_session_idp_sid extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_sessions" add column "idp_session_id" text null;`);
    this.addSql(`create index "iam_sessions_idp_session_id_index" on "iam_sessions" ("idp_session_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "iam_sessions_idp_session_id_index";`);
    this.addSql(`alter table "iam_sessions" drop column if exists "idp_session_id";`);
  }
}
