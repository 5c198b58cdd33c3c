import { Migration } from '@mikro-orm/migrations';

/**
 * docs/threat-model.md, "Revocation is decided by time, not by first use": when every session of a user ends
 * (revoke all, disable) the instant is recorded with the raised session epoch, so a provider access token issued
 * before it is refused even when it is first presented afterwards (on every instance, also after a restart).
 * Null: never.
 */
export class Migration20261128000001_user_sessions_revoked_at extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_users" add column "sessions_revoked_at" timestamptz null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "iam_users" drop column if exists "sessions_revoked_at";`);
  }
}
