import type { AuditEventRecord } from '../domain/records';
import { DiskSpool } from './disk-spool';

/**
 * Audit events that could not be written before a stop (database down), kept in `iam.audit.spool-dir` and
 * written at the next start, so no event is lost across a stop (#11.36): one file per stop, written by
 * `AuditTrail.close()`. The file handling (fsync, claim by rename, replay) is the shared disk spool's.
 */
export class AuditSpool extends DiskSpool<AuditEventRecord> {
  constructor(dir: string) {
    super(dir, 'audit', (parsed) => {
      const event = parsed as AuditEventRecord & { occurredAt: string };
      if (typeof event !== 'object' || event === null || typeof event.action !== 'string') throw new TypeError('not an audit event');
      return { ...event, occurredAt: new Date(event.occurredAt) };
    });
  }
}
