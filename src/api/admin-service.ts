import type { AuditTrail } from '../audit/audit-trail';
import { isValidPermissionCode } from '../domain/permission-code';
import { AdminWriteError, type AdminAuditContext, type AdminRepository, type HeldGrant, type RaisedAuthorization, type VersionPrecondition } from '../domain/admin-repository';
import { ESCALATION_RULE } from '../domain/admin-repository';
import { isStorableText } from './validate-body';
import { DatabaseUnavailableError, type GrantRepository, type PrincipalRepository } from '../domain/iam-repository';
import type { IamPrincipal } from '../domain/principal';
import { selectActiveProfile } from '../auth/login-service';
import type { StoredAuditEvent, IdentityRecord, ProfileRecord, TemplateRecord, UserRecord } from '../domain/records';
import { ProblemError, problems } from '../domain/problem';
import type { RequestFacts, SessionPage, SessionService } from '../sessions/session-service';
import type { SessionPageKey } from '../sessions/session-cursor';
import type { IdentityBody, ProfileBody, ScopesBody, TemplateBody, UserBody } from './schemas/requests';

/** Who is acting, and the request it came in. */
export interface AdminActor {
  userId: string;
  facts: RequestFacts;
  /** What the actor's active profile grants: writes may grant no more (escalation prevention). */
  holds: HeldGrant;
}

/** A page of a list endpoint; `nextCursor` is opaque, null on the last page. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface UserListParams {
  limit: number;
  cursor: string | null;
  q: string | null;
  domain: string | null;
}

export interface AuditListParams {
  limit: number;
  cursor: string | null;
  userId: string | null;
  action: string | null;
  since: Date | null;
}

export interface AdminServiceDeps {
  admin: AdminRepository;
  repository: Pick<PrincipalRepository, 'getUser'> & GrantRepository;
  sessions: Pick<SessionService, 'revokeById' | 'revokeUser' | 'list'>;
  /**
   * The change feed's deliverer: each write records its effects in the change feed in its own transaction
   * (adapters/postgres/change-log.ts); this publishes them now, and they are retried until delivered.
   */
  changes: { deliver(): Promise<void> };
  audit: Pick<AuditTrail, 'flush' | 'record'>;
}

/** Opaque cursors: base64url of the last key of the page (a userId, or an audit id). */
export const encodeCursor = (key: string): string => Buffer.from(key, 'utf8').toString('base64url');
export function decodeCursor(cursor: string): string | null {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  return key.length > 0 && encodeCursor(key) === cursor && isStorableText(key) ? key : null;
}

/** The largest audit id (a PostgreSQL bigint); a larger cursor names no row and is refused, not sent. */
const MAX_AUDIT_ID = 9223372036854775807n;
const isAuditId = (key: string): boolean => /^[0-9]{1,19}$/.test(key) && BigInt(key) <= MAX_AUDIT_ID;

/**
 * The admin API's rules, without HTTP: validates what the schemas cannot, writes through the
 * admin repository (change + audit row + change-feed rows in one transaction), then delivers the change
 * feed, so live sessions on every instance pick up the change on their next request. A committed change is
 * enforced even if its delivery fails now: the feed retries it and every instance reads the feed.
 */
export class AdminService {
  constructor(private readonly deps: AdminServiceDeps) {}

  async upsertTemplate(actor: AdminActor, versionId: string, body: TemplateBody, precondition: VersionPrecondition = null): Promise<{ template: TemplateRecord; created: boolean }> {
    const invalid = body.permissions
      .map((code, index) => ({ code, index }))
      .filter(({ code }) => !isValidPermissionCode(code))
      .map(({ code, index }) => ({ pointer: `/permissions/${index}`, message: `"${code}" is not a permission code <resource>:<action>` }));
    if (invalid.length > 0) throw problems.validation(invalid);
    const result = await this.write(() => this.deps.admin.upsertTemplate(versionId, body, auditContext(actor), precondition));
    return { template: result.template, created: result.created };
  }

  async listUsers(params: UserListParams): Promise<Page<UserRecord>> {
    const after = params.cursor === null ? null : decodeCursor(params.cursor);
    if (params.cursor !== null && after === null) throw problems.validation([{ pointer: '/cursor', message: 'is not a cursor of this list' }], 'The query is not valid.');
    const rows = await this.deps.admin.listUsers({ limit: params.limit, after, text: params.q, domain: params.domain });
    return page(rows, params.limit, (user) => user.userId);
  }

