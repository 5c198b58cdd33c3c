/** Plain records the persistence layer hands to the rest of the gateway (no ORM entities leak out). */

export type AccessMode = 'READ' | 'WRITE';

export interface UserRecord {
  userId: string;
  displayName: string | null;
  enabled: boolean;
  authorizationVersion: number;
  /** Raised when every session of the user ends; a token issued under an older epoch is refused (absent: 0). */
  sessionEpoch?: number;
  /**
   * When the epoch was last raised (every session ended): an identity provider's access token issued before this
   * instant is refused, also one first presented afterwards (absent or null: never).
   */
  sessionsRevokedAt?: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /** Optimistic-lock version, raised on every change: the admin API's entity tag (`If-Match`); 0 for a record not read from the database. */
  version: number;
}

export interface IdentityRecord {
  identityId: string;
  userId: string;
  identityDomain: string;
  enabled: boolean;
  /** Optimistic-lock version, raised on every change: the admin API's entity tag (`If-Match`); 0 for a record not read from the database. */
  version: number;
}

export interface TemplateRecord {
  versionId: string;
  name: string;
  description: string | null;
  /** Permission codes `<resource>:<action>`, `<resource>:*`, `*:*`. */
  permissions: string[];
  /** Optimistic-lock version, raised on every change: the admin API's entity tag (`If-Match`); 0 for a record not read from the database. */
  version: number;
}

export interface ScopeRecord {
  scopeType: string;
  scopeRefId: string;
  accessMode: AccessMode;
}

export interface ProfileRecord {
  profileId: string;
  userId: string;
  profileName: string;
  templateVersionId: string;
  clientTypes: string[];
  enabled: boolean;
  revoked: boolean;
  /**
   * True: the profile's permissions apply to every resource (it has no scopes). False: only to what `scopes`
   * cover, so a scoped profile without scopes grants no resource at all.
   */
  unscoped: boolean;
  scopes: ScopeRecord[];
  /** Optimistic-lock version, raised on every change. */
  version: number;
}

export type SessionState = 'active' | 'revoked' | 'logged_out' | 'expired';

export interface SessionRecord {
  sessionId: string;
  userId: string;
  identityId: string;
  clientType: string;
  activeProfileId: string | null;
  /** sha256 of the token, hex: lets a revocation find the token-store key. */
  tokenHash: string;
  createdAt: Date;
  expiresAt: Date;
  lastSeenAt: Date | null;
  revokedAt: Date | null;
  logoutAt: Date | null;
  revokeReason: string | null;
  clientAddress: string | null;
  userAgent: string | null;
  /** The session this one was derived from by a profile switch; null (or absent) for a login. */
  originSessionId?: string | null;
  /** The OpenID Provider's session (`sid` of the id token) this login came from; back-channel logout ends it. */
  idpSessionId?: string | null;
  /**
   * Written only: the OpenID Connect login's ID token, sent back to the provider as `id_token_hint` at sign-out
   * ({@link SessionRepository.idTokenOfSession}). Reads of a session never carry it (listings, the admin API).
   */
  idpIdToken?: string | null;
}

export interface AuditEventRecord {
  /** Assigned by the database when omitted. */
  id?: string;
  /**
   * The event's own id (a UUID the gateway gives it when it is recorded; the database gives one to rows written
   * without). Storing is idempotent by it: a write retried after a reply was lost (a timeout that had committed,
   * a spool replayed twice) stores the event once.
   */
  eventId?: string;
  occurredAt: Date;
  /** The acting user (null for anonymous, e.g. a failed login). */
  actorUserId: string | null;
  /** e.g. `auth.login`, `auth.login.failed`, `session.revoke`, `authz.deny`, `admin.profile.update`. */
  action: string;
  targetType: string | null;
  targetId: string | null;
  outcome: 'success' | 'failure' | 'denied' | 'shadow_denied';
  requestId: string | null;
  decisionId: string | null;
  clientAddress: string | null;
  /** Free-form JSON: the decision, a before/after summary, the failure reason. */
  details: Record<string, unknown> | null;
}

/** An audit event as read back: the database has given it its id. */
export type StoredAuditEvent = AuditEventRecord & { id: string };

/** The provisioning file (config/provision.example.yaml; also the shape of the admin API bodies). */
export interface ProvisioningDocument {
  templates?: Array<{ versionId: string; name: string; description?: string; permissions: string[] }>;
  users?: Array<{
    userId: string;
    displayName?: string;
    enabled?: boolean;
    identities?: Array<{ identityId: string; identityDomain: string; enabled?: boolean }>;
    profiles?: Array<{
      profileId: string;
      profileName: string;
      templateVersionId: string;
      clientTypes: string[];
      enabled?: boolean;
      revoked?: boolean;
      /** Every resource; needs no scopes. Omitted: true for a new profile without scopes, else unchanged. */
      unscoped?: boolean;
      scopes?: ScopeRecord[];
    }>;
  }>;
}

export interface ProvisioningSummary {
  created: number;
  updated: number;
  unchanged: number;
  /** One line per created/updated object, e.g. `profile p-alice-reader: updated`. */
  changes: string[];
  /** Users whose authorization changed (their sessions need fresh permissions). */
  affectedUserIds: string[];
}
