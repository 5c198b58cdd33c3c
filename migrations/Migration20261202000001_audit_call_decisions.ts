import { Migration } from '@mikro-orm/migrations';

/**
 * A check call (`POST /iam/authorization/check`) is one audit row holding all its decisions (docs/threat-model.md,
 * "One request's durable writes are bounded"), so a decision is no longer always its row's `decision_id`: the ids
 * of the row's decisions are kept in `decision_ids`, GIN-indexed, and `GET /iam/authorization/decisions/{id}`
 * finds a decision by either column. A text array rather than an index on an expression over `details`: the
 * planner estimates an array's elements from its statistics and uses this index; over the expression it fell back
 * to scanning the table. Existing rows keep a null (each holds one decision, in `decision_id`), so the table is
 * not rewritten.
 */
export class Migration20261202000001_audit_call_decisions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_audit_events" add column "decision_ids" text[] null;`);
    this.addSql(`create index "iam_audit_events_decision_ids_index" on "iam_audit_events" using gin ("decision_ids");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "iam_audit_events_decision_ids_index";`);
    this.addSql(`alter table "iam_audit_events" drop column if exists "decision_ids";`);
  }
}
