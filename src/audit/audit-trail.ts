import type { Logger } from '../observability/logger';
import type { IamRepository } from '../persistence/iam-repository';
import type { AuditEventRecord } from '../persistence/records';

/** What a caller tells the audit trail; `occurredAt` defaults to now. */
export type AuditInput = Omit<AuditEventRecord, 'occurredAt' | 'id' | 'details' | 'targetType' | 'targetId' | 'decisionId' | 'clientAddress' | 'requestId'> &
  Partial<Pick<AuditEventRecord, 'occurredAt' | 'details' | 'targetType' | 'targetId' | 'decisionId' | 'clientAddress' | 'requestId'>>;

/**
 * The audit trail for events raised on request paths (logins, session changes, denials). Events are
 * buffered and written in batches off the request path, so a proxied request never waits for the database;
 * `flush()` writes what is buffered (before reading the trail, and at shutdown). If the database is
 * unreachable the batch is kept and retried; the buffer is bounded and says in the log what it dropped.
 * Admin changes do not come through here: they are written in the same transaction as the change.
 */
export class AuditTrail {
  private buffer: AuditEventRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private dropped = 0;

  constructor(
    private readonly repository: Pick<IamRepository, 'insertAudit'>,
    private readonly logger: Logger,
    private readonly flushIntervalMs: number,
    private readonly maxBuffered = 50_000,
  ) {}

  start(): void {
    if (this.timer || this.flushIntervalMs <= 0) return;
    this.timer = setInterval(() => void this.flush(), this.flushIntervalMs);
    this.timer.unref();
  }

  record(input: AuditInput): void {
    const event: AuditEventRecord = {
      occurredAt: new Date(),
      targetType: null,
      targetId: null,
      decisionId: null,
      clientAddress: null,
      requestId: null,
      details: null,
      ...input,
    };
    if (this.buffer.length >= this.maxBuffered) {
      this.buffer.shift();
      this.dropped++;
    }
    this.buffer.push(event);
    if (this.flushIntervalMs <= 0) void this.flush();
  }

  /** Writes everything buffered so far; resolves when it is stored (or failed and was kept for a retry). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    this.flushing = this.repository
      .insertAudit(batch)
      .catch((error: unknown) => {
        this.logger.warn({ err: error, events: batch.length }, 'audit: write failed, keeping events for a retry');
        this.buffer = batch.concat(this.buffer).slice(-this.maxBuffered);
      })
      .finally(() => {
        this.flushing = null;
      });
    await this.flushing;
    if (this.dropped > 0) {
      this.logger.error({ dropped: this.dropped }, 'audit: buffer was full, oldest events dropped');
      this.dropped = 0;
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}
