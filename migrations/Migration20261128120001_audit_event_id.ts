import { Migration } from '@mikro-orm/migrations';

/**
 * Audit events carry their own id (docs/threat-model.md, "The audit trail under a database outage"): the gateway
 * gives each event a UUID when it is recorded and the insert skips an id already stored, so a write retried after
 * its reply was lost (a statement that timed out but had committed, a spool file replayed twice) stores nothing
 * twice. Existing rows keep a null id (the column is added without a default, so the table is not rewritten);
 * rows written without one (admin changes) get one from the default set afterwards.
 */
export class Migration20261128120001_audit_event_id extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_audit_events" add column "event_id" uuid null;`);
    this.addSql(`alter table "iam_audit_events" alter column "event_id" set default gen_random_uuid();`);
    this.addSql(`create unique index "iam_audit_events_event_id_unique" on "iam_audit_events" ("event_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "iam_audit_events_event_id_unique";`);
    this.addSql(`alter table "iam_audit_events" drop column if exists "event_id";`);
  }
}
