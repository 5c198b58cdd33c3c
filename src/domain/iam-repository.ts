import type { ProvisioningOptions } from './provisioning';
import type { ChangeRow, EndSessionsRequest, EndSessionsResult, RevocationState } from './changes';
import type {
  AuditEventRecord,
  IdentityRecord,
  ProfileRecord,
  ProvisioningDocument,
  ProvisioningSummary,
  SessionRecord,
  TemplateRecord,
  UserRecord,
} from './records';

/*
 * The database seams. Each consumer takes the narrowest one it uses (or a `Pick` of it); `IamRepository` is their
 * intersection, what the adapters implement and app/ wires. Never called on the per-request proxy path with a warm
 * cache. Every method rejects with `DatabaseUnavailableError` when the database cannot be reached.
 */

/** Users and their identities: the first login creates them, sessions and grants look them up. */
export interface PrincipalRepository {
  /**
   * Makes sure the user and identity exist (hosts do not migrate their users: the first login creates
   * them) and returns the user. An existing user's enabled flag and authorization version are kept;
   * a display name is filled in if the user has none. Whether a new identity may join a user that already
   * exists is `input.attach` (default `any`), decided in the same transaction as the insert. Rejects with an
   * {@link IdentityLinkError}, writing nothing, when the identity is another user's or may not join this one.
   */
  ensurePrincipal(input: { userId: string; identityId: string; identityDomain: string; displayName?: string; attach?: IdentityAttach }): Promise<{
    user: UserRecord;
    identity: IdentityRecord;
  }>;
  getUser(userId: string): Promise<UserRecord | null>;
  getIdentity(identityId: string): Promise<IdentityRecord | null>;
}

/** Profiles (with their scopes) and permission templates: what a grant is compiled from. */
export interface GrantRepository {
  /** Every profile of the user (enabled or not), with scopes, ordered by profileId. */
  listProfiles(userId: string): Promise<ProfileRecord[]>;
  getProfile(profileId: string): Promise<ProfileRecord | null>;
  getTemplate(versionId: string): Promise<TemplateRecord | null>;
  listTemplates(): Promise<TemplateRecord[]>;
}

/** The durable session records: issued, looked up, listed, seen, revoked and ended. */
export interface SessionRepository {
  insertSession(session: SessionRecord): Promise<void>;
  getSession(sessionId: string): Promise<SessionRecord | null>;
  /** The ID token the OpenID Connect login of this session kept (for `id_token_hint` at sign-out); null otherwise. */
  idTokenOfSession(sessionId: string): Promise<string | null>;
  /** The session whose token has this hash (the durable record's copy of what the token store keys by). */
  getSessionByTokenHash(tokenHash: string): Promise<SessionRecord | null>;
  /** The user's sessions, newest first. */
  listSessions(userId: string): Promise<SessionRecord[]>;
  /** The sessions opened by logins in the OpenID Provider session `idpSessionId` (its `sid`) that have not ended. */
  listSessionsOfIdpSession(idpSessionId: string): Promise<SessionRecord[]>;
  /**
   * One page of the user's sessions, newest first (createdAt, then sessionId, descending): at most `limit`
   * rows strictly after the `after` key (the last row of the previous page).
   */
  listSessionsPage(userId: string, limit: number, after: { createdAt: Date; sessionId: string } | null): Promise<SessionRecord[]>;
  updateSession(
    sessionId: string,
    patch: Partial<Pick<SessionRecord, 'lastSeenAt' | 'revokedAt' | 'logoutAt' | 'revokeReason'>>,
  ): Promise<void>;
  /** Marks every still-active session of a user (except `exceptSessionId`) revoked; returns the ones changed. */
  revokeUserSessions(userId: string, reason: string, at: Date, exceptSessionId?: string): Promise<SessionRecord[]>;

  /**
   * Ends live sessions (revoked or logged out) and writes their rows of the change feed in one transaction;
   * with `raiseEpoch` also raises the user's session epoch. Idempotent: sessions already ended are skipped.
   */
  endSessions(request: EndSessionsRequest): Promise<EndSessionsResult>;
}

