import { randomUUID } from 'node:crypto';
import type { IamPrincipal } from '../domain/principal';
import type { Logger } from '../observability/logger';
import { DatabaseUnavailableError, type PrincipalRepository, type SessionRepository } from '../domain/iam-repository';
import type { EndingAudit } from '../domain/changes';
import type { SessionRecord, SessionState } from '../domain/records';
import { ProblemError, problems } from '../domain/problem';
import { derivedSessions } from './derived-sessions';
import { sessionsOverCap, withOrigins } from './session-cap';
import { encodeSessionCursor, type SessionPageKey } from './session-cursor';
import type { LastSeenTracker } from './last-seen-tracker';
import type { RevocationRegistry } from './revocation-registry';
import type { SessionCache } from './session-cache';
import { SessionEnding } from './session-ending';
import type { EndingSpool } from './ending-spool';
import { generateToken, hashToken, isWellFormedToken } from '../domain/token-hash';
import type { StoreEvent, TokenRecord } from '../domain/token-record';
import { StoreUnavailableError, type TokenEvents, type TokenRecords } from '../domain/token-store';

/** The AuthenticationResult of login and profile switch (docs/http-contract.md). */
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

/** An element of `GET /iam/sessions` (docs/http-contract.md). */
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
  /** The live tokens; ending a session also publishes the end (session-ending.ts). */
  store: Pick<TokenRecords, 'getToken' | 'putToken' | 'deleteToken' | 'listUserTokens'> & Pick<TokenEvents, 'publish'>;
  /** The durable session records, and the user and identity a switch of profile checks again. */
  repository: SessionRepository & Pick<PrincipalRepository, 'getUser' | 'getIdentity'>;
  cache: SessionCache | null;
  lastSeen: LastSeenTracker;
  logger: Logger;
  ttlMs: number;
  idleTimeoutMs: number;
  /** `iam.token.max-sessions-per-user`: beyond it the oldest live sessions are revoked (`session_limit`). */
  maxSessionsPerUser?: number;
  /** The durable revocation record's copy in memory, consulted on every token check (revocation-registry.ts). */
  revocations: RevocationRegistry;
  /** The change feed's deliverer (change-feed.ts); null where there is none (unit tests). */
  changes?: { deliver(): Promise<void> } | null;
  /** Where endings answered while the database is down wait for it, across a stop (ending-spool.ts). */
  spool?: EndingSpool | null;
}

/** One page of a list: the sessions, and the cursor of the next page (null on the last). */
export interface SessionPage {
  items: SessionView[];
  nextCursor: string | null;
}

/**
 * Session lifecycle: issue, verify, logout, revoke. A token is usable when the token store holds it and the
 * durable record (PostgreSQL, held in memory by the revocation registry) has not ended it; PostgreSQL also
 * keeps the history (states, timestamps, reasons). Every ending is published on the events channel so that
 * every instance drops its cached copy at once, and recorded in the change feed so that none misses it
 * (session-ending.ts, change-feed.ts).
 */
export class SessionService {
  private readonly ending: SessionEnding;

  constructor(private readonly deps: SessionServiceDeps) {
    this.ending = new SessionEnding({ ...deps, changes: deps.changes ?? null, spool: deps.spool ?? null });
  }

