import { randomUUID } from 'node:crypto';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import { DatabaseUnavailableError, type AuditRepository } from '../domain/iam-repository';
import type { AuditEventRecord } from '../domain/records';
import { recordedWeight } from '../domain/recorded-decisions';
import { SpoolFullError, type AuditSpool } from './audit-spool';
import { AnonymousAuditLimit, capOwnEvent, describeFailure } from './audit-limits';

/** What a caller tells the audit trail; `occurredAt` defaults to now. */
export type AuditInput = Omit<AuditEventRecord, 'occurredAt' | 'id' | 'eventId' | 'details' | 'targetType' | 'targetId' | 'decisionId' | 'clientAddress' | 'requestId'> &
  Partial<Pick<AuditEventRecord, 'occurredAt' | 'details' | 'targetType' | 'targetId' | 'decisionId' | 'clientAddress' | 'requestId'>>;

/** Events per INSERT: one statement stays well inside `database.query-timeout` and the database thread's turn. */
export const AUDIT_WRITE_CHUNK = 500;
/** A chunk this small that still times out says the database is away, not that the chunk is too big. */
const MIN_WRITE_CHUNK = 25;
/** Most a spool file takes from a full buffer (weighed as the buffer is: an event counts its decisions). */
const MAX_SPILL = 5000;
/** Why events waiting for the spool were dropped: the disk has fallen behind by a whole buffer. */
const SPOOL_BEHIND = 'the spool is a whole buffer behind: the disk does not keep up';

export interface AuditTrailOptions {
  flushIntervalMs: number;
  /**
   * What memory keeps while the database is away or slow (default 50,000): events, an event holding several
   * decisions (a check call's row) counting each; beyond it the oldest go to the spool. As much again may wait
   * for the disk; beyond that, while the disk does not keep up, the oldest are dropped (spool_full, counted).
   */
  maxBuffered?: number;
  /**
   * Where events go that memory cannot keep: the oldest part of a full buffer while the database is away
   * (bounded by the spool's `maxBytes`), and what is unwritten at stop. Replayed when the database answers and at
   * start. null = none: a full buffer drops its oldest events, and events still buffered at stop are lost, loudly.
   */
  spool?: AuditSpool | null;
  /** Audit rows per minute and kind for events of unauthenticated requests (the rest are counted). */
  anonymousDenialsPerMinute?: number;
  /** How long `close()` tries to write before spooling. */
  closeWriteMs?: number;
  /** Events per INSERT (default {@link AUDIT_WRITE_CHUNK}); a chunk that times out is retried in smaller ones. */
  writeChunk?: number;
  /** The clock of the per-minute budgets (default `Date.now`; tests inject one). */
  now?: () => number;
  /** `iam_audit_events_written_total`, `iam_audit_events_spooled_total{reason}`, `iam_audit_events_dropped_total{reason}`. */
  metrics?: AuditTrailMetrics;
}

export type AuditTrailMetrics = Pick<GatewayMetrics, 'auditDropped' | 'auditWritten' | 'auditSpooled'>;

/**
 * Why an event is not stored (`reason` of `iam_audit_events_dropped_total`): rate_limited (an event of an
 * unauthenticated request beyond the per-minute budget, only counted in the summary row), buffer_full (the oldest
 * of a full buffer, without a spool), spool_full (the oldest of a full buffer that the spool could not take: at its
 * budget, the disk refused, or the disk was a whole buffer behind), refused (the database refused the row for its content), unreadable (a spooled line
 * that does not parse), lost (neither written nor spooled at stop).
 */
export const AUDIT_DROP_REASONS = ['rate_limited', 'buffer_full', 'spool_full', 'refused', 'unreadable', 'lost'] as const;
type DropReason = (typeof AUDIT_DROP_REASONS)[number];

/** Why events went to the disk spool (`reason` of `iam_audit_events_spooled_total`). */
export const AUDIT_SPOOL_REASONS = ['stop', 'buffer_full'] as const;
type SpoolReason = (typeof AUDIT_SPOOL_REASONS)[number];

type CounterChild = { inc(value?: number): void };

