import { randomUUID } from 'node:crypto';
import type { AuditTrail } from '../audit/audit-trail';
import type { IamPrincipal } from '../auth/principal';
import type { Logger } from '../observability/logger';
import type { IamRepository } from '../persistence/iam-repository';
import type { SessionRecord, SessionState } from '../persistence/records';
import { ProblemError } from '../problem';
import { derivedSessions } from './derived-sessions';
import { sessionsOverCap, withOrigins } from './session-cap';
import { encodeSessionCursor, type SessionPageKey } from './session-cursor';
import type { LastSeenTracker } from './last-seen-tracker';
import type { SessionCache } from './session-cache';
import { generateToken, hashToken, isWellFormedToken } from './token-hash';
import type { StoreEvent, TokenRecord } from './token-record';
import type { TokenStore } from './token-store';

/** The specification's AuthenticationResult (login and profile switch). */
export interface AuthenticationResult {
  accessToken: string;
  sessionId: string;
  expiresAt: string;
  principal: IamPrincipal;
}

/** A bearer token that the store vouched for. */
export interface VerifiedSession {
  tokenHash: string;
  record: TokenRecord;
}

/** Request facts recorded with session events. */
export interface RequestFacts {
  requestId: string;
  clientAddress: string | null;
  userAgent?: string | null;
}

/** An element of `GET /iam/sessions` (design.md §4.1). */
export interface SessionView {
  sessionId: string;
  clientType: string;
  activeProfileId: string | null;
  createdAt: string;
  expiresAt: string;
  lastSeenAt: string | null;
  state: SessionState;
  revokedAt: string | null;
  logoutAt: string | null;
  revokeReason: string | null;
  current: boolean;
}

export interface SessionServiceDeps {
  store: TokenStore;
  repository: IamRepository;
  cache: SessionCache | null;
  lastSeen: LastSeenTracker;
  audit: AuditTrail;
  logger: Logger;
  ttlMs: number;
  idleTimeoutMs: number;
  /** `iam.token.max-sessions-per-user`: beyond it the oldest live sessions are revoked (`session_limit`). */
  maxSessionsPerUser?: number;
}

/** One page of a list, as the admin API's lists. */
export interface SessionPage {
  items: SessionView[];
  nextCursor: string | null;
}

/**
 * Session lifecycle (specification §3): issue, verify, logout, revoke. The token store is the authority for
 * "is this token usable now"; PostgreSQL keeps the history (states, timestamps, reasons). Every state change
 * is published on the events channel so that every instance drops its cached copy at once.
 */
export class SessionService {
  constructor(private readonly deps: SessionServiceDeps) {}

  /**
   * Opens a session. With `origin` (a profile switch) the new session is derived from the caller's: it ends
   * no later than the origin (absolute expiry inherited, never renewed) and ends when the origin ends.
   */
  async issue(principal: IamPrincipal, clientType: string, facts: RequestFacts, origin?: VerifiedSession): Promise<AuthenticationResult> {
    const accessToken = generateToken();
    const tokenHash = hashToken(accessToken);
    const now = new Date();
    const ttlEnd = now.getTime() + this.deps.ttlMs;
    const expiresAt = new Date(origin ? Math.min(ttlEnd, Date.parse(origin.record.expiresAt)) : ttlEnd);
    const sessionId = randomUUID();
    const session: SessionRecord = {
      sessionId,
      userId: principal.userId,
      identityId: principal.identityId,
      clientType,
      activeProfileId: principal.activeProfileId,
      tokenHash,
      createdAt: now,
      expiresAt,
      lastSeenAt: now,
      revokedAt: null,
      logoutAt: null,
      revokeReason: null,
      clientAddress: facts.clientAddress,
      userAgent: facts.userAgent ?? null,
      originSessionId: origin?.record.sessionId ?? null,
    };
    try {
      await this.deps.repository.insertSession(session);
    } catch (error) {
      // The insert may have committed even though its reply was lost: make sure no row claims a live
      // session that never got a token.
      this.retireSession(sessionId, 'issue_failed');
      throw error;
    }
    const record: TokenRecord = {
      sessionId,
      principal,
      clientType,
      createdAt: now.toISOString(),
      expiresAt: expiresAt.toISOString(),
      idleTimeoutMs: this.deps.idleTimeoutMs,
      ...(origin ? { originSessionId: origin.record.sessionId } : {}),
    };
    try {
      await this.deps.store.putToken(tokenHash, record);
    } catch (error) {
      // The session row must not claim a session that never became usable.
      this.retireSession(sessionId, 'store_unavailable');
      throw error;
    }
    if (origin && !(await this.deps.store.getToken(origin.tokenHash))) {
      // The origin ended while this session was being opened (its end listed the derived sessions before
      // this one existed): write-then-recheck, so no derived session outlives its origin.
      await this.endToken(tokenHash, principal.userId, sessionId, 'origin_ended');
      this.retireSession(sessionId, 'origin_ended');
      throw new ProblemError('IAM_UNAUTHENTICATED', 'The session ended.');
    }
    await this.enforceSessionCap(principal.userId, sessionId, facts);
    return { accessToken, sessionId, expiresAt: record.expiresAt, principal };
  }

