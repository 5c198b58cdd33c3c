import type { RevocationState } from '../domain/changes';
import type { StoreEvent, TokenRecord } from '../domain/token-record';

/**
 * This instance's copy of the durable revocation record (PostgreSQL): the sessions ended before their expiry
 * and the users' session epochs. Loaded at start, kept fresh by the events channel and by reading the change
 * feed on an interval (change-feed.ts), and consulted in memory on every token check, so a token that the
 * token store still (or again) holds — an old snapshot restored, a replica that missed the deletes, a login
 * that raced a disable — is refused without the database on the request path.
 */
export class RevocationRegistry {
  /** sessionId → when the entry may be forgotten (the session's own expiry). */
  private readonly sessions = new Map<string, number>();
  private readonly epochs = new Map<string, number>();
  private sweepAt = 0;

  /** `fallbackTtlMs`: how long to remember a session whose expiry the event did not say (the token ttl). */
  constructor(private readonly fallbackTtlMs: number) {}

  get size(): number {
    return this.sessions.size;
  }

  /**
   * True when the record must be refused: its session ended, a session it was derived from (profile switch)
   * ended, or its user's epoch moved past it.
   */
  refuses(record: TokenRecord): boolean {
    if (this.sessions.has(record.sessionId)) return true;
    if (record.ancestorSessionIds) for (const ancestor of record.ancestorSessionIds) if (this.sessions.has(ancestor)) return true;
    const epoch = this.epochs.get(record.principal.userId);
    return epoch !== undefined && (record.sessionEpoch ?? 0) < epoch;
  }

  epochOf(userId: string): number {
    return this.epochs.get(userId) ?? 0;
  }

  endSession(sessionId: string, expiresAtMs?: number): void {
    const nowMs = Date.now();
    this.sessions.set(sessionId, expiresAtMs !== undefined && Number.isFinite(expiresAtMs) ? expiresAtMs : nowMs + this.fallbackTtlMs);
    if (nowMs >= this.sweepAt) this.sweep(nowMs);
  }

  raiseEpoch(userId: string, epoch: number): void {
    if (epoch > (this.epochs.get(userId) ?? 0)) this.epochs.set(userId, epoch);
  }

  load(state: Pick<RevocationState, 'sessions' | 'epochs'>): void {
    for (const session of state.sessions) this.endSession(session.sessionId, session.expiresAt.getTime());
    for (const { userId, sessionEpoch } of state.epochs) this.raiseEpoch(userId, sessionEpoch);
  }

  apply(event: StoreEvent): void {
    if (event.type === 'session-ended') this.endSession(event.sessionId, event.expiresAt === undefined ? undefined : Date.parse(event.expiresAt));
    else if (event.type === 'user-sessions-ended' && event.sessionEpoch !== undefined) this.raiseEpoch(event.userId, event.sessionEpoch);
  }

  /** Forgets sessions past their expiry (the token store refuses them by then anyway); at most once a minute. */
  private sweep(nowMs: number): void {
    this.sweepAt = nowMs + 60_000;
    for (const [sessionId, expiresAtMs] of this.sessions) if (expiresAtMs <= nowMs) this.sessions.delete(sessionId);
  }
}