/** The counter children, bound once (recordUnauthenticated runs on the request path of every scanner probe). */
interface BoundAuditMetrics {
  written: CounterChild;
  spooled: Record<SpoolReason, CounterChild>;
  dropped: Record<DropReason, CounterChild>;
}

const NO_COUNT: CounterChild = { inc: () => undefined };

/**
 * The audit trail for events raised on request paths (logins, session changes, denials). Events are
 * buffered and written in batches off the request path, so a proxied request never waits for the database;
 * `flush()` writes what is buffered (before reading the trail, and at shutdown).
 *
 * While the database is unreachable events are kept and retried. The memory buffer is bounded (an event weighs its
 * decisions: a check call's row counts up to 100): when it is full its oldest part is moved to the disk spool
 * (fsynced, a chunk per file) rather than dropped, so evidence recorded before a flood survives the flood; only
 * beyond the spool's byte budget are events dropped, counted. The move is never made in `record()`'s turn: the
 * oldest part leaves the buffer at once and is serialized and written on later turns, one file at a time, in
 * order, so a request never waits for a disk (docs/threat-model.md). When the database answers again what is on
 * its way to the spool is written there first, then the spool (it holds the oldest events), then the buffer.
 *
 * Writes go in chunks of {@link AUDIT_WRITE_CHUNK} events: a backlog never becomes one statement that cannot finish
 * within `database.query-timeout` nor hogs the database thread the logins share. A chunk that times out is retried
 * at half the size (the timeout was the chunk's, not the database's) down to a floor; only there is the database
 * taken as unavailable. Every event carries an id given here, and the database skips an id it has, so a chunk
 * that committed before its timeout, or a spool file replayed twice, is stored once.
 *
 * A batch the database refuses for its content is written event by event: the refused event is dropped and
 * reported once (its action and request id, never its values or the SQL), the others are stored. At stop, what
 * cannot be written is spooled and written at the next start. Admin changes and session endings (logout,
 * revocations) do not come through here: their rows are written in the same transaction as the change.
 */
export class AuditTrail {
  private buffer: AuditEventRecord[] = [];
  /** What `buffer` weighs against `maxBuffered` ({@link recordedWeight}). */
  private weight = 0;
  /** The oldest events moved out of a full buffer, oldest first, waiting for the spool; with their weight. */
  private toSpill: AuditEventRecord[] = [];
  private toSpillWeight = 0;
  /** The file being written to the spool now (with its weight), and the run of writes that empties `toSpill`. */
  private spilling: AuditEventRecord[] = [];
  private spillingWeight = 0;
  private spiller: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  /** Events dropped since the last flush's report: from a full buffer without a spool, and those the spool refused. */
  private dropped = 0;
  private spoolRefused = 0;
  private spoolFailure: unknown = null;
  private unavailableSince: number | null = null;
  /** Spool files this process holds (claimed at start, or moved there from a full buffer), oldest first. */
  private spooledFiles: string[] = [];
  /** The claim of earlier stops' files, started by `start()`; flushes wait for it. */
  private claiming: Promise<void> = Promise.resolve();
  /** The batch being written now (spooled if the stop cannot wait for it). */
  private inFlight: AuditEventRecord[] = [];
  /** Events per INSERT now: halved when a chunk times out, grown back as chunks are written. */
  private chunk: number;
  private readonly maxChunk: number;
  private readonly anonymous: AnonymousAuditLimit;
  private readonly maxBuffered: number;
  private readonly spill: number;
  private readonly now: () => number;
  private readonly counts: BoundAuditMetrics;

  constructor(
    private readonly repository: Pick<AuditRepository, 'insertAudit'>,
    private readonly logger: Logger,
    private readonly options: AuditTrailOptions,
  ) {
    this.maxBuffered = options.maxBuffered ?? 50_000;
    // Half the buffer (at most MAX_SPILL) per spool file: few files, and memory keeps the newest half.
    this.spill = Math.max(1, Math.min(MAX_SPILL, Math.floor(this.maxBuffered / 2)));
    this.maxChunk = Math.max(1, options.writeChunk ?? AUDIT_WRITE_CHUNK);
    this.chunk = this.maxChunk;
    this.now = options.now ?? Date.now;
    this.anonymous = new AnonymousAuditLimit(options.anonymousDenialsPerMinute ?? 60);
    this.counts = bindMetrics(options.metrics);
  }

