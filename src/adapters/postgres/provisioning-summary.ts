import type { ProvisioningChange } from '../../domain/provisioning';
import type { ProvisioningSummary } from '../../domain/records';

/** Counts and describes what one run changed. */
export class SummaryBuilder {
  readonly summary: ProvisioningSummary = { created: 0, updated: 0, unchanged: 0, changes: [], affectedUserIds: [] };
  /** The same changes, structured (for the audit rows). */
  readonly entries: ProvisioningChange[] = [];

  created(kind: string, id: string): void {
    this.summary.created += 1;
    this.summary.changes.push(`${kind} ${id}: created`);
    this.entries.push({ kind, id, action: 'create', fields: [] });
  }

  /** An empty `fields` list counts the object as unchanged. */
  compared(kind: string, id: string, fields: string[]): void {
    if (fields.length === 0) {
      this.summary.unchanged += 1;
      return;
    }
    this.summary.updated += 1;
    this.summary.changes.push(`${kind} ${id}: updated (${fields.join(', ')})`);
    this.entries.push({ kind, id, action: 'update', fields });
  }
}
