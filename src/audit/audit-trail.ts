import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import { DatabaseUnavailableError, type IamRepository } from '../domain/iam-repository';
import type { AuditEventRecord } from '../domain/records';
import type { AuditSpool } from './audit-spool';
import { AnonymousDenialLimit, capEvent, describeFailure } from './audit-limits';

/** What a caller tells the audit trail; `occurredAt` defaults to now. */
export type AuditInput = Omit<AuditEventRecord, 'occurredAt' | 'id' | 'details' | 'targetType' | 'targetId' | 'decisionId' | 'clientAddress' | 'requestId'> &
  Partial<Pick<AuditEventRecord, 'occurredAt' | 'details' | 'targetType' | 'targetId' | 'decisionId' | 'clientAddress' | 'requestId'>>;

export interface AuditTrailOptions {
  flushIntervalMs: number;
  maxBuffered?: number;
  /** Where unwritten events go at stop, replayed at start; null = none (events still buffered are lost, loudly). */
  spool?: AuditSpool | null;
  /** Audit rows per minute for anonymous denials of undeclared routes (the rest are counted). */
  anonymousDenialsPerMinute?: number;
  /** How long `close()` tries to write before spooling. */
  closeWriteMs?: number;
  /** `iam_audit_events_written_total`, `iam_audit_events_spooled_total`, `iam_audit_events_dropped_total{reason}`. */
  metrics?: AuditTrailMetrics;
}

export type AuditTrailMetrics = Pick<GatewayMetrics, 'auditDropped' | 'auditWritten' | 'auditSpooled'>;

/**
 * Why an event is not stored (`reason` of `iam_audit_events_dropped_total`): rate_limited (an anonymous denial
 * beyond the per-minute budget, only counted in the summary row), buffer_full (the oldest of a full buffer),
 * refused (the database refused the row for its content), unreadable (a spooled line that does not parse),
 * lost (neither written nor spooled at stop).
 */
export const AUDIT_DROP_REASONS = ['rate_limited', 'buffer_full', 'refused', 'unreadable', 'lost'] as const;
type DropReason = (typeof AUDIT_DROP_REASONS)[number];

type CounterChild = { inc(value?: number): void };

/** The counter children, bound once (recordAnonymousDenial runs on the request path of every scanner probe). */
interface BoundAuditMetrics {
  written: CounterChild;
  spooled: CounterChild;
  dropped: Record<DropReason, CounterChild>;
}

const NO_COUNT: CounterChild = { inc: () => undefined };

/**
 * The audit trail for events raised on request paths (logins, profile switches, denials). Events are
 * buffered and written in batches off the request path, so a proxied request never waits for the database;
 * `flush()` writes what is buffered (before reading the trail, and at shutdown). If the database is
 * unreachable the batch is kept and retried; the buffer is bounded and says in the log what it dropped.
 * A batch the database refuses for its content is written event by event: the refused event is dropped
 * and reported once (its action and request id, never its values or the SQL), the others are stored.
 * At stop, what cannot be written is spooled to a local file and written at the next start.
 * Admin changes and session endings (logout, revocations) do not come through here: their rows are written in
 * the same transaction as the change.
 */
export class AuditTrail {
  private buffer: AuditEventRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private dropped = 0;
  private unavailableSince: number | null = null;
  private spooledFiles: string[] = [];
  /** The claim of earlier stops' files, started by `start()`; flushes wait for it. */
  private claiming: Promise<void> = Promise.resolve();
  /** The batch being written now (spooled if the stop cannot wait for it). */
  private inFlight: AuditEventRecord[] = [];
  private readonly anonymous: AnonymousDenialLimit;
  private readonly maxBuffered: number;
  private readonly counts: BoundAuditMetrics;

  constructor(
    private readonly repository: Pick<IamRepository, 'insertAudit'>,
    private readonly logger: Logger,
    private readonly options: AuditTrailOptions,
  ) {
    this.maxBuffered = options.maxBuffered ?? 50_000;
    this.anonymous = new AnonymousDenialLimit(options.anonymousDenialsPerMinute ?? 60);
    this.counts = bindMetrics(options.metrics);
  }

  /** Events buffered or being written, not yet stored (`iam_audit_queue_depth`). */
  get queueDepth(): number {
    return this.buffer.length + this.inFlight.length;
  }

  /**
   * Claims the events spooled by earlier stops (they are written with the next flush) and starts the flush
   * timer; resolves once the claim is done, rejects when the spool directory cannot be read.
   */
  start(): Promise<void> {
    const spool = this.options.spool;
    const claim = spool ? spool.claim().then((files) => void this.spooledFiles.push(...files)) : Promise.resolve();
    // Flushes wait for the claim; its failure is the caller's to report (the start fails).
    this.claiming = claim.catch(() => undefined);
    this.startTimer();
    return claim;
  }

  private startTimer(): void {
    if (this.timer || this.options.flushIntervalMs <= 0) return;
    this.timer = setInterval(() => void this.flush(), this.options.flushIntervalMs);
    this.timer.unref();
  }

  record(input: AuditInput): void {
    this.push(
      capEvent({
        occurredAt: new Date(),
        targetType: null,
        targetId: null,
        decisionId: null,
        clientAddress: null,
        requestId: null,
        details: null,
        ...input,
      }),
    );
  }

  /**
   * An anonymous request to a route no policy declares (scanners): recorded like any event up to
   * `anonymousDenialsPerMinute`, then only counted; the count is written as one `authz.deny.suppressed` row.
   */
  recordAnonymousDenial(input: AuditInput): void {
    if (this.anonymous.admit(Date.now())) this.record(input);
    else this.counts.dropped.rate_limited.inc();
  }

