import type { ProvisioningSummary } from './records';

/** Counts and describes what one run changed. */
export class SummaryBuilder {
  readonly summary: ProvisioningSummary = { created: 0, updated: 0, unchanged: 0, changes: [], affectedUserIds: [] };

  created(kind: string, id: string): void {
    this.summary.created += 1;
    this.summary.changes.push(`${kind} ${id}: created`);
  }

  /** An empty `fields` list counts the object as unchanged. */
  compared(kind: string, id: string, fields: string[]): void {
    if (fields.length === 0) {
      this.summary.unchanged += 1;
      return;
    }
    this.summary.updated += 1;
    this.summary.changes.push(`${kind} ${id}: updated (${fields.join(', ')})`);
  }
}
