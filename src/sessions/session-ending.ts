import type { Logger } from '../observability/logger';
import type { EndedSession, EndingAudit, EndSessionsRequest, EndSessionsResult } from '../domain/changes';
import { DatabaseUnavailableError, type SessionRepository } from '../domain/iam-repository';
import { describeFailure } from '../audit/audit-limits';
import type { EndingSpool } from './ending-spool';
import type { RevocationRegistry } from './revocation-registry';
import type { SessionCache } from './session-cache';
import type { StoreEvent } from '../domain/token-record';
import type { TokenEvents, TokenRecords } from '../domain/token-store';

export interface SessionEndingDeps {
  store: Pick<TokenRecords, 'deleteToken'> & Pick<TokenEvents, 'publish'>;
  repository: Pick<SessionRepository, 'endSessions'>;
  cache: SessionCache | null;
  revocations: RevocationRegistry;
  /** The change feed's deliverer: publishes the recorded change until done (absent in unit tests). */
  changes: { deliver(): Promise<void> } | null;
  logger: Pick<Logger, 'warn' | 'error' | 'info'>;
  /** Where an ending the database could not take waits for it, across a stop (null: in memory only). */
  spool: EndingSpool | null;
}

/** What to end: the sessions the token store knows, and what the durable record must say. */
export interface EndTarget {
  /** Whose sessions; null only for sessions named by id that nobody could look up (the database was down). */
  userId: string | null;
  reason: string;
  logout?: boolean;
  /**
   * Live sessions to end in the token store first, so they stop everywhere at once: deleted there when their
   * token hash is known, and published either way (every instance refuses a published session by its id).
   */
  sessions: Array<{ sessionId: string; tokenHash?: string; expiresAt?: string }>;
  /** Every session of the user ends (published as user-sessions-ended, epoch raised in the record). */
  allSessions?: boolean;
  /** Which sessions the database must end (change-log.ts EndSessionsRequest). */
  durable: Pick<EndSessionsRequest, 'sessionIds' | 'allExcept' | 'raiseEpoch'>;
  /** The audit row of each session the record ends, written with it. */
  audit: EndingAudit;
}

/** The sessions the database ended now; null when its record was deferred (written when the database answers). */
export type EndOutcome = { recorded: EndedSession[] } | { recorded: null };

/** An ending waiting for the database, and its file in the spool (null when it could not be written). */
interface Deferred {
  request: EndSessionsRequest;
  file: string | null;
}

const PENDING_LIMIT = 10_000;

/**
 * Ending sessions (logout, revocation) so that the answer is true and nothing is left half done:
 *  1. the token store: tokens deleted and the end published, so every instance refuses them at once;
 *  2. the durable record: the rows ended, their audit rows and their change-feed rows written in one
 *     transaction (the feed's deliverer then repeats step 1 until it succeeds, and every instance reads the
 *     feed on an interval).
 * One step suffices for the session to be ended everywhere: step 1 at once, step 2 within the feed's
 * interval. The answer says "ended" only when it is in effect everywhere now, that is when step 1 got through:
 * when only step 1 failed, the record stands (and is delivered) but the answer is 503; when both failed, too (and a
 * retry does both again). When only the database
 * failed, its record is written to the spool (fsynced) before the answer and kept in memory: it is written
 * as soon as the database answers, or, if the process stops first, by the next start — done, recorded later,
 * whatever stops next.
 */
