import type { Logger } from '../observability/logger';
import type { ChangeFeedRepository } from '../domain/iam-repository';
import type { StoreEvent } from '../domain/token-record';
import type { TokenEvents, TokenRecords } from '../domain/token-store';

export interface ChangeFeedOptions {
  repository: Pick<ChangeFeedRepository, 'listChanges' | 'claimChanges' | 'markChangesDelivered'>;
  store: Pick<TokenRecords, 'deleteToken'> & Pick<TokenEvents, 'publish'>;
  /** Applies an event to this instance's caches and revocation registry (the events channel's handler). */
  apply: (event: StoreEvent) => void;
  logger: Pick<Logger, 'warn' | 'info'>;
  /** `iam.changes.poll-interval`: how often the feed is read and undelivered rows are retried. */
  intervalMs: number;
  /** Read the feed after this id (RevocationState.cursor). */
  cursor: number;
}

/** How long a claimed row is left to its deliverer before another instance may deliver it. */
const LEASE_MS = 5_000;
const BATCH = 100;
const READ_BATCH = 1000;
/** An id skipped by the feed is looked for again this long (a transaction that committed late), then dropped. */
const GAP_RETENTION_MS = 60_000;

/**
 * Both ends of the change feed (`iam_changes`, see adapters/postgres/change-log.ts), off the request path:
 *  - deliver: applies each undelivered row's token-store effect (the token deleted), publishes it on the
 *    events channel and marks it delivered; a row whose delivery failed stays and is retried every interval
 *    by whichever instance claims it, so a committed change is enforced even if its first publish failed;
 *  - read: every interval each instance reads the rows it has not seen and applies them locally, so an event
 *    lost on the channel (a dropped subscriber, a publish that failed) is applied within one interval.
 */
export class ChangeFeed {
  private cursor: number;
  private readonly gaps = new Map<number, number>();
  /** The delivery running now, and at most one queued behind it (shared by every caller meanwhile). */
  private delivering: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | null = null;
  private failing = { read: false, deliver: false };

  constructor(private readonly options: ChangeFeedOptions) {
    this.cursor = options.cursor;
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.ticking;
    await this.queued;
    await this.delivering;
  }

  /** One round: read the feed and retry undelivered rows. */
  tick(): Promise<void> {
    this.ticking ??= Promise.all([this.read().catch((error: unknown) => this.report('read', error)), this.deliver()]).then(
      () => {
        this.ticking = null;
      },
    );
    return this.ticking;
  }

  /**
   * Delivers every undelivered row (those just committed included); never rejects: what could not be
   * delivered now stays in the feed for the next round.
   */
  deliver(): Promise<void> {
    if (this.queued) return this.queued;
    if (this.delivering) {
      // Rows committed now may have been claimed too late for the running round: one more round follows it.
      this.queued = this.delivering.then(() => {
        this.queued = null;
        return this.deliver();
      });
      return this.queued;
    }
    this.delivering = this.deliverAll()
      .then(
        () => this.recovered('deliver'),
        (error: unknown) => this.report('deliver', error),
      )
      .finally(() => {
        this.delivering = null;
      });
    return this.delivering;
  }

  /** Reads the rows this instance has not seen yet and applies them. */
  async read(): Promise<void> {
    for (;;) {
      const rows = await this.options.repository.listChanges(this.cursor, [...this.gaps.keys()], READ_BATCH);
      const from = this.cursor;
      let highest = from;
      const seen = new Set<number>();
      for (const row of rows) {
        seen.add(row.id);
        this.gaps.delete(row.id);
        this.options.apply(row.event);
        if (row.id > highest) highest = row.id;
      }
      const nowMs = Date.now();
      // Ids are taken at insert but rows appear at commit: an id skipped now may still come.
      for (let id = from + 1; id < highest && this.gaps.size < READ_BATCH; id++) if (!seen.has(id)) this.gaps.set(id, nowMs);
      for (const [id, since] of this.gaps) if (nowMs - since > GAP_RETENTION_MS) this.gaps.delete(id);
      this.cursor = highest;
      this.recovered('read');
      if (rows.length < READ_BATCH) return;
    }
  }

  private async deliverAll(): Promise<void> {
    for (;;) {
      const rows = await this.options.repository.claimChanges(BATCH, LEASE_MS);
      if (rows.length === 0) return;
      const done: number[] = [];
      try {
        for (const row of rows) {
          await this.effects(row.event);
          done.push(row.id);
        }
      } finally {
        if (done.length > 0) await this.options.repository.markChangesDelivered(done);
      }
      if (rows.length < BATCH) return;
    }
  }

  private async effects(event: StoreEvent): Promise<void> {
    // This instance first, without waiting for its own publish to come back.
    this.options.apply(event);
    // The feed's session-ended rows always name the token (change-log.ts).
    if (event.type === 'session-ended' && event.tokenHash !== undefined && event.userId !== undefined) await this.options.store.deleteToken(event.tokenHash, event.userId, event.sessionId);
    await this.options.store.publish(event);
  }

  private report(what: 'read' | 'deliver', error: unknown): void {
    if (this.failing[what]) return;
    this.failing[what] = true;
    this.options.logger.warn({ err: error }, `change feed: ${what === 'read' ? 'reading' : 'delivering'} changes failed; retrying every ${this.options.intervalMs} ms`);
  }

  private recovered(what: 'read' | 'deliver'): void {
    if (!this.failing[what]) return;
    this.failing[what] = false;
    this.options.logger.info({}, `change feed: ${what === 'read' ? 'reading' : 'delivering'} changes works again`);
  }
}