  /**
   * The warm path without a promise: the session when the local cache vouches for it, null when the token
   * cannot be valid at all, `'miss'` when only {@link verify} (a store round trip) can tell.
   */
  verifyCached(token: string): VerifiedSession | null | 'miss' {
    if (!isWellFormedToken(token)) return null;
    const cache = this.deps.cache;
    if (!cache) return 'miss';
    const tokenHash = hashToken(token);
    const nowMs = Date.now();
    const cached = cache.get(tokenHash, nowMs);
    if (!cached) return 'miss';
    this.deps.lastSeen.touch(cached.sessionId, nowMs);
    return { tokenHash, record: cached };
  }

  /**
   * The hot path: a bearer token to its live session, or null. No database access; at most one store round
   * trip, none on a warm cache. Rejects with StoreUnavailableError when the store cannot be read (fail closed).
   */
  async verify(token: string): Promise<VerifiedSession | null> {
    if (!isWellFormedToken(token)) return null;
    const tokenHash = hashToken(token);
    const nowMs = Date.now();
    const cache = this.deps.cache;
    const cached = cache?.get(tokenHash, nowMs);
    if (cached) {
      this.deps.lastSeen.touch(cached.sessionId, nowMs);
      return { tokenHash, record: cached };
    }
    const generation = cache?.snapshot() ?? 0;
    const record = await this.deps.store.getToken(tokenHash);
    if (!record) return null;
    if (Date.parse(record.expiresAt) <= nowMs) return null;
    cache?.set(tokenHash, record, generation);
    this.deps.lastSeen.touch(record.sessionId, nowMs);
    return { tokenHash, record };
  }

  async logout(session: VerifiedSession, facts: RequestFacts): Promise<void> {
    const { record, tokenHash } = session;
    await this.endToken(tokenHash, record.principal.userId, record.sessionId, 'logout');
    await this.deps.repository.updateSession(record.sessionId, { logoutAt: new Date() });
    this.audit('session.logout', record.principal.userId, record.sessionId, facts);
    await this.endDerived(record.principal.userId, record.sessionId, record.principal.userId, facts);
  }

  /** Revokes one of the caller's own sessions; another user's or an unknown session is a 404 either way. */
  async revokeOwn(caller: VerifiedSession, sessionId: string, facts: RequestFacts): Promise<void> {
    const session = await this.deps.repository.getSession(sessionId);
    if (!session || session.userId !== caller.record.principal.userId) throw sessionNotFound();
    await this.revokeSession(session, 'revoked_by_user', caller.record.principal.userId, facts);
  }