  /** Disabling a user ends every session at once (their tokens get 401 on the next request, on every instance). */
  async upsertUser(actor: AdminActor, userId: string, body: UserBody, precondition: VersionPrecondition = null): Promise<{ user: UserRecord; created: boolean }> {
    const result = await this.write(() => this.deps.admin.upsertUser(userId, body, auditContext(actor), precondition));
    return { user: result.user, created: result.created };
  }

  async getUser(userId: string): Promise<UserRecord> {
    const user = await this.deps.repository.getUser(userId);
    if (user === null) throw new ProblemError('IAM_NOT_FOUND', `No user "${userId}".`);
    return user;
  }

  async listIdentities(userId: string): Promise<IdentityRecord[]> {
    const identities = await this.deps.admin.listIdentities(userId);
    if (identities === null) throw new ProblemError('IAM_NOT_FOUND', `No user "${userId}".`);
    return identities;
  }

  /**
   * The subject a login of `userId` with `clientType` would have (its first enabled identity, its default profile):
   * what diagnostics explains "as this user". 404 for an unknown user.
   */
  async subjectOf(userId: string, clientType: string): Promise<{ principal: IamPrincipal; clientType: string }> {
    const user = await this.deps.repository.getUser(userId);
    if (user === null) throw new ProblemError('IAM_NOT_FOUND', `No user "${userId}".`);
    const identities = await this.listIdentities(userId);
    const identity = identities.find((candidate) => candidate.enabled) ?? identities[0];
    const active = selectActiveProfile(await this.deps.repository.listProfiles(userId), clientType);
    return {
      principal: {
        userId,
        identityId: identity?.identityId ?? '',
        identityDomain: identity?.identityDomain ?? '',
        activeProfileId: active?.profileId ?? null,
        authorizationVersion: user.authorizationVersion,
      },
      clientType,
    };
  }

  /** Every template version, by versionId. */
  async listTemplates(): Promise<TemplateRecord[]> {
    return this.deps.repository.listTemplates();
  }

  async getTemplate(versionId: string): Promise<TemplateRecord> {
    const template = await this.deps.repository.getTemplate(versionId);
    if (template === null) throw new ProblemError('IAM_NOT_FOUND', `No template version "${versionId}".`);
    return template;
  }

  /** The user's profiles, every state (disabled and revoked ones too), by profileId. */
  async listProfiles(userId: string): Promise<ProfileRecord[]> {
    if ((await this.deps.repository.getUser(userId)) === null) throw new ProblemError('IAM_NOT_FOUND', `No user "${userId}".`);
    return this.deps.repository.listProfiles(userId);
  }

  /** One profile; its version is the ETag a following write sends back in If-Match. */
  /** One page of any user's sessions (none marked current); 404 for an unknown user. */
  async listUserSessions(userId: string, limit: number, after: SessionPageKey | null): Promise<SessionPage> {
    if ((await this.deps.repository.getUser(userId)) === null) throw new ProblemError('IAM_NOT_FOUND', `No user "${userId}".`);
    return this.deps.sessions.list(userId, null, limit, after);
  }

  async getProfile(profileId: string): Promise<ProfileRecord> {
    const profile = await this.deps.repository.getProfile(profileId);
    if (profile === null) throw new ProblemError('IAM_NOT_FOUND', `No profile "${profileId}".`);
    return profile;
  }

  /** A disabled identity can no longer log in, and the sessions opened through it end at once. */
  async upsertIdentity(actor: AdminActor, identityId: string, body: IdentityBody, precondition: VersionPrecondition = null): Promise<{ identity: IdentityRecord; created: boolean }> {
    return this.write(() => this.deps.admin.upsertIdentity(identityId, body, auditContext(actor), precondition));
  }

  /** A disabled or revoked profile stops granting on the next request of every session using it. */
  async upsertProfile(actor: AdminActor, profileId: string, body: ProfileBody, precondition: VersionPrecondition): Promise<{ profile: ProfileRecord; created: boolean }> {
    const result = await this.write(() => this.deps.admin.upsertProfile(profileId, body, precondition, auditContext(actor)));
    return { profile: result.profile, created: result.created };
  }

  async replaceScopes(actor: AdminActor, profileId: string, scopes: ScopesBody, precondition: VersionPrecondition): Promise<ProfileRecord> {
    const seen = new Map<string, number>();
    const duplicates: Array<{ pointer: string; message: string }> = [];
    scopes.forEach((scope, index) => {
      const key = `${scope.scopeType}\u0000${scope.scopeRefId}`;
      const first = seen.get(key);
      if (first !== undefined) duplicates.push({ pointer: `/${index}`, message: `repeats the scope of /${first} (one access mode per resource)` });
      else seen.set(key, index);
    });
    if (duplicates.length > 0) throw problems.validation(duplicates);
    const result = await this.write(() => this.deps.admin.replaceProfileScopes(profileId, scopes, precondition, auditContext(actor)));
    return result.profile;
  }

