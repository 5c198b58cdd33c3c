import type { AuditEventEntity } from './entities/audit-event-entity';
import type { IdentityEntity } from './entities/identity-entity';
import type { PermissionTemplateEntity } from './entities/permission-template-entity';
import type { ProfileEntity, ResourceScopeEntity } from './entities/profile-entity';
import type { SessionEntity } from './entities/session-entity';
import type { UserEntity } from './entities/user-entity';
import type {
  IdentityRecord,
  ProfileRecord,
  ScopeRecord,
  SessionRecord,
  TemplateRecord,
  UserRecord,
  StoredAuditEvent,
} from '../../domain/records';

/** Entities stay inside adapters/postgres/: the rest of the gateway sees these plain records. */

export function toUserRecord(user: UserEntity): UserRecord {
  return {
    userId: user.userId,
    displayName: user.displayName,
    enabled: user.enabled,
    authorizationVersion: user.authorizationVersion,
    sessionEpoch: user.sessionEpoch,
    sessionsRevokedAt: user.sessionsRevokedAt,
    createdAt: user.createdAt,
    updatedAt: user.updatedAt,
    version: user.version,
  };
}

export function toIdentityRecord(identity: IdentityEntity): IdentityRecord {
  return {
    identityId: identity.identityId,
    userId: identity.user.userId,
    identityDomain: identity.identityDomain,
    enabled: identity.enabled,
    version: identity.version,
  };
}

/** Orders scopes by (scopeType, scopeRefId) so records and comparisons are deterministic. */
export function compareScopes(a: ScopeRecord, b: ScopeRecord): number {
  if (a.scopeType !== b.scopeType) return a.scopeType < b.scopeType ? -1 : 1;
  if (a.scopeRefId !== b.scopeRefId) return a.scopeRefId < b.scopeRefId ? -1 : 1;
  return 0;
}

export function toScopeRecord(scope: ResourceScopeEntity): ScopeRecord {
  return { scopeType: scope.scopeType, scopeRefId: scope.scopeRefId, accessMode: scope.accessMode };
}

/** `profile.scopes` must be initialized (populated). */
export function toProfileRecord(profile: ProfileEntity): ProfileRecord {
  return {
    profileId: profile.profileId,
    userId: profile.user.userId,
    profileName: profile.profileName,
    templateVersionId: profile.template.versionId,
    clientTypes: [...profile.clientTypes],
    enabled: profile.enabled,
    revoked: profile.revoked,
    unscoped: profile.unscoped,
    scopes: profile.scopes.getItems().map(toScopeRecord).sort(compareScopes),
    version: profile.version,
  };
}

/** `template.permissions` must be initialized (populated). */
export function toTemplateRecord(template: PermissionTemplateEntity): TemplateRecord {
  return {
    versionId: template.versionId,
    name: template.name,
    description: template.description,
    permissions: template.permissions
      .getItems()
      .map((permission) => permission.permissionCode)
      .sort(),
    version: template.version,
  };
}

export function toSessionRecord(session: SessionEntity): SessionRecord {
  return {
    sessionId: session.sessionId,
    userId: session.userId,
    identityId: session.identityId,
    clientType: session.clientType,
    activeProfileId: session.activeProfileId,
    tokenHash: session.tokenHash,
    createdAt: session.createdAt,
    expiresAt: session.expiresAt,
    lastSeenAt: session.lastSeenAt,
    revokedAt: session.revokedAt,
    logoutAt: session.logoutAt,
    revokeReason: session.revokeReason,
    clientAddress: session.clientAddress,
    userAgent: session.userAgent,
    originSessionId: session.originSessionId ?? null,
    idpSessionId: session.idpSessionId ?? null,
  };
}

export function toAuditEventRecord(event: AuditEventEntity): StoredAuditEvent {
  return {
    id: event.id,
    occurredAt: event.occurredAt,
    actorUserId: event.actorUserId,
    action: event.action,
    targetType: event.targetType,
    targetId: event.targetId,
    outcome: event.outcome,
    requestId: event.requestId,
    decisionId: event.decisionId,
    clientAddress: event.clientAddress,
    details: event.details,
  };
}
