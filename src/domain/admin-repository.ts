/**
 * The admin API's storage seam: what the admin service asks of a repository, and the errors and results it
 * gets back. The PostgreSQL implementation is adapters/postgres/admin-repository.ts.
 */
import type { IdentityRecord, ProfileRecord, ScopeRecord, StoredAuditEvent, TemplateRecord, UserRecord } from './records';

/** Who made an admin change, and in which request (the rest of the audit row is filled in by the write). */
export interface AdminAuditContext {
  actorUserId: string;
  requestId: string | null;
  clientAddress: string | null;
  /** What the actor's active profile grants: the most the write may grant (adapters/postgres/admin-escalation.ts). */
  holds: HeldGrant;
}

/** Why an admin write changed nothing; the admin service maps the kind to a problem code. */
export type AdminWriteErrorKind = 'not-found' | 'conflict' | 'unknown-reference' | 'forbidden';

/**
 * An admin write refused for a reason the caller can fix (unknown target, stale version, a body naming a
 * user or template that does not exist, a grant the actor does not hold). Thrown inside the transaction, so nothing — not even the audit
 * row — was written.
 */
export class AdminWriteError extends Error {
  constructor(
    readonly kind: AdminWriteErrorKind,
    message: string,
    /** JSON pointers into the request body with what is wrong there (for `unknown-reference`). */
    readonly problems: Array<{ pointer: string; message: string }> = [],
  ) {
    super(message);
    this.name = 'AdminWriteError';
  }
}

/** A user whose authorization version an admin write raised (live sessions must recompile permissions). */
export interface RaisedAuthorization {
  userId: string;
  authorizationVersion: number;
}

/** What the acting admin's active profile grants: the most they may hand to anyone. */
export interface HeldGrant {
  permissions: string[];
  /** True when the actor's profile applies to every resource (then `scopes` does not matter). */
  unscoped: boolean;
  scopes: ScopeRecord[];
  /** The client types the actor's profile applies to; null = every client type (trusted callers). */
  clientTypes: readonly string[] | null;
}

/** Holds everything: `*:*` on every resource, for every client type (trusted callers such as provisioning and tests). */
export const FULL_GRANT: HeldGrant = Object.freeze({ permissions: ['*:*'], unscoped: true, scopes: [], clientTypes: null });

/** The stable name of the rule in the 403 body (`rule`). */
export const ESCALATION_RULE = 'ESCALATION_PREVENTION' as const;

/** The body of `PUT /iam/admin/profiles/{profileId}` (scopes have their own endpoint). */
export interface ProfileInput {
  userId: string;
  profileName: string;
  templateVersionId: string;
  clientTypes: string[];
  enabled: boolean;
  revoked: boolean;
  /** True makes the profile unscoped (every resource) and drops its scopes; omitted: true for a new profile, else unchanged. */
  unscoped?: boolean;
}

/** `If-Match`: a profile version, `*` (any existing version), or null (no precondition). */
/**
 * A write's precondition: a version (`If-Match: "3"`), `*` (it must exist), `absent` (`If-None-Match: *`: create
 * only, never replace), or null (none).
 */
export type VersionPrecondition = number | '*' | 'absent' | null;

export interface ProfileWriteResult {
  profile: ProfileRecord;
  created: boolean;
  changed: boolean;
  /** The owner, when the change can alter what the owner's sessions may do. */
  raised: RaisedAuthorization | null;
}

export interface TemplateWriteResult {
  template: TemplateRecord;
  created: boolean;
  /** Users with a profile on this template whose authorization version was raised (permissions changed). */
  raised: RaisedAuthorization[];
}

export interface UserWriteResult {
  user: UserRecord;
  created: boolean;
  enabledChanged: boolean;
}

export interface IdentityWriteResult {
  identity: IdentityRecord;
  created: boolean;
}

/** One page of users in userId order; `after` is the last userId of the previous page. */
export interface UserListQuery {
  limit: number;
  after: string | null;
  /** Case-insensitive substring of userId or displayName (LIKE wildcards in it are literal). */
  text: string | null;
  /** Only users with an identity in this domain. */
  domain: string | null;
}

/** One page of audit events, newest first; `before` is the last id of the previous page. */
export interface AuditListQuery {
  limit: number;
  before: string | null;
  /** Events the user acted in, or whose target is that user. */
  userId: string | null;
  action: string | null;
  since: Date | null;
}

/**
 * Reads and writes of the admin API. Every write runs in one transaction that also inserts its
 * audit row (actor, action, target, before/after), so the trail never shows a change that did not happen
 * and no change happens without its row. Writes to one object are serialized with row locks.
 * `AdminWriteError` reports what the caller can fix; `DatabaseUnavailableError` a database outage.
 */
export interface AdminRepository {
  upsertTemplate(versionId: string, input: { name: string; description?: string; permissions: string[] }, audit: AdminAuditContext, precondition?: VersionPrecondition): Promise<TemplateWriteResult>;
  /** Up to `limit + 1` users: one more than asked tells the caller there is a next page. */
  listUsers(query: UserListQuery): Promise<UserRecord[]>;
  upsertUser(userId: string, input: { displayName?: string; enabled: boolean }, audit: AdminAuditContext, precondition?: VersionPrecondition): Promise<UserWriteResult>;
  /** The user's identities by identityId, or null when the user does not exist. */
  listIdentities(userId: string): Promise<IdentityRecord[] | null>;
  upsertIdentity(identityId: string, input: { userId: string; identityDomain: string; enabled: boolean }, audit: AdminAuditContext, precondition?: VersionPrecondition): Promise<IdentityWriteResult>;
  upsertProfile(profileId: string, input: ProfileInput, precondition: VersionPrecondition, audit: AdminAuditContext): Promise<ProfileWriteResult>;
  replaceProfileScopes(profileId: string, scopes: ScopeRecord[], precondition: VersionPrecondition, audit: AdminAuditContext): Promise<ProfileWriteResult>;
  /** Raises the user's authorization version by 1; null when the user does not exist. */
  raiseAuthorizationVersion(userId: string, audit: AdminAuditContext): Promise<RaisedAuthorization | null>;
  /** Up to `limit + 1` events, newest first. */
  listAudit(query: AuditListQuery): Promise<StoredAuditEvent[]>;
}
