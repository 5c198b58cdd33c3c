import { Migration } from '@mikro-orm/migrations';

/**
 * docs/threat-model.md #11.7: a session opened by a profile switch records the session it was derived from, so that
 * ending a session ends the sessions derived from it (transitively). Null for sessions opened by a login.
 */
export class Migration20261124000708_session_origin extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_sessions" add column "origin_session_id" text null;`);
    this.addSql(`create index "iam_sessions_origin_session_id_index" on "iam_sessions" ("origin_session_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "iam_sessions_origin_session_id_index";`);
    this.addSql(`alter table "iam_sessions" drop column if exists "origin_session_id";`);
  }
}
