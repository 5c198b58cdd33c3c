import { Migration } from '@mikro-orm/migrations';

/**
 * Identities get an optimistic-lock version like users, templates and profiles: the admin API answers it as the
 * `ETag` of an identity and honours `If-Match` on writes (docs/http-contract.md), so a stale save fails with 409
 * instead of silently undoing another admin's change.
 */
export class Migration20261128000002_identity_version extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_identities" add column "version" integer not null default 1;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "iam_identities" drop column if exists "version";`);
  }
}