  private push(event: AuditEventRecord): void {
    if (this.buffer.length >= this.maxBuffered) {
      this.buffer.shift();
      this.dropped++;
      this.counts.dropped.buffer_full.inc();
    }
    this.buffer.push(event);
    if (this.options.flushIntervalMs <= 0) void this.flush();
  }

  /** Writes everything buffered so far; resolves when it is stored (or failed and was kept for a retry). */
  async flush(): Promise<void> {
    await this.claiming;
    while (this.flushing) await this.flushing;
    const summary = this.anonymous.takeSummary(Date.now());
    if (summary) this.push(summary);
    if (this.buffer.length === 0 && this.spooledFiles.length === 0) return;
    this.flushing = this.writeAll().finally(() => {
      this.flushing = null;
    });
    await this.flushing;
    if (this.dropped > 0) {
      this.logger.error({ dropped: this.dropped }, 'audit: buffer was full, oldest events dropped');
      this.dropped = 0;
    }
  }

  private async writeAll(): Promise<void> {
    while (this.spooledFiles.length > 0) {
      const path = this.spooledFiles[0]!;
      const { items: events, unreadable } = await this.options.spool!.read(path);
      if (unreadable > 0) {
        this.logger.error({ file: path, unreadable }, 'audit: spooled lines could not be read, skipped');
        this.counts.dropped.unreadable.inc(unreadable);
      }
      if ((await this.write(events)).length > 0) return; // database unavailable: the file stays claimed
      await this.options.spool!.remove(path);
      this.spooledFiles.shift();
      this.logger.info({ file: path, events: events.length }, 'audit: spooled events written');
    }
    const batch = this.buffer;
    this.buffer = [];
    this.inFlight = batch;
    try {
      const unwritten = await this.write(batch);
      if (unwritten.length > 0) {
        const kept = unwritten.concat(this.buffer);
        // Events recorded while the batch was out may not all fit beside it: the oldest go, as in push().
        const overflow = kept.length - this.maxBuffered;
        if (overflow > 0) {
          this.dropped += overflow;
          this.counts.dropped.buffer_full.inc(overflow);
        }
        this.buffer = overflow > 0 ? kept.slice(overflow) : kept;
      }
    } finally {
      this.inFlight = [];
    }
  }

  /** Writes `events`; returns those kept for a retry (the database is unavailable), in order. */
  private async write(events: AuditEventRecord[]): Promise<AuditEventRecord[]> {
    if (events.length === 0) return [];
    try {
      await this.repository.insertAudit(events);
      this.counts.written.inc(events.length);
      this.available();
      return [];
    } catch (error) {
      if (this.unavailable(error, events.length)) return events;
    }
    // The database refused the batch for its content: find the event(s) it refuses, keep the rest.
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      try {
        await this.repository.insertAudit([event]);
        this.counts.written.inc();
      } catch (error) {
        if (this.unavailable(error, events.length - i)) return events.slice(i);
        this.counts.dropped.refused.inc();
        this.logger.error(
          { action: event.action, requestId: event.requestId, occurredAt: event.occurredAt, failure: describeFailure(error) },
          'audit: the database refused an event; it is dropped',
        );
      }
    }
    this.available();
    return [];
  }

  private unavailable(error: unknown, events: number): boolean {
    if (!(error instanceof DatabaseUnavailableError)) return false;
    // Logged when the outage starts, not at every retry, and without the SQL or its values.
    if (this.unavailableSince === null) {
      this.unavailableSince = Date.now();
      this.logger.warn({ events, failure: describeFailure(error) }, 'audit: database unavailable, keeping events for a retry');
    }
    return true;
  }

  private available(): void {
    if (this.unavailableSince === null) return;
    this.logger.info({ unavailableMs: Date.now() - this.unavailableSince }, 'audit: database available again, buffered events written');
    this.unavailableSince = null;
  }

  /**
   * Writes what is buffered (trying for `closeWriteMs`), then spools what is still unwritten. Throws when
   * events could be neither written nor spooled, so the stop is not reported as clean.
   */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const summary = this.anonymous.takeSummary(Date.now(), true);
    if (summary) this.push(summary);
    const written = this.flush().then(() => true);
    const settled = await Promise.race([written, new Promise<false>((resolve) => setTimeout(() => resolve(false), this.options.closeWriteMs ?? 1500).unref())]);
    // A write still in flight is spooled too: at least once, never lost.
    const pending = settled ? this.buffer : this.inFlight.concat(this.buffer);
    this.buffer = [];
    if (pending.length === 0) return;
    let path: string;
    try {
      if (!this.options.spool) throw new Error('no spool directory is configured');
      path = await this.options.spool.write(pending);
    } catch (error) {
      this.counts.dropped.lost.inc(pending.length);
      this.logger.error({ events: pending.length, failure: (error as Error).message }, 'audit: events could be neither written nor spooled at stop; they are LOST');
      throw error;
    }
    this.counts.spooled.inc(pending.length);
    this.logger.warn({ events: pending.length, file: path }, 'audit: database unavailable at stop; events spooled, written at the next start');
  }
}

function bindMetrics(metrics: AuditTrailMetrics | undefined): BoundAuditMetrics {
  if (!metrics) return { written: NO_COUNT, spooled: NO_COUNT, dropped: { rate_limited: NO_COUNT, buffer_full: NO_COUNT, refused: NO_COUNT, unreadable: NO_COUNT, lost: NO_COUNT } };
  const dropped = {} as Record<DropReason, CounterChild>;
  for (const reason of AUDIT_DROP_REASONS) {
    dropped[reason] = metrics.auditDropped.labels(reason);
    // Every reason's series exists from the start (at 0), so increase() sees the first drop.
    dropped[reason].inc(0);
  }
  return { written: metrics.auditWritten, spooled: metrics.auditSpooled, dropped };
}