  /**
   * Opens a session. `sessionEpoch`: the user's session epoch read before issuing (login) or the caller's
   * (profile switch). The token is written, then the user and identity are read again: if either was disabled
   * or the epoch moved meanwhile, the token is withdrawn — a login racing a disable never leaves a token nobody
   * revokes. With `origin` (a profile switch) the new session is derived from the caller's: it ends no later
   * than the origin (absolute expiry inherited, never renewed) and ends when the origin or any of its own
   * origins ends (the token record lists them, so every instance refuses it as soon as one of them ended).
   */
  async issue(
    principal: IamPrincipal,
    clientType: string,
    facts: RequestFacts,
    sessionEpoch = 0,
    origin?: VerifiedSession,
    idpSessionId: string | null = null,
    idpIdToken: string | null = null,
  ): Promise<AuthenticationResult> {
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
      idpSessionId,
      idpIdToken,
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
      sessionEpoch,
      ...(origin ? { originSessionId: origin.record.sessionId, ancestorSessionIds: [origin.record.sessionId, ...(origin.record.ancestorSessionIds ?? [])] } : {}),
    };
    try {
      await this.deps.store.putToken(tokenHash, record);
    } catch (error) {
      // The session row must not claim a session that never became usable.
      this.retireSession(sessionId, 'store_unavailable');
      throw error;
    }
    if (origin && (this.deps.revocations.refuses(origin.record) || !(await this.deps.store.getToken(origin.tokenHash)))) {
      // The origin ended while this session was being opened (its end listed the derived sessions before
      // this one existed): write-then-recheck, so no derived session outlives its origin.
      await this.deps.store.deleteToken(tokenHash, principal.userId, sessionId).catch(() => undefined);
      this.deps.revocations.endSession(sessionId);
      this.retireSession(sessionId, 'origin_ended');
      throw new ProblemError('IAM_UNAUTHENTICATED', 'The session ended.');
    }
    await this.recheckPrincipal(principal, sessionId, tokenHash, sessionEpoch);
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
    if (this.deps.revocations.refuses(cached)) {
      cache.deleteToken(tokenHash);
      return null;
    }
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
    if (cached && this.deps.revocations.refuses(cached)) {
      cache!.deleteToken(tokenHash);
      return null;
    }
    if (cached) {
      this.deps.lastSeen.touch(cached.sessionId, nowMs);
      return { tokenHash, record: cached };
    }
    const generation = cache?.snapshot() ?? 0;
    const record = await this.deps.store.getToken(tokenHash);
    if (!record) return null;
    if (Date.parse(record.expiresAt) <= nowMs) return null;
    // The token store may hold a token the durable record ended (an old snapshot, a replica, a lost delete).
    if (this.deps.revocations.refuses(record)) return null;
    cache?.set(tokenHash, record, generation);
    this.deps.lastSeen.touch(record.sessionId, nowMs);
    return { tokenHash, record };
  }

  /**
   * A live session named by its user and id (an `X-IAM-Assertion` names its session this way), as {@link verify}
   * would find it: from the user's index in the token store, then its record, then the revocation record. Null when
   * the session ended, expired or is not the user's. At most two store round trips; no database. With the session's
   * `knownTokenHash` (learnt from an earlier call) the user's index is not read: at most one round trip.
   */
  async liveSession(userId: string, sessionId: string, knownTokenHash?: string): Promise<VerifiedSession | null> {
    const tokenHash = knownTokenHash ?? (await this.deps.store.listUserTokens(userId)).get(sessionId);
    if (tokenHash === undefined) return null;
    const record = this.deps.cache?.get(tokenHash, Date.now()) ?? (await this.deps.store.getToken(tokenHash));
    if (!record || record.sessionId !== sessionId || record.principal.userId !== userId) return null;
    if (Date.parse(record.expiresAt) <= Date.now() || this.deps.revocations.refuses(record)) return null;
    return { tokenHash, record };
  }

  /** Ends the session everywhere; recorded (logout_at, audit) now, or as soon as the database answers. */
  async logout(session: VerifiedSession, facts: RequestFacts): Promise<void> {
    const { record, tokenHash } = session;
    if (record.source === 'access-token') throw notASession();
    const userId = record.principal.userId;
    await this.ending.end({
      userId,
      reason: 'logout',
      logout: true,
      sessions: [{ sessionId: record.sessionId, tokenHash, expiresAt: record.expiresAt }],
      durable: { sessionIds: [record.sessionId] },
      audit: auditOf('session.logout', userId, facts, null),
    });
    await this.endDerived(userId, record.sessionId, userId, facts);
  }

  /**
   * The fallback of a token check for a request that can only end the caller's own session (logout), when
   * {@link verify} failed with `storeError` because the token store cannot be read: the durable record vouches
   * instead — the session row of this token, neither ended nor expired, nor refused by the revocation record.
   * Ending a session takes nothing from anyone but its holder, so this never lets a token do more than it
   * could with the store up; it lets a logout be done and recorded while the token store is down (#11.35).
   * Any other error, or a database that does not answer either, rejects with `storeError` (503).
   */
  async verifyFromRecord(token: string, storeError: unknown): Promise<VerifiedSession | null> {
    if (!(storeError instanceof StoreUnavailableError) || !isWellFormedToken(token)) throw storeError;
    const tokenHash = hashToken(token);
    let row: SessionRecord | null;
    try {
      row = await this.deps.repository.getSessionByTokenHash(tokenHash);
    } catch {
      throw storeError; // neither store answered
    }
    if (!row || row.revokedAt || row.logoutAt || row.expiresAt.getTime() <= Date.now()) return null;
    const record = recordOfRow(row, this.deps.revocations.epochOf(row.userId));
    if (this.deps.revocations.refuses(record)) return null;
    return { tokenHash, record };
  }

  /**
   * Revokes one of the caller's own sessions; another user's or an unknown session is a 404 either way. While
   * the database is down, a session the token store lists as the caller's is revoked all the same (recorded
   * when the database answers); any other is 503, since only the database could tell.
   */
  async revokeOwn(caller: VerifiedSession, sessionId: string, facts: RequestFacts): Promise<void> {
    const userId = caller.record.principal.userId;
    let session: SessionRecord | null;
    try {
      session = await this.deps.repository.getSession(sessionId);
    } catch (error) {
      if (!(error instanceof DatabaseUnavailableError)) throw error;
      const tokenHash = (await this.deps.store.listUserTokens(userId).catch(() => new Map<string, string>())).get(sessionId);
      if (tokenHash === undefined) throw error;
      await this.endOne({ userId, sessionId, tokenHash }, 'revoked_by_user', userId, facts);
      return;
    }
    if (!session || session.userId !== userId) throw sessionNotFound();
    await this.revokeSession(session, 'revoked_by_user', userId, facts);
  }

  /**
   * Revokes any session (admin); 404 when unknown. While the database is down nobody can say whose session the
   * id is: it is ended by its id — published, so every instance refuses it at once — and recorded (its row,
   * its audit row, its token deleted from the store) when the database answers; an unknown id then ends
   * nothing. Only when the token store cannot publish either is the answer 503.
   */
  async revokeById(sessionId: string, reason: string, actorUserId: string, facts: RequestFacts): Promise<void> {
    let session: SessionRecord | null;
    try {
      session = await this.deps.repository.getSession(sessionId);
    } catch (error) {
      if (!(error instanceof DatabaseUnavailableError)) throw error;
      await this.ending.end({
        userId: null,
        reason,
        sessions: [{ sessionId }],
        durable: { sessionIds: [sessionId] },
        audit: auditOf('session.revoke', actorUserId, facts, { reason }),
      });
      return;
    }
    if (!session) throw sessionNotFound();
    await this.revokeSession(session, reason, actorUserId, facts);
  }

  /**
   * Revokes every session of a user except `exceptSessionId`; resolves how many the token store or the
   * database knew live. Without an exception the user's session epoch is raised: no token issued before
   * works again, also one the token store's index missed.
   */
  async revokeUser(userId: string, reason: string, actorUserId: string, facts: RequestFacts, exceptSessionId?: string): Promise<number> {
    const all = exceptSessionId === undefined;
    const live = await this.deps.store.listUserTokens(userId).catch(() => new Map<string, string>());
    const sessions = [...live].filter(([sessionId]) => sessionId !== exceptSessionId).map(([sessionId, tokenHash]) => ({ sessionId, tokenHash }));
    const outcome = await this.ending.end({
      userId,
      reason,
      sessions,
      allSessions: all,
      durable: { allExcept: exceptSessionId ?? null, raiseEpoch: all },
      audit: auditOf('session.revoke', actorUserId, facts, { reason, userId }),
    });
    return Math.max(outcome.recorded?.length ?? 0, sessions.length);
  }

  /** Writes what ended while the database was down, one last time (at shutdown); resolves how many are left. */
  close(): Promise<number> {
    return this.ending.close();
  }

  /** One page of the caller's sessions, newest first; `after` is the key of the previous page's last row. */
  /** One page of a user's sessions, newest first; `currentSessionId` is marked `current` (null: none, an admin's view). */
  async list(userId: string, currentSessionId: string | null, limit: number, after: SessionPageKey | null): Promise<SessionPage> {
    const [sessions, live] = await Promise.all([this.deps.repository.listSessionsPage(userId, limit + 1, after), this.deps.store.listUserTokens(userId)]);
    const now = Date.now();
    const rows = sessions.slice(0, limit);
    const items = rows.map((session) => toView(session, live.has(session.sessionId), session.sessionId === currentSessionId, now));
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
    this.deps.revocations.apply(event);
    const cache = this.deps.cache;
    if (!cache) return;
    if (event.type === 'session-ended') {
      // Without a token hash the cached entry stays until read, and the registry refuses it then (by session id).
      if (event.tokenHash !== undefined) cache.deleteToken(event.tokenHash);
    } else if (event.type === 'user-sessions-ended') cache.deleteUser(event.userId);
    else if (event.type === 'tokens-flushed') cache.clear();
  }

  private async revokeSession(session: SessionRecord, reason: string, actorUserId: string, facts: RequestFacts): Promise<void> {
    await this.endOne({ userId: session.userId, sessionId: session.sessionId, tokenHash: session.tokenHash, expiresAt: session.expiresAt.toISOString() }, reason, actorUserId, facts);
  }

  /** Revokes one session (token store first), then what was derived from it. */
  private async endOne(session: { userId: string; sessionId: string; tokenHash: string; expiresAt?: string }, reason: string, actorUserId: string, facts: RequestFacts): Promise<void> {
    const { userId, sessionId, tokenHash } = session;
    await this.ending.end({
      userId,
      reason,
      sessions: [{ sessionId, tokenHash, ...(session.expiresAt === undefined ? {} : { expiresAt: session.expiresAt }) }],
      durable: { sessionIds: [sessionId] },
      audit: auditOf('session.revoke', actorUserId, facts, { reason, userId }),
    });
    await this.endDerived(userId, sessionId, actorUserId, facts);
  }

  /**
   * Ends every live session derived (by profile switches, transitively) from `sessionId` like any revocation
   * (reason `origin_ended`, audited). The derived sessions stop working at once anyway — their token records
   * name their origins, which every instance's revocation registry now holds — so when the database cannot
   * list them this is left to their own expiry (never later than the origin's) and logged.
   */
  private async endDerived(userId: string, sessionId: string, actorUserId: string, facts: RequestFacts): Promise<void> {
    let sessions: SessionRecord[];
    try {
      sessions = await this.deps.repository.listSessions(userId);
    } catch (error) {
      this.deps.logger.warn({ err: error, userId, sessionId }, 'sessions: could not list the sessions derived from an ended one; they are refused by their origin');
      return;
    }
    const now = Date.now();
    for (const derived of derivedSessions(sessions, sessionId)) {
      // Ended ones were ended with their own derived sessions; the walk still goes through them.
      if (derived.revokedAt || derived.logoutAt || derived.expiresAt.getTime() <= now) continue;
      await this.ending.end({
        userId,
        reason: 'origin_ended',
        sessions: [{ sessionId: derived.sessionId, tokenHash: derived.tokenHash, expiresAt: derived.expiresAt.toISOString() }],
        durable: { sessionIds: [derived.sessionId] },
        audit: auditOf('session.revoke', actorUserId, facts, { reason: 'origin_ended', userId, originSessionId: derived.originSessionId }),
      });
    }
  }

  /**
   * Write-then-recheck: withdraws the token when the user or identity was disabled, or the user's session
   * epoch raised, while it was written (a disable that committed before this read is seen here; one that
   * commits after it finds the token in the store or refuses it by its epoch).
   */
  private async recheckPrincipal(principal: IamPrincipal, sessionId: string, tokenHash: string, sessionEpoch: number): Promise<void> {
    let current = false;
    try {
      const [user, identity] = await Promise.all([this.deps.repository.getUser(principal.userId), this.deps.repository.getIdentity(principal.identityId)]);
      current = user !== null && user.enabled && (user.sessionEpoch ?? 0) === sessionEpoch && identity !== null && identity.enabled;
      if (current) return;
    } finally {
      if (!current) {
        await this.deps.store.deleteToken(tokenHash, principal.userId, sessionId).catch(() => undefined);
        this.deps.revocations.endSession(sessionId);
        this.retireSession(sessionId, 'principal_changed');
      }
    }
    throw problems.unauthenticated('The user or identity was disabled, or its sessions revoked, while the token was issued.', false);
  }
}