export class SessionEnding {
  private readonly pending: Deferred[] = [];
  private retryTimer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private flushing: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly deps: SessionEndingDeps) {}

  get pendingRecords(): number {
    return this.pending.length;
  }

  /** Resolves once the sessions are ended (see above), with what the database recorded now (null: later). */
  async end(target: EndTarget): Promise<EndOutcome> {
    const { revocations } = this.deps;
    // One instant for the whole ending: the rows' revoked_at/logout_at and, for "every session", the user's
    // revocation instant, published at once (step 1) and recorded with the epoch (step 2).
    const at = new Date();
    const events: StoreEvent[] = target.sessions.map((session) => ({
      type: 'session-ended',
      sessionId: session.sessionId,
      ...(session.tokenHash === undefined ? {} : { tokenHash: session.tokenHash }),
      ...(target.userId === null ? {} : { userId: target.userId }),
      reason: target.logout ? 'logout' : target.reason,
      ...(session.expiresAt === undefined ? {} : { expiresAt: session.expiresAt }),
    }));
    if (target.allSessions && target.userId !== null) events.push({ type: 'user-sessions-ended', userId: target.userId, reason: target.reason, revokedAt: at.toISOString() });
    const { error: storeError, deleted } = await this.storeStep(target, events);
    const request: EndSessionsRequest = {
      userId: target.userId,
      reason: target.reason,
      ...(target.logout ? { logout: true } : {}),
      at,
      audit: target.audit,
      ...target.durable,
    };
    try {
      const result = await this.deps.repository.endSessions(request);
      for (const event of events) revocations.apply(event);
      this.applyRecorded(request.userId, result);
      // The recorded change is published until done. The answer waits for it when step 1 did not already
      // say everything: it failed, the epoch was raised, or the record ended sessions the store's index missed.
      const delivery = this.deps.changes?.deliver();
      const known = new Set(target.sessions.map((session) => session.sessionId));
      if (storeError !== null || result.sessionEpoch !== null || result.ended.some((session) => !known.has(session.sessionId))) await delivery;
      // Recorded, but the token store did not take step 1: every instance learns it from the feed within its interval,
      // and one whose store read comes back first (after a failover, say) would accept the token until then. So the
      // answer is 503, not "ended everywhere", unless step 1 gets through now (docs/threat-model.md #11.33).
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows what the token store threw
      if (storeError !== null && (await this.storeStep(target, events)).error !== null) throw storeError;
      return { recorded: result.ended };
    } catch (error) {
      if (!(error instanceof DatabaseUnavailableError)) throw error;
      // Something took effect in the token store: the record follows whatever the answer is.
      if (storeError === null || deleted > 0) {
        for (const event of events) revocations.apply(event);
        await this.recordLater(request);
      }
      // Both steps failed: 503, and the client's retry finishes what this attempt began.
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows what the token store threw
      if (storeError !== null) throw storeError;
      return { recorded: null };
    }
  }

  /** Step 1: the tokens deleted from the token store (and the local cache), the end published. */
  private async storeStep(target: EndTarget, events: StoreEvent[]): Promise<{ error: unknown; deleted: number }> {
    const { store, cache } = this.deps;
    let deleted = 0;
    try {
      for (const session of target.sessions) {
        if (session.tokenHash === undefined || target.userId === null) continue;
        cache?.deleteToken(session.tokenHash);
        await store.deleteToken(session.tokenHash, target.userId, session.sessionId);
        deleted++;
      }
      for (const event of events) await store.publish(event);
      return { error: null, deleted };
    } catch (error) {
      return { error, deleted };
    }
  }

  /**
   * Tries once more to write what is queued (at shutdown); what is still unwritten stays in the spool for
   * the next start. Resolves how many records are still unwritten.
   */
  async close(): Promise<number> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.flush().catch(() => undefined);
    if (this.pending.length === 0) return 0;
    const spool = this.deps.spool;
    let lost = 0;
    for (const deferred of this.pending) {
      try {
        if (!spool) throw new Error('no spool directory is configured');
        // Handed back to the directory: the next instance to start there records it before it serves.
        if (deferred.file === null) await spool.write([deferred.request]);
        else await spool.release(deferred.file);
      } catch (error) {
        lost++;
        this.deps.logger.error({ userId: deferred.request.userId, failure: describeFailure(error) }, 'sessions: an ended session could be neither recorded nor spooled at stop; its record is LOST (it stays ended in the token store)');
      }
    }
    const spooled = this.pending.length - lost;
    if (spooled > 0) this.deps.logger.warn({ records: spooled, dir: spool?.dir }, 'sessions: database unavailable at stop; ended sessions spooled, recorded by the next start');
    return this.pending.length;
  }

  private applyRecorded(userId: string | null, result: EndSessionsResult): void {
    for (const session of result.ended) {
      this.deps.cache?.deleteToken(session.tokenHash);
      this.deps.revocations.endSession(session.sessionId, session.expiresAt.getTime());
    }
    if (result.sessionEpoch !== null && userId !== null) this.deps.revocations.raiseEpoch(userId, result.sessionEpoch, result.sessionsRevokedAt?.getTime());
  }

  /**
   * Defers the record: written to the spool before the answer (so a stop or a crash cannot lose it), and
   * queued for a retry as soon as the database answers.
   */
  private async recordLater(answered: EndSessionsRequest): Promise<void> {
    // Written late, it must not end sessions opened after the answer (only a user-wide request can).
    const request = answered.sessionIds === undefined ? { ...answered, createdBefore: answered.at } : answered;
    let file: string | null = null;
    if (this.deps.spool) {
      try {
        file = await this.deps.spool.write([request], { claimed: true });
      } catch (error) {
        this.deps.logger.error({ userId: request.userId, failure: describeFailure(error) }, 'sessions: an ended session could not be spooled; its record waits in memory only');
      }
    }
    if (this.pending.length >= PENDING_LIMIT) {
      if (file !== null) return void this.deps.logger.error({ userId: request.userId }, 'sessions: too many ended sessions waiting for the database; this one is recorded by the next start (spooled)');
      this.deps.logger.error({ userId: request.userId }, 'sessions: too many ended sessions waiting for the database; this record is dropped (the session stays ended in the token store)');
      return;
    }
    if (this.pending.length === 0) this.deps.logger.warn({}, 'sessions: database unavailable; ended sessions are recorded when it answers');
    this.pending.push({ request, file });
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.retryTimer || this.pending.length === 0) return;
    const delay = Math.min(250 * 2 ** this.attempt, 5000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.flush().then(
        () => {
          this.attempt = 0;
        },
        () => {
          this.attempt++;
          this.schedule();
        },
      );
    }, delay);
    this.retryTimer.unref();
  }

  /** Writes what is queued, oldest first; one run at a time (the retry timer and close() may overlap). */
  private flush(): Promise<void> {
    this.flushing ??= this.flushPending().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async flushPending(): Promise<void> {
    if (this.pending.length === 0) return;
    while (this.pending.length > 0) {
      const next = this.pending[0]!;
      const result = await this.deps.repository.endSessions(next.request);
      this.pending.shift();
      this.applyRecorded(next.request.userId, result);
      void this.deps.changes?.deliver();
      if (next.file !== null) {
        await this.deps.spool?.remove(next.file).catch((error: unknown) => {
          // Recorded already; a replay of the file would change nothing (the record is idempotent).
          this.deps.logger.warn({ file: next.file, failure: describeFailure(error) }, 'sessions: a recorded ending could not be removed from the spool');
        });
      }
    }
    this.deps.logger.info({}, 'sessions: every ended session is recorded in the database');
  }
}
