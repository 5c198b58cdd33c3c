import type { Logger } from '../observability/logger';
import type { EndedSession, EndSessionsRequest, EndSessionsResult } from '../domain/changes';
import { DatabaseUnavailableError, type IamRepository } from '../domain/iam-repository';
import type { RevocationRegistry } from './revocation-registry';
import type { SessionCache } from './session-cache';
import type { StoreEvent } from '../domain/token-record';
import type { TokenStore } from '../domain/token-store';

export interface SessionEndingDeps {
  store: TokenStore;
  repository: Pick<IamRepository, 'endSessions'>;
  cache: SessionCache | null;
  revocations: RevocationRegistry;
  /** The change feed's deliverer: publishes the recorded change until done (absent in unit tests). */
  changes: { deliver(): Promise<void> } | null;
  logger: Pick<Logger, 'warn' | 'error' | 'info'>;
}

/** What to end: the sessions the token store knows, and what the durable record must say. */
export interface EndTarget {
  userId: string;
  reason: string;
  logout?: boolean;
  /** Live sessions found in the token store: ended there first, so they stop everywhere at once. */
  sessions: Array<{ sessionId: string; tokenHash: string; expiresAt?: string }>;
  /** Every session of the user ends (published as user-sessions-ended, epoch raised in the record). */
  allSessions?: boolean;
  /** Which sessions the database must end (change-log.ts EndSessionsRequest). */
  durable: Pick<EndSessionsRequest, 'sessionIds' | 'allExcept' | 'raiseEpoch'>;
}

const PENDING_LIMIT = 10_000;

/**
 * Ending sessions (logout, revocation) so that the answer is true and nothing is left half done:
 *  1. the token store: tokens deleted and the end published, so every instance refuses them at once;
 *  2. the durable record: the rows ended and their change-feed rows written in one transaction (the feed's
 *     deliverer then repeats step 1 until it succeeds, and every instance reads the feed on an interval).
 * One step suffices for the session to be ended everywhere: step 1 at once, step 2 within the feed's
 * interval. Only when both fail is the answer 503 (and a retry does both again). When only the database
 * failed, its record is queued here and written as soon as the database answers: done, recorded later.
 */
export class SessionEnding {
  private readonly pending: Array<{ request: EndSessionsRequest; onRecorded: (ended: EndedSession[]) => void }> = [];
  private retryTimer: NodeJS.Timeout | undefined;
  private attempt = 0;

  constructor(private readonly deps: SessionEndingDeps) {}

  get pendingRecords(): number {
    return this.pending.length;
  }

  /** Resolves once the sessions are ended (see above); `onRecorded` runs when the database recorded it. */
  async end(target: EndTarget, onRecorded: (ended: EndedSession[]) => void): Promise<void> {
    const { store, cache, revocations } = this.deps;
    // One instant for the whole ending: the rows' revoked_at/logout_at and, for "every session", the user's
    // revocation instant, published at once (step 1) and recorded with the epoch (step 2).
    const at = new Date();
    const events: StoreEvent[] = target.sessions.map((session) => ({
      type: 'session-ended',
      sessionId: session.sessionId,
      tokenHash: session.tokenHash,
      userId: target.userId,
      reason: target.logout ? 'logout' : target.reason,
      ...(session.expiresAt === undefined ? {} : { expiresAt: session.expiresAt }),
    }));
    if (target.allSessions) events.push({ type: 'user-sessions-ended', userId: target.userId, reason: target.reason, revokedAt: at.toISOString() });
    let storeError: unknown = null;
    let deleted = 0;
    try {
      for (const session of target.sessions) {
        cache?.deleteToken(session.tokenHash);
        await store.deleteToken(session.tokenHash, target.userId, session.sessionId);
        deleted++;
      }
      for (const event of events) await store.publish(event);
    } catch (error) {
      storeError = error;
    }
    const request: EndSessionsRequest = { userId: target.userId, reason: target.reason, logout: target.logout, at, ...target.durable };
    try {
      const result = await this.deps.repository.endSessions(request);
      for (const event of events) revocations.apply(event);
      this.applyRecorded(target.userId, result);
      // The recorded change is published until done. The answer waits for it when step 1 did not already
      // say everything: it failed, the epoch was raised, or the record ended sessions the store's index missed.
      const delivery = this.deps.changes?.deliver();
      const known = new Set(target.sessions.map((session) => session.sessionId));
      if (storeError !== null || result.sessionEpoch !== null || result.ended.some((session) => !known.has(session.sessionId))) await delivery;
      onRecorded(result.ended);
    } catch (error) {
      if (!(error instanceof DatabaseUnavailableError)) throw error;
      // Something took effect in the token store: the record follows whatever the answer is.
      if (storeError === null || deleted > 0) {
        for (const event of events) revocations.apply(event);
        this.recordLater(request, onRecorded);
      }
      // Both steps failed: 503, and the client's retry finishes what this attempt began.
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows what the token store threw
      if (storeError !== null) throw storeError;
    }
  }

  /** Tries once more to write what is queued (at shutdown); resolves how many records are still unwritten. */
  async close(): Promise<number> {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.flush().catch(() => undefined);
    if (this.pending.length > 0) {
      this.deps.logger.error({ records: this.pending.length }, 'sessions: ended sessions not recorded in the database at shutdown (they stay ended in the token store)');
    }
    return this.pending.length;
  }

  private applyRecorded(userId: string, result: EndSessionsResult): void {
    for (const session of result.ended) {
      this.deps.cache?.deleteToken(session.tokenHash);
      this.deps.revocations.endSession(session.sessionId, session.expiresAt.getTime());
    }
    if (result.sessionEpoch !== null) this.deps.revocations.raiseEpoch(userId, result.sessionEpoch, result.sessionsRevokedAt?.getTime());
  }

  private recordLater(request: EndSessionsRequest, onRecorded: (ended: EndedSession[]) => void): void {
    if (this.pending.length >= PENDING_LIMIT) {
      this.deps.logger.error({ userId: request.userId }, 'sessions: too many ended sessions waiting for the database; this record is dropped (the session stays ended in the token store)');
      return;
    }
    if (this.pending.length === 0) this.deps.logger.warn({}, 'sessions: database unavailable; ended sessions are recorded when it answers again');
    this.pending.push({ request, onRecorded });
    this.schedule();
  }

  private schedule(): void {
    if (this.retryTimer || this.pending.length === 0) return;
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

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const next = this.pending[0]!;
      const result = await this.deps.repository.endSessions(next.request);
      this.pending.shift();
      this.applyRecorded(next.request.userId, result);
      void this.deps.changes?.deliver();
      next.onRecorded(result.ended);
    }
    this.deps.logger.info({}, 'sessions: every ended session is recorded in the database');
  }
}