/** The audit row of each session an ending records (written with it: change-log.ts). */
function auditOf(action: string, actorUserId: string, facts: RequestFacts, details: Record<string, unknown> | null): EndingAudit {
  return { action, actorUserId, requestId: facts.requestId, clientAddress: facts.clientAddress, details };
}

/**
 * A token record rebuilt from a session row, for {@link SessionService.verifyFromRecord} only: enough to end the
 * session (its id, user, expiry and origin), not to authorize anything (no identity domain; the row's own
 * revoked_at/logout_at stand for the epoch check, since raising an epoch ends every live row with it).
 */
function recordOfRow(row: SessionRecord, currentEpoch: number): TokenRecord {
  return {
    sessionId: row.sessionId,
    principal: { userId: row.userId, identityId: row.identityId, identityDomain: '', activeProfileId: row.activeProfileId, authorizationVersion: 0 },
    clientType: row.clientType,
    createdAt: row.createdAt.toISOString(),
    expiresAt: row.expiresAt.toISOString(),
    idleTimeoutMs: 0,
    sessionEpoch: currentEpoch,
    ...(row.originSessionId ? { originSessionId: row.originSessionId, ancestorSessionIds: [row.originSessionId] } : {}),
  };
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

/** A provider's access token is not a gateway session: it cannot be logged out or switched, it just expires. */
export function notASession(): ProblemError {
  return new ProblemError('IAM_BAD_REQUEST', "An identity provider's access token is not a gateway session: it cannot be logged out or switched (it ends at its expiry).");
}
