import { Migration } from '@mikro-orm/migrations';

/**
 * docs/threat-model.md #11.25, #11.28, #11.29: changes reach every instance and never come undone.
 *  - `iam_changes`: the change feed (a transactional outbox). Every change that other instances must act on
 *    (sessions ended, a user's sessions all ended, authorization/profile/template changed) is a row written
 *    in the same transaction as the change itself; a background deliverer applies its token-store effects and
 *    publishes it until done, and every instance also reads the feed on an interval, so a lost event is
 *    seen within that interval.
 *  - `iam_users.session_epoch`: raised when every session of a user ends (disable, "revoke all"); a token
 *    issued under an older epoch is refused, whatever the token store says.
 *  - a partial index on ended sessions, so each instance loads the revoked sessions that have not expired.
 */
export class Migration20261124070001_change_feed extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_users" add column "session_epoch" integer not null default 0;`);
    this.addSql(`create table "iam_changes" (
      "id" bigserial primary key,
      "created_at" timestamptz not null default now(),
      "event" jsonb not null,
      "delivered_at" timestamptz null,
      "claimed_until" timestamptz null
    );`);
    this.addSql(`create index "iam_changes_undelivered_index" on "iam_changes" ("id") where "delivered_at" is null;`);
    this.addSql(`create index "iam_changes_created_at_index" on "iam_changes" ("created_at");`);
    this.addSql(
      `create index "iam_sessions_ended_index" on "iam_sessions" ("expires_at") where "revoked_at" is not null or "logout_at" is not null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "iam_sessions_ended_index";`);
    this.addSql(`drop table if exists "iam_changes";`);
    this.addSql(`alter table "iam_users" drop column if exists "session_epoch";`);
  }
}