  /** Revokes any session (admin); 404 when unknown. */
  async revokeById(sessionId: string, reason: string, actorUserId: string, facts: RequestFacts): Promise<void> {
    const session = await this.deps.repository.getSession(sessionId);
    if (!session) throw sessionNotFound();
    await this.revokeSession(session, reason, actorUserId, facts);
  }

  /** Revokes every session of a user except `exceptSessionId`; resolves how many were revoked. */
  async revokeUser(userId: string, reason: string, actorUserId: string, facts: RequestFacts, exceptSessionId?: string): Promise<number> {
    const live = await this.deps.store.listUserTokens(userId);
    for (const [sessionId, tokenHash] of live) {
      if (sessionId !== exceptSessionId) await this.deps.store.deleteToken(tokenHash, userId, sessionId);
    }
    const changed = await this.deps.repository.revokeUserSessions(userId, reason, new Date(), exceptSessionId);
    if (exceptSessionId === undefined) {
      await this.deps.store.publish({ type: 'user-sessions-ended', userId, reason });
    } else {
      for (const [sessionId, tokenHash] of live) {
        if (sessionId !== exceptSessionId) await this.deps.store.publish({ type: 'session-ended', sessionId, tokenHash, userId, reason });
      }
    }
    for (const session of changed) this.audit('session.revoke', actorUserId, session.sessionId, facts, { reason, userId });
    return changed.length;
  }

  /** Revokes every live session a user opened through one identity; resolves how many were revoked. */
  async revokeIdentity(userId: string, identityId: string, reason: string, actorUserId: string, facts: RequestFacts): Promise<number> {
    const sessions = await this.deps.repository.listSessions(userId);
    let revoked = 0;
    for (const session of sessions) {
      if (session.identityId !== identityId || session.revokedAt || session.logoutAt) continue;
      await this.revokeSession(session, reason, actorUserId, facts);
      revoked++;
    }
    return revoked;
  }

  /** One page of the caller's sessions, newest first; `after` is the key of the previous page's last row. */
  async list(caller: VerifiedSession, limit: number, after: SessionPageKey | null): Promise<SessionPage> {
    const userId = caller.record.principal.userId;
    const [sessions, live] = await Promise.all([this.deps.repository.listSessionsPage(userId, limit + 1, after), this.deps.store.listUserTokens(userId)]);
    const now = Date.now();
    const rows = sessions.slice(0, limit);
    const items = rows.map((session) => toView(session, live.has(session.sessionId), session.sessionId === caller.record.sessionId, now));
    const last = rows[rows.length - 1];
    return { items, nextCursor: sessions.length > limit && last ? encodeSessionCursor(last) : null };
  }

  /**
   * Keeps a user at `maxSessionsPerUser` live sessions: the oldest beyond it are revoked (reason
   * `session_limit`, audited, their derived sessions with them), never the one just opened nor its origins.
   * A failure here does not undo the login: the next login enforces the cap again.
   */
  private async enforceSessionCap(userId: string, newSessionId: string, facts: RequestFacts): Promise<void> {
    const max = this.deps.maxSessionsPerUser;
    if (!max) return;
    try {
      const live = await this.deps.store.listUserTokens(userId);
      if (live.size <= max) return;
      const rows = await this.deps.repository.listSessions(userId);
      for (const session of sessionsOverCap(rows, live, max, withOrigins(rows, newSessionId))) {
        await this.revokeSession(session, 'session_limit', userId, facts);
      }
    } catch (error) {
      this.deps.logger.warn({ err: error, userId }, 'sessions: could not enforce max-sessions-per-user; retried at the next login');
    }
  }

  /**
   * Marks a session that never became usable as revoked, retrying in the background until the database
   * answers (the update is idempotent and does nothing when the row does not exist).
   */
  private retireSession(sessionId: string, reason: string, attempt = 0): void {
    this.deps.repository.updateSession(sessionId, { revokedAt: new Date(), revokeReason: reason }).catch((error: unknown) => {
      if (attempt >= 60) {
        this.deps.logger.error({ err: error, sessionId }, 'sessions: could not retire a session that failed to issue');
        return;
      }
      setTimeout(() => this.retireSession(sessionId, reason, attempt + 1), Math.min(250 * 2 ** attempt, 5000)).unref();
    });
  }