  /**
   * Events in memory, not yet stored: buffered, being written, or on their way to the spool (`iam_audit_queue_depth`;
   * the spool is counted in bytes).
   */
  get queueDepth(): number {
    return this.buffer.length + this.inFlight.length + this.toSpill.length + this.spilling.length;
  }

  /**
   * Claims the events spooled by earlier stops (they are written with the next flush) and starts the flush
   * timer; resolves once the claim is done, rejects when the spool directory cannot be read.
   */
  start(): Promise<void> {
    const spool = this.options.spool;
    const claim = spool ? spool.claim().then((files) => void this.spooledFiles.unshift(...files)) : Promise.resolve();
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

  /** An event of an authenticated caller, or one whose rate something else bounds (failed logins: the login limiter). */
  record(input: AuditInput): void {
    this.push(build(input));
  }

  /**
   * An event raised by a request nobody authenticated (an anonymous denial or shadow "would deny", a failed OpenID
   * Connect callback): anyone can send as many as they like, so it is recorded like any event up to
   * `anonymousDenialsPerMinute` per kind, then only counted; the count is written as one `<action>.suppressed` row.
   */
  recordUnauthenticated(input: AuditInput): void {
    if (this.anonymous.admit(input, this.now())) this.push(build(input));
    else this.counts.dropped.rate_limited.inc();
  }

  private push(event: AuditEventRecord): void {
    this.buffer.push(event);
    this.weight += recordedWeight(event);
    if (this.weight > this.maxBuffered) this.relieve();
    if (this.options.flushIntervalMs <= 0) void this.flush();
  }

  /** The oldest events of the buffer weighing at least `weight` (all of it at most), taken out of it. */
  private takeOldest(weight: number): { events: AuditEventRecord[]; weight: number } {
    let taken = 0;
    let count = 0;
    while (count < this.buffer.length && taken < weight) taken += recordedWeight(this.buffer[count++]!);
    this.weight -= taken;
    return { events: this.buffer.splice(0, count), weight: taken };
  }

  /**
   * The buffer is over its bound: its oldest part leaves it for the spool (or, without a spool, the overflow is
   * dropped). Called from `record()`: it only moves the events to `toSpill`; {@link spillAll} writes them on later
   * turns. While as much as a whole buffer already waits for the disk, the part is dropped instead (counted, and
   * reported by the next flush): memory stays bounded when the disk does not keep up.
   */
  private relieve(): void {
    const overflow = this.weight - this.maxBuffered;
    if (overflow <= 0) return;
    const spool = this.options.spool;
    if (!spool) {
      const { events } = this.takeOldest(overflow);
      this.dropped += events.length;
      this.counts.dropped.buffer_full.inc(events.length);
      return;
    }
    const oldest = this.takeOldest(Math.max(overflow, this.spill));
    if (this.toSpillWeight + this.spillingWeight + oldest.weight > this.maxBuffered) {
      this.refusedBySpool(oldest.events.length, SPOOL_BEHIND);
      return;
    }
    for (const event of oldest.events) this.toSpill.push(event);
    this.toSpillWeight += oldest.weight;
    this.startSpill();
  }

  /** Events the spool cannot take: the ones already on disk are older and stay. Reported by the next flush. */
  private refusedBySpool(events: number, failure: unknown): void {
    this.counts.dropped.spool_full.inc(events);
    this.spoolRefused += events;
    this.spoolFailure = failure;
  }

  private startSpill(): void {
    if (this.spiller !== null) return;
    this.spiller = this.spillAll().finally(() => {
      this.spiller = null;
      // Moved there after the last write's check, before this ran: its own run.
      if (this.toSpill.length > 0) this.startSpill();
    });
  }

  /** Writes `toSpill` to the spool, oldest first, a file of about `spill` at a time, off `record()`'s turn. */
  private async spillAll(): Promise<void> {
    const spool = this.options.spool!;
    // record() returns first: nothing of the write (not even serializing) runs in its turn.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.toSpill.length > 0) {
      let count = 0;
      let weight = 0;
      while (count < this.toSpill.length && weight < this.spill) weight += recordedWeight(this.toSpill[count++]!);
      this.spilling = this.toSpill.splice(0, count);
      this.spillingWeight = weight;
      this.toSpillWeight -= weight;
      try {
        this.spooledFiles.push(await spool.write(this.spilling, { claimed: true, bounded: true }));
        this.counts.spooled.buffer_full.inc(this.spilling.length);
      } catch (error) {
        this.refusedBySpool(this.spilling.length, error instanceof SpoolFullError ? error.message : describeFailure(error));
      } finally {
        this.spilling = [];
        this.spillingWeight = 0;
      }
    }
  }

