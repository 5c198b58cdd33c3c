import type { RevocationState } from '../domain/changes';
import type { StoreEvent, TokenRecord } from '../domain/token-record';

/**
 * This instance's copy of the durable revocation record (PostgreSQL): the sessions ended before their expiry,
 * the users' session epochs and the instants they were raised. Loaded at start, kept fresh by the events channel
 * and by reading the change feed on an interval (change-feed.ts), and consulted in memory on every token check,
 * so a token that the token store still (or again) holds — an old snapshot restored, a replica that missed the
 * deletes, a login that raced a disable — is refused without the database on the request path.
 */
export class RevocationRegistry {
  /** sessionId → when the entry may be forgotten (the session's own expiry). */
  private readonly sessions = new Map<string, number>();
  private readonly epochs = new Map<string, number>();
  /** userId → the latest "every session ended" (epoch ms, the deciding instance's clock). */
  private readonly revokedAt = new Map<string, number>();
  private sweepAt = 0;

  /**
   * `fallbackTtlMs`: how long to remember a session whose expiry the event did not say (the token ttl).
   * `accessTokenMarginMs` (`iam.oidc.revocation-margin`): a provider access token issued less than this after its
   * user's revocation instant is refused too, for a provider whose clock may run ahead of the gateway's.
   */
  constructor(
    private readonly fallbackTtlMs: number,
    private readonly accessTokenMarginMs = 0,
  ) {}

  get size(): number {
    return this.sessions.size;
  }

  /**
   * True when the record must be refused: its session ended, a session it was derived from (profile switch)
   * ended, its user's epoch moved past it, or it is a provider access token issued before its user's sessions
   * were all ended.
   */
  refuses(record: TokenRecord): boolean {
    if (this.sessions.has(record.sessionId)) return true;
    if (record.ancestorSessionIds) for (const ancestor of record.ancestorSessionIds) if (this.sessions.has(ancestor)) return true;
    const epoch = this.epochs.get(record.principal.userId);
    if (epoch !== undefined && (record.sessionEpoch ?? 0) < epoch) return true;
    return record.source === 'access-token' && this.issuedBeforeRevocation(record);
  }

  epochOf(userId: string): number {
    return this.epochs.get(userId) ?? 0;
  }

  endSession(sessionId: string, expiresAtMs?: number): void {
    const nowMs = Date.now();
    this.sessions.set(sessionId, expiresAtMs !== undefined && Number.isFinite(expiresAtMs) ? expiresAtMs : nowMs + this.fallbackTtlMs);
    if (nowMs >= this.sweepAt) this.sweep(nowMs);
  }

  /**
   * Every session of the user ended: the epoch (tokens stamped with an older one are refused) and, when known,
   * the instant (epoch ms; provider access tokens issued before it are refused). Neither ever goes back.
   */
  raiseEpoch(userId: string, epoch: number, revokedAtMs?: number): void {
    if (epoch > (this.epochs.get(userId) ?? 0)) this.epochs.set(userId, epoch);
    if (revokedAtMs !== undefined && Number.isFinite(revokedAtMs) && revokedAtMs > (this.revokedAt.get(userId) ?? -Infinity)) this.revokedAt.set(userId, revokedAtMs);
  }

  load(state: Pick<RevocationState, 'sessions' | 'epochs'>): void {
    for (const session of state.sessions) this.endSession(session.sessionId, session.expiresAt.getTime());
    for (const { userId, sessionEpoch, sessionsRevokedAt } of state.epochs) this.raiseEpoch(userId, sessionEpoch, sessionsRevokedAt?.getTime());
  }

  apply(event: StoreEvent): void {
    if (event.type === 'session-ended') this.endSession(event.sessionId, event.expiresAt === undefined ? undefined : Date.parse(event.expiresAt));
    else if (event.type === 'user-sessions-ended') this.raiseEpoch(event.userId, event.sessionEpoch ?? 0, event.revokedAt === undefined ? undefined : Date.parse(event.revokedAt));
  }

  /**
   * The time rule, for provider access tokens only. Such a token is not issued by the gateway, so no epoch was
   * stamped into it at issue: the epoch it carries is the one read at its first verification, which says nothing
   * about a revocation between its issue and that verification. Its `iat` does (createdAt; RFC 9068 §2.2 requires
   * it): a token issued at or before the instant is refused. `iat` has whole seconds, so a token issued in the
   * second of the revocation but after it is refused too (fail closed: the client gets a new one). A createdAt that
   * cannot be read is refused.
   *
   * The gateway's own tokens are left to the epoch: stamped at issue and checked again after the token was written
   * (session-service.ts), it refuses exactly the tokens issued before the revocation. The time rule would add
   * nothing for them but a wrong refusal: a login on an instance whose clock is a little behind the revoking
   * instance's, right after the revoke, would carry a createdAt before the instant.
   */
  private issuedBeforeRevocation(record: TokenRecord): boolean {
    const revokedAtMs = this.revokedAt.get(record.principal.userId);
    if (revokedAtMs === undefined) return false;
    return !(Date.parse(record.createdAt) > revokedAtMs + this.accessTokenMarginMs);
  }

  /** Forgets sessions past their expiry (the token store refuses them by then anyway); at most once a minute. */
  private sweep(nowMs: number): void {
    this.sweepAt = nowMs + 60_000;
    for (const [sessionId, expiresAtMs] of this.sessions) if (expiresAtMs <= nowMs) this.sessions.delete(sessionId);
  }
}