  /** Keeps the local cache in step with changes made by any instance. */
  handleEvent(event: StoreEvent): void {
    const cache = this.deps.cache;
    if (!cache) return;
    if (event.type === 'session-ended') cache.deleteToken(event.tokenHash);
    else if (event.type === 'user-sessions-ended') cache.deleteUser(event.userId);
    else if (event.type === 'tokens-flushed') cache.clear();
  }

  private async revokeSession(session: SessionRecord, reason: string, actorUserId: string, facts: RequestFacts): Promise<void> {
    await this.endToken(session.tokenHash, session.userId, session.sessionId, reason);
    if (!session.revokedAt && !session.logoutAt) {
      await this.deps.repository.updateSession(session.sessionId, { revokedAt: new Date(), revokeReason: reason });
    }
    this.audit('session.revoke', actorUserId, session.sessionId, facts, { reason, userId: session.userId });
    await this.endDerived(session.userId, session.sessionId, actorUserId, facts);
  }

  /**
   * Ends every live session derived (by profile switches, transitively) from `sessionId`: token deleted and
   * published like any revocation, row marked revoked with reason `origin_ended`, audited.
   */
  private async endDerived(userId: string, sessionId: string, actorUserId: string, facts: RequestFacts): Promise<void> {
    const sessions = await this.deps.repository.listSessions(userId);
    const now = Date.now();
    for (const derived of derivedSessions(sessions, sessionId)) {
      // Ended ones were ended with their own derived sessions; the walk still goes through them.
      if (derived.revokedAt || derived.logoutAt || derived.expiresAt.getTime() <= now) continue;
      await this.endToken(derived.tokenHash, derived.userId, derived.sessionId, 'origin_ended');
      await this.deps.repository.updateSession(derived.sessionId, { revokedAt: new Date(), revokeReason: 'origin_ended' });
      this.audit('session.revoke', actorUserId, derived.sessionId, facts, { reason: 'origin_ended', userId, originSessionId: derived.originSessionId });
    }
  }

  private async endToken(tokenHash: string, userId: string, sessionId: string, reason: string): Promise<void> {
    this.deps.cache?.deleteToken(tokenHash);
    await this.deps.store.deleteToken(tokenHash, userId, sessionId);
    await this.deps.store.publish({ type: 'session-ended', sessionId, tokenHash, userId, reason });
  }

  private audit(action: string, actorUserId: string, sessionId: string, facts: RequestFacts, details: Record<string, unknown> | null = null): void {
    this.deps.audit.record({
      action,
      actorUserId,
      targetType: 'session',
      targetId: sessionId,
      outcome: 'success',
      requestId: facts.requestId,
      clientAddress: facts.clientAddress,
      details,
    });
  }
}

function sessionNotFound(): ProblemError {
  return new ProblemError('IAM_SESSION_NOT_FOUND', 'No such session.');
}

function toView(session: SessionRecord, live: boolean, current: boolean, nowMs: number): SessionView {
  let state: SessionState;
  if (session.revokedAt) state = 'revoked';
  else if (session.logoutAt) state = 'logged_out';
  else if (session.expiresAt.getTime() <= nowMs || !live) state = 'expired';
  else state = 'active';
  return {
    sessionId: session.sessionId,
    clientType: session.clientType,
    activeProfileId: session.activeProfileId,
    createdAt: session.createdAt.toISOString(),
    expiresAt: session.expiresAt.toISOString(),
    lastSeenAt: session.lastSeenAt ? session.lastSeenAt.toISOString() : null,
    state,
    revokedAt: session.revokedAt ? session.revokedAt.toISOString() : null,
    logoutAt: session.logoutAt ? session.logoutAt.toISOString() : null,
    revokeReason: session.revokeReason,
    current,
  };
}