  /**
   * Resolves once nothing waits for the spool: what a full buffer moved there is in a file (or was dropped, counted).
   * Flushes and the stop wait for it; so does a caller that must know the memory is relieved.
   */
  async spilled(): Promise<void> {
    while (this.spiller !== null) await this.spiller;
  }

  /** Writes everything buffered so far; resolves when it is stored (or failed and was kept for a retry). */
  async flush(): Promise<void> {
    await this.claiming;
    while (this.flushing) await this.flushing;
    for (const summary of this.anonymous.takeSummaries(this.now())) this.push(summary);
    if (this.buffer.length === 0 && this.spooledFiles.length === 0) return;
    this.flushing = this.writeAll().finally(() => {
      this.flushing = null;
    });
    await this.flushing;
    if (this.dropped > 0) {
      this.logger.error({ dropped: this.dropped }, 'audit: buffer was full, oldest events dropped');
      this.dropped = 0;
    }
    if (this.spoolRefused > 0) {
      this.logger.error({ dropped: this.spoolRefused, failure: this.spoolFailure }, 'audit: buffer was full and the spool could not take its oldest events; they are dropped');
      this.spoolRefused = 0;
    }
  }

  private async writeAll(): Promise<void> {
    // The spool first: it holds the oldest events (earlier stops, then what a full buffer moved there); what is on
    // its way there is older than the buffer, so it is awaited, however often a write lets a new spill begin.
    for (;;) {
      if (this.spiller !== null) {
        await this.spilled();
        continue;
      }
      const path = this.spooledFiles[0];
      if (path === undefined) break;
      const spool = this.options.spool!;
      const { items: events, unreadable } = await spool.read(path);
      if (unreadable > 0) {
        this.logger.error({ file: path, unreadable }, 'audit: spooled lines could not be read, skipped');
        this.counts.dropped.unreadable.inc(unreadable);
      }
      // A file written in part before an outage is written again whole: the stored ids are skipped.
      if ((await this.write(events)).length > 0) return; // database unavailable: the file stays claimed
      await spool.remove(path);
      this.spooledFiles.shift();
      this.logger.info({ file: path, events: events.length }, 'audit: spooled events written');
    }
    const batch = this.buffer;
    this.buffer = [];
    this.weight = 0;
    this.inFlight = batch;
    try {
      const unwritten = await this.write(batch, true);
      if (unwritten.length > 0) {
        // Events recorded while the batch was out may not all fit beside it: the oldest go to the spool, as in push().
        this.buffer = unwritten.concat(this.buffer);
        for (const event of unwritten) this.weight += recordedWeight(event);
        this.relieve();
      }
    } finally {
      this.inFlight = [];
    }
  }

  /**
   * Writes `events` in chunks; returns those kept for a retry (the database is unavailable), in order. `inFlight`:
   * they are the buffer's batch, and what is written leaves `this.inFlight` (a stop spools only the rest).
   */
  private async write(events: AuditEventRecord[], inFlight = false): Promise<AuditEventRecord[]> {
    let at = 0;
    while (at < events.length) {
      const chunk = events.slice(at, at + this.chunk);
      const kept = await this.writeChunk(chunk);
      if (kept === 'smaller') continue;
      if (kept.length > 0) return kept.concat(events.slice(at + chunk.length));
      at += chunk.length;
      if (inFlight) this.inFlight = events.slice(at);
      // Back towards the full size a little per chunk written (after a timeout, not straight into another).
      this.chunk = Math.min(this.maxChunk, Math.ceil(this.chunk * 1.25));
    }
    this.available();
    return [];
  }

