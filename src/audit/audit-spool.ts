import type { AuditEventRecord } from '../domain/records';
import { DiskSpool } from './disk-spool';

/**
 * Audit events the database could not take yet, kept in `iam.audit.spool-dir`: those still unwritten at a stop
 * (written at the next start, #11.36), and, while the database is away, the oldest part of a full memory buffer
 * (written when it returns), up to `maxBytes`. Events carry their own id and the database skips an id it has
 * (adapters/postgres), so a file replayed twice stores its events once. The file handling (fsync, claim by
 * rename, replay, the byte budget) is the shared disk spool's.
 */
export class AuditSpool extends DiskSpool<AuditEventRecord> {
  constructor(dir: string, maxBytes = Number.POSITIVE_INFINITY) {
    super(
      dir,
      'audit',
      (parsed) => {
        const event = parsed as AuditEventRecord & { occurredAt: string };
        if (typeof event !== 'object' || event === null || typeof event.action !== 'string') throw new TypeError('not an audit event');
        return { ...event, occurredAt: new Date(event.occurredAt) };
      },
      maxBytes,
    );
  }
}

export { SpoolFullError } from './disk-spool';
