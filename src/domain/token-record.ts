import type { IamPrincipal } from './principal';

/**
 * What the token store keeps under `{prefix}:token:{sha256(token)}`.
 * The raw token is never stored.
 */
export interface TokenRecord {
  sessionId: string;
  principal: IamPrincipal;
  clientType: string;
  /** ISO 8601 UTC. */
  createdAt: string;
  /** ISO 8601 UTC: the absolute end of the session (`iam.token.ttl`). */
  expiresAt: string;
  /** Sliding idle timeout in ms for this session, 0 = off (`iam.token.idle-timeout` at issue time). */
  idleTimeoutMs: number;
  /** The session a profile switch derived this one from (absent for a login); its end ends this one. */
  originSessionId?: string;
  /** Every session this one derives from (origin first, then the origin's origins): if one ended, this one did. */
  ancestorSessionIds?: string[];
  /**
   * The user's session epoch when the token was issued (`iam_users.session_epoch`); once the user's epoch is
   * raised (every session ended) the token is refused, whatever the token store says. Absent = 0.
   */
  sessionEpoch?: number;
  /**
   * `access-token`: not a gateway session but an OpenID Provider's JWT access token the gateway verified (never in
   * the token store; nothing to log out or switch). Absent for sessions.
   */
  source?: 'access-token';
}

/**
 * Messages on the `{prefix}:events` channel, shared by every gateway instance. `sentAt` (epoch ms, the
 * publisher's clock) is stamped when the event is published, so receivers can time its propagation; events
 * from older instances have none.
 */
export type StoreEvent = StoreEventBody & { sentAt?: number };

/** What each kind of event says. */
export type StoreEventBody =
  /**
   * A session ended. `tokenHash` and `userId` are absent only when the instance that ended it could not read
   * the session (an admin revocation by session id while the database was down): receivers refuse the session
   * by its id, and the durable record's own event, with both, follows when the database answers.
   */
  | { type: 'session-ended'; sessionId: string; tokenHash?: string; userId?: string; reason: string; expiresAt?: string }
  /**
   * `revokedAt` (ISO 8601): the user's revocation instant, a provider access token issued before it is refused;
   * absent in events of older instances (then the epoch alone decides).
   */
  | { type: 'user-sessions-ended'; userId: string; reason: string; sessionEpoch?: number; revokedAt?: string }
  | { type: 'authorization-changed'; userId: string; authorizationVersion?: number }
  | { type: 'profile-changed'; profileId: string; userId: string }
  | { type: 'template-changed'; versionId: string }
  /** Every token under the prefix was deleted (`iam-gateway tokens purge`): drop every cached session. */
  | { type: 'tokens-flushed'; reason: string };