  /** Every session of the user compiles its permissions afresh on its next request, on every instance. */
  async raiseAuthorizationVersion(actor: AdminActor, userId: string): Promise<RaisedAuthorization> {
    const raised = await this.write(() => this.deps.admin.raiseAuthorizationVersion(userId, auditContext(actor)));
    if (raised === null) throw new ProblemError('IAM_NOT_FOUND', `No user "${userId}".`);
    return raised;
  }

  /**
   * 404 IAM_SESSION_NOT_FOUND for an unknown session (SessionService audits `session.revoke`); while the database
   * is down, the session is ended by its id and recorded when it answers (SessionService.revokeById).
   */
  async revokeSession(actor: AdminActor, sessionId: string, reason: string | undefined): Promise<void> {
    await this.deps.sessions.revokeById(sessionId, reason ?? 'revoked_by_admin', actor.userId, actor.facts);
  }

  /**
   * Ends every session of the user (token store first, like logout). 404 for an unknown user — except while
   * the database is down, when an unknown user cannot be told from one without live sessions: the sessions
   * the token store lists are ended at once and the record (epoch raised, rows, audit rows) follows when the
   * database answers, so the answer is the same 200.
   */
  async revokeUserSessions(actor: AdminActor, userId: string, reason: string | undefined): Promise<{ revoked: number }> {
    const user = await this.deps.repository.getUser(userId).catch((error: unknown) => {
      if (error instanceof DatabaseUnavailableError) return undefined;
      throw error;
    });
    if (user === null) throw new ProblemError('IAM_NOT_FOUND', `No user "${userId}".`);
    const revoked = await this.deps.sessions.revokeUser(userId, reason ?? 'revoked_by_admin', actor.userId, actor.facts);
    // The per-session rows come from SessionService; this one records the admin's single action.
    this.deps.audit.record({
      action: 'admin.user.sessions.revoke',
      actorUserId: actor.userId,
      targetType: 'user',
      targetId: userId,
      outcome: 'success',
      requestId: actor.facts.requestId,
      clientAddress: actor.facts.clientAddress,
      details: { reason: reason ?? 'revoked_by_admin', revoked },
    });
    return { revoked };
  }

  /** Newest first; buffered request-path events (logins, revocations) are written first so they are listed. */
  async listAudit(params: AuditListParams): Promise<Page<StoredAuditEvent>> {
    const before = params.cursor === null ? null : decodeCursor(params.cursor);
    if (params.cursor !== null && (before === null || !isAuditId(before))) {
      throw problems.validation([{ pointer: '/cursor', message: 'is not a cursor of this list' }], 'The query is not valid.');
    }
    await this.deps.audit.flush();
    const rows = await this.deps.admin.listAudit({ limit: params.limit, before, userId: params.userId, action: params.action, since: params.since });
    return page(rows, params.limit, (event) => event.id);
  }

  /**
   * Maps what the caller can fix to problems: unknown target 404, stale or racing write 409, unknown reference
   * 422, a grant the actor does not hold 403 (`rule: ESCALATION_PREVENTION`, `errors` naming what). After a
   * commit the change feed is delivered (never failing the answer: the change is durable, and every instance
   * applies it within `iam.changes.poll-interval` even if this delivery fails).
   */
  private async write<T>(work: () => Promise<T>): Promise<T> {
    try {
      const result = await work();
      await this.deps.changes.deliver();
      return result;
    } catch (error) {
      if (!(error instanceof AdminWriteError)) throw error;
      if (error.kind === 'not-found') throw new ProblemError('IAM_NOT_FOUND', error.message);
      if (error.kind === 'conflict') throw new ProblemError('IAM_CONFLICT', error.message);
      if (error.kind === 'forbidden') throw new ProblemError('IAM_ACCESS_DENIED', error.message, { extensions: { rule: ESCALATION_RULE, errors: error.problems } });
      throw new ProblemError('IAM_VALIDATION_FAILED', error.message, { status: 422, extensions: { errors: error.problems } });
    }
  }
}

function auditContext(actor: AdminActor): AdminAuditContext {
  return { actorUserId: actor.userId, requestId: actor.facts.requestId, clientAddress: actor.facts.clientAddress, holds: actor.holds };
}

function page<T>(rows: T[], limit: number, keyOf: (row: T) => string): Page<T> {
  if (rows.length <= limit) return { items: rows, nextCursor: null };
  const items = rows.slice(0, limit);
  return { items, nextCursor: encodeCursor(keyOf(items[items.length - 1]!)) };
}