/** The change feed: how a recorded change reaches every instance, and the revocations to load at start. */
export interface ChangeFeedRepository {
  /** Change-feed rows after `afterId` (and the listed ids), oldest first (change-log.ts). */
  listChanges(afterId: number, alsoIds: number[], limit: number): Promise<ChangeRow[]>;
  /** Claims undelivered change-feed rows for `leaseMs`. */
  claimChanges(limit: number, leaseMs: number): Promise<ChangeRow[]>;
  markChangesDelivered(ids: number[]): Promise<void>;
  /** Revoked sessions not yet expired, raised session epochs, and where to start reading the feed. */
  loadRevocationState(): Promise<RevocationState>;
}

/** The audit trail rows: written in batches, looked up by decision, purged by retention. */
export interface AuditRepository {
  /**
   * Stores the events in one statement; an event whose `eventId` is already stored is skipped (a retried write
   * that had committed stores nothing twice). Callers keep each call small (audit/audit-trail.ts writes chunks).
   */
  insertAudit(events: AuditEventRecord[]): Promise<void>;
  findAuditByDecisionId(decisionId: string): Promise<AuditEventRecord | null>;
  /** Deletes audit events that occurred before `before` (retention); resolves how many. */
  purgeAudit(before: Date): Promise<number>;
}

/** Applying a provisioning document: the start-time file, `provision`, the profiles an authenticator projects at login. */
export interface ProvisioningRepository {
  /**
   * Applies a provisioning document idempotently in one transaction: a second run with the same
   * document changes nothing and reports `unchanged` only. Referential errors (unknown template)
   * reject with a `ProvisioningError` and change nothing. `options` (default: overwrite, unaudited) picks
   * create-missing or overwrite and the audit actor (provisioning-mode.ts).
   */
  applyProvisioning(document: ProvisioningDocument, options?: ProvisioningOptions): Promise<ProvisioningSummary>;
}

/**
 * Everything the gateway reads from or writes to PostgreSQL: every seam above, and the readiness probe. The adapters
 * implement it and app/ wires it; a consumer takes one of the seams instead.
 */
export interface IamRepository extends PrincipalRepository, GrantRepository, SessionRepository, ChangeFeedRepository, AuditRepository, ProvisioningRepository {
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
}

export class DatabaseUnavailableError extends Error {
  /**
   * The statement got no answer within `database.query-timeout` (the link may be fine: the statement may just be
   * too big for the bound). A caller that chose the statement's size can retry a smaller one; everyone else
   * answers 503 like for any outage.
   */
  readonly timedOut: boolean;

  constructor(message: string, options?: { cause?: unknown; timedOut?: boolean }) {
    super(message, options);
    this.name = 'DatabaseUnavailableError';
    this.timedOut = options?.timedOut ?? false;
  }
}

/**
 * Whether {@link PrincipalRepository.ensurePrincipal} may attach a new identity to a user that already exists:
 * - `any`: yes (a host authenticator vouches for the userId it answers);
 * - `new-user`: never; a new identity comes only with a new user (an existing user gets a new identity only from
 *   an admin or provisioning);
 * - `first-in-domain`: only when the user has no other identity in the same identity domain (the provider
 *   verified a claim that names the user, and this is the user's first account there).
 */
export type IdentityAttach = 'any' | 'new-user' | 'first-in-domain';

/** Why an identity was not attached: it is another user's, or it may not join the (existing) user it names. */
export type IdentityLinkRefusal = 'identity-of-another-user' | 'identity-not-linked';

/** {@link PrincipalRepository.ensurePrincipal} refused to attach the identity; nothing was written. */
export class IdentityLinkError extends Error {
  constructor(
    readonly reason: IdentityLinkRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'IdentityLinkError';
  }
}

export class ProvisioningError extends Error {
  constructor(
    message: string,
    /** JSON pointers into the document with what is wrong there. */
    readonly problems: Array<{ pointer: string; message: string }>,
  ) {
    super(message);
    this.name = 'ProvisioningError';
  }
}