  /**
   * Writes one chunk; returns the events kept for a retry (the database is unavailable), or 'smaller' when the
   * chunk timed out and the next try should be smaller (this.chunk is halved).
   */
  private async writeChunk(events: AuditEventRecord[]): Promise<AuditEventRecord[] | 'smaller'> {
    try {
      await this.repository.insertAudit(events);
      this.counts.written.inc(events.length);
      return [];
    } catch (error) {
      if (error instanceof DatabaseUnavailableError && error.timedOut && events.length > MIN_WRITE_CHUNK) {
        // Our statement was too big for database.query-timeout, or the database is slow: not an outage yet. Whatever
        // of it committed is skipped by its ids when it is written again.
        this.chunk = Math.max(MIN_WRITE_CHUNK, Math.floor(events.length / 2));
        this.logger.warn({ events: events.length, next: this.chunk }, 'audit: a write timed out; writing smaller chunks');
        return 'smaller';
      }
      if (this.unavailable(error, events.length)) return events;
    }
    // The database refused the chunk for its content: find the event(s) it refuses, keep the rest.
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
   * events could be neither written nor spooled, so the stop is not reported as clean. Spool files not written
   * yet stay on disk for the next start.
   */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const summary of this.anonymous.takeSummaries(this.now(), true)) this.push(summary);
    const written = this.flush().then(() => true);
    const settled = await Promise.race([written, new Promise<false>((resolve) => setTimeout(() => resolve(false), this.options.closeWriteMs ?? 1500).unref())]);
    // What is on its way to the spool gets there before the stop (the disk, not the database, is waited for).
    await this.spilled();
    // A write still in flight is spooled too: at least once, never lost (its ids make a second copy harmless).
    const pending = settled ? this.buffer : this.inFlight.concat(this.buffer);
    this.buffer = [];
    this.weight = 0;
    if (pending.length === 0) return;
    let path: string;
    try {
      if (!this.options.spool) throw new Error('no spool directory is configured');
      // Not bounded by the budget: at most the buffer's worth, and the alternative is losing it.
      path = await this.options.spool.write(pending);
    } catch (error) {
      this.counts.dropped.lost.inc(pending.length);
      this.logger.error({ events: pending.length, failure: (error as Error).message }, 'audit: events could be neither written nor spooled at stop; they are LOST');
      throw error;
    }
    this.counts.spooled.stop.inc(pending.length);
    this.logger.warn({ events: pending.length, file: path }, 'audit: database unavailable at stop; events spooled, written at the next start');
  }
}

/** The stored shape of an input: defaults, its own id (idempotent writes), bounded sizes. */
function build(input: AuditInput): AuditEventRecord {
  // A new object: bounded in place.
  return capOwnEvent({
    occurredAt: new Date(),
    targetType: null,
    targetId: null,
    decisionId: null,
    clientAddress: null,
    requestId: null,
    details: null,
    ...input,
    eventId: randomUUID(),
  });
}

function bindMetrics(metrics: AuditTrailMetrics | undefined): BoundAuditMetrics {
  if (!metrics) {
    return {
      written: NO_COUNT,
      spooled: { stop: NO_COUNT, buffer_full: NO_COUNT },
      dropped: { rate_limited: NO_COUNT, buffer_full: NO_COUNT, spool_full: NO_COUNT, refused: NO_COUNT, unreadable: NO_COUNT, lost: NO_COUNT },
    };
  }
  const dropped = {} as Record<DropReason, CounterChild>;
  for (const reason of AUDIT_DROP_REASONS) {
    dropped[reason] = metrics.auditDropped.labels(reason);
    // Every reason's series exists from the start (at 0), so increase() sees the first drop.
    dropped[reason].inc(0);
  }
  const spooled = {} as Record<SpoolReason, CounterChild>;
  for (const reason of AUDIT_SPOOL_REASONS) {
    spooled[reason] = metrics.auditSpooled.labels(reason);
    spooled[reason].inc(0);
  }
  return { written: metrics.auditWritten, spooled, dropped };
}
