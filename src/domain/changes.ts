import type { StoreEvent } from './token-record';

/**
 * The change feed's vocabulary (docs/threat-model.md, "How revocation and changes reach every instance"):
 * every change other gateway instances must act on is written, in the transaction that makes it, as a row
 * of the feed; these are the shapes the repository interface, the session layer and the adapters share.
 */

/** Which sessions to end (all conditions combine; only sessions still live are touched). */
export interface EndSessionsRequest {
  /**
   * Whose sessions. Null only with `sessionIds` and without `raiseEpoch`: the sessions named, whoever's they are
   * (a revocation by session id made while the database could not say whose session it is).
   */
  userId: string | null;
  /** Stored as revoke_reason (not for a logout). */
  reason: string;
  /** Sets logout_at instead of revoked_at. */
  logout?: boolean;
  /** Only these sessions. */
  sessionIds?: string[];
  /** Every live session of the user except this one (null: every live session). */
  allExcept?: string | null;
  /** Only sessions opened through this identity. */
  identityId?: string;
  /**
   * Raise the user's session epoch: every token issued before is refused, also one not recorded yet; `at` is
   * recorded with it as the user's revocation instant (a provider access token issued before it is refused).
   */
  raiseEpoch?: boolean;
  /**
   * Only sessions opened at or before this moment: a request recorded late (queued while the database was
   * down, or replayed from the spool after a restart) does not end sessions opened after it was answered.
   */
  createdBefore?: Date;
  /** When the sessions ended (the deciding instance's clock): their revoked_at / logout_at, the audit rows' time, and the revocation instant. */
  at: Date;
  /** The audit row written for each session ended, in the same transaction (none when absent). */
  audit?: EndingAudit;
}

/** Who ended sessions and why, for the audit row of each ended session (`targetType: session`). */
export interface EndingAudit {
  /** `session.logout` or `session.revoke`. */
  action: string;
  actorUserId: string | null;
  requestId: string | null;
  clientAddress: string | null;
  /** Stored as the row's details; `userId` (the session's user) is added when the request names none. */
  details: Record<string, unknown> | null;
}

export interface EndedSession {
  sessionId: string;
  tokenHash: string;
  expiresAt: Date;
}

export interface EndSessionsResult {
  ended: EndedSession[];
  /** The user's new session epoch when it was raised. */
  sessionEpoch: number | null;
  /** The user's revocation instant when the epoch was raised (never earlier than one recorded before). */
  sessionsRevokedAt: Date | null;
}

/** A user's "every session ended" as the durable record has it: the epoch and its instant (null: none recorded). */
export interface UserRevocation {
  userId: string;
  sessionEpoch: number;
  sessionsRevokedAt: Date | null;
}

/** Who caused a change, for audit rows written in the same transaction (null actor: provisioning). */
export interface ChangeActor {
  actorUserId: string | null;
  requestId: string | null;
  clientAddress: string | null;
}

/** "This principal changed": the one path by which the admin API, provisioning and logins end or downgrade sessions. */
export type PrincipalChange =
  | { kind: 'user-disabled'; userId: string }
  | { kind: 'identity-disabled'; userId: string; identityId: string }
  | { kind: 'authorization-changed'; userId: string; authorizationVersion?: number }
  | { kind: 'profile-changed'; userId: string; profileId: string }
  | { kind: 'template-changed'; versionId: string };

export interface ChangeRow {
  id: number;
  event: StoreEvent;
}

/** What an instance loads at start: revoked sessions that have not expired, raised session epochs and their instants. */
export interface RevocationState {
  /** Read the feed after this id (a minute back, so transactions committing late are not missed). */
  cursor: number;
  sessions: Array<{ sessionId: string; expiresAt: Date }>;
  epochs: UserRevocation[];
}
