import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { withOrmContext } from './async-context-gate';
import { sameSet, unique } from './apply-profile';
import { refuseTemplateEscalation, refuseUserEscalation } from './admin-escalation';
import { writeProfile, writeProfileScopes } from './admin-profile-writes';
import { type ProfileInput, type ProfileWriteResult, type VersionPrecondition } from '../../domain/admin-repository';
import { changedFields, checkPrecondition, insertAdminAudit, lockRow, raiseAuthorizationVersions, toAdminWriteError, withoutVersion } from './admin-write-support';
import { AdminWriteError, type AdminAuditContext, type RaisedAuthorization } from '../../domain/admin-repository';
import { recordPrincipalChanges } from './change-log';
import { type PrincipalChange } from '../../domain/changes';
import { toRepositoryError } from './connection-failure';
import { IdentityEntity } from './entities/identity-entity';
import { PermissionTemplateEntity, TemplatePermissionEntity } from './entities/permission-template-entity';
import { UserEntity } from './entities/user-entity';
import { toIdentityRecord, toTemplateRecord, toUserRecord } from './record-mappers';
import type { AuditEventRecord, StoredAuditEvent, IdentityRecord, ScopeRecord, TemplateRecord, UserRecord } from '../../domain/records';
import { type TemplateWriteResult, type UserWriteResult, type IdentityWriteResult, type UserListQuery, type AuditListQuery, type AdminRepository } from '../../domain/admin-repository';


/** Escapes `%`, `_` and `\` so user text matches literally in LIKE (PostgreSQL's default escape is `\`). */
export function escapeLike(text: string): string {
  let out = '';
  for (const char of text) out += char === '%' || char === '_' || char === '\\' ? `\\${char}` : char;
  return out;
}

/** `AdminRepository` over MikroORM and PostgreSQL (or PGlite); each call forks its own entity manager. */
export class MikroOrmAdminRepository implements AdminRepository {
  constructor(private readonly orm: MikroORM) {}

  private async run<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
    try {
      return await withOrmContext(() => work(this.orm.em.fork()));
    } catch (error) {
      throw toRepositoryError(toAdminWriteError(error));
    }
  }

  private write<T>(work: (tx: EntityManager) => Promise<T>): Promise<T> {
    return this.run((em) => em.transactional((tx) => work(tx)));
  }

  upsertTemplate(versionId: string, input: { name: string; description?: string; permissions: string[] }, audit: AdminAuditContext, precondition: VersionPrecondition = null): Promise<TemplateWriteResult> {
    return this.write(async (tx) => {
      const exists = await lockRow(tx, 'iam_permission_templates', 'version_id', versionId);
      const stored = exists ? await tx.findOneOrFail(PermissionTemplateEntity, { versionId }, { populate: ['permissions'] }) : null;
      checkPrecondition('template', stored, precondition);
      const before = stored === null ? null : toTemplateRecord(stored);
      const wanted = unique(input.permissions);
      if (before !== null) await refuseTemplateEscalation(tx, audit.holds, versionId, wanted, before.permissions);
      const description = input.description ?? before?.description ?? null;
      if (stored === null) {
        const template = tx.create(PermissionTemplateEntity, { versionId, name: input.name, description });
        for (const code of wanted) template.permissions.add(tx.create(TemplatePermissionEntity, { template, permissionCode: code }));
      } else {
        const template: PermissionTemplateEntity = stored;
        template.name = input.name;
        template.description = description;
        const current = new Set(before!.permissions);
        for (const permission of template.permissions.getItems()) {
          if (!wanted.includes(permission.permissionCode)) template.permissions.remove(permission);
        }
        for (const code of wanted) if (!current.has(code)) template.permissions.add(tx.create(TemplatePermissionEntity, { template, permissionCode: code }));
      }
      const after: TemplateRecord = { versionId, name: input.name, description, permissions: [...wanted].sort(), version: stored?.version ?? 0 };
      const changed = changedFields(withoutVersion(before), withoutVersion(after));
      if (stored !== null && changed.length > 0) stored.updatedAt = new Date();
      await tx.flush();
      // The version the flush assigned: the entity tag of what was written.
      after.version = (await tx.findOneOrFail(PermissionTemplateEntity, { versionId }, { refresh: true })).version;
      const permissionsChanged = before !== null && !sameSet(before.permissions, wanted);
      const raised = permissionsChanged ? await raiseAuthorizationVersions(tx, { templateVersionId: versionId }) : [];
      if (raised.length > 0) {
        await recordPrincipalChanges(tx, [{ kind: 'template-changed', versionId }, ...raised.map(authorizationChanged)], audit);
      }
      await insertAdminAudit(tx, audit, {
        action: stored === null ? 'admin.template.create' : 'admin.template.update',
        targetType: 'template',
        targetId: versionId,
        details: { before: before && withoutVersion(before), after: withoutVersion(after), changed, affectedUserIds: raised.map((user) => user.userId) },
      });
      return { template: after, created: stored === null, raised };
    });
  }

  listUsers(query: UserListQuery): Promise<UserRecord[]> {
    return this.run(async (em) => {
      const where: string[] = [];
      const params: unknown[] = [];
      if (query.after !== null) {
        where.push('u.user_id > ?');
        params.push(query.after);
      }
      if (query.text !== null) {
        const pattern = `%${escapeLike(query.text)}%`;
        where.push('(u.user_id ilike ? or u.display_name ilike ?)');
        params.push(pattern, pattern);
      }
      if (query.domain !== null) {
        where.push('exists (select 1 from iam_identities i where i.user_id = u.user_id and i.identity_domain = ?)');
        params.push(query.domain);
      }
      params.push(query.limit + 1);
      const rows = await em.execute<UserRow[]>(
        `select u.user_id, u.display_name, u.enabled, u.authorization_version, u.session_epoch, u.sessions_revoked_at, u.created_at, u.updated_at, u.version from iam_users u
         ${where.length > 0 ? `where ${where.join(' and ')}` : ''} order by u.user_id limit ?`,
        params,
      );
      return rows.map(fromUserRow);
    });
  }

  upsertUser(userId: string, input: { displayName?: string; enabled: boolean }, audit: AdminAuditContext, precondition: VersionPrecondition = null): Promise<UserWriteResult> {
    return this.write(async (tx) => {
      const exists = await lockRow(tx, 'iam_users', 'user_id', userId);
      const stored = exists ? await tx.findOneOrFail(UserEntity, { userId }) : null;
      checkPrecondition('user', stored, precondition);
      const before = stored === null ? null : toUserRecord(stored);
      // Re-enabling a user hands back everything their active profiles grant.
      if (before !== null && !before.enabled && input.enabled) await refuseUserEscalation(tx, audit.holds, userId, '/enabled');
      const now = new Date();
      let user = stored;
      if (user === null) {
        user = tx.create(UserEntity, { userId, displayName: input.displayName ?? null, enabled: input.enabled, createdAt: now, updatedAt: now });
      } else {
        if (input.displayName !== undefined) user.displayName = input.displayName;
        user.enabled = input.enabled;
      }
      const enabledChanged = before !== null && before.enabled !== input.enabled;
      // Enabling or disabling changes what every session of the user may do.
      if (enabledChanged) user.authorizationVersion += 1;
      const changed = before === null ? ['displayName', 'enabled'] : changedFields(userSummary(before), userSummary(user));
      if (stored !== null && changed.length > 0) user.updatedAt = now;
      await tx.flush();
      const after = toUserRecord(user);
      // A disabled user's sessions end, also on a repeated write (a retry finishes what a first try began).
      const changes: PrincipalChange[] = [];
      if (!after.enabled && stored !== null) changes.push({ kind: 'user-disabled', userId });
      if (enabledChanged) changes.push({ kind: 'authorization-changed', userId, authorizationVersion: after.authorizationVersion });
      const epochs = await recordPrincipalChanges(tx, changes, audit);
      const revocation = epochs.get(userId);
      if (revocation) Object.assign(after, { sessionEpoch: revocation.sessionEpoch, sessionsRevokedAt: revocation.sessionsRevokedAt });
      // Ending the sessions raised the epoch in the row: the entity tag is the version the transaction leaves.
      if (changes.length > 0) after.version = (await tx.findOneOrFail(UserEntity, { userId }, { refresh: true })).version;
      await insertAdminAudit(tx, audit, {
        action: stored === null ? 'admin.user.create' : 'admin.user.update',
        targetType: 'user',
        targetId: userId,
        details: { before: before && userSummary(before), after: userSummary(after), changed },
      });
      return { user: after, created: stored === null, enabledChanged };
    });
  }

  listIdentities(userId: string): Promise<IdentityRecord[] | null> {
    return this.run(async (em) => {
      const user = await em.findOne(UserEntity, { userId });
      if (user === null) return null;
      const identities = await em.find(IdentityEntity, { user: userId }, { orderBy: { identityId: 'asc' } });
      return identities.map(toIdentityRecord);
    });
  }

  upsertIdentity(identityId: string, input: { userId: string; identityDomain: string; enabled: boolean }, audit: AdminAuditContext, precondition: VersionPrecondition = null): Promise<IdentityWriteResult> {
    return this.write(async (tx) => {
      const user = await tx.findOne(UserEntity, { userId: input.userId });
      if (user === null) throw new AdminWriteError('not-found', `No user "${input.userId}".`, [{ pointer: '/userId', message: 'does not exist' }]);
      const exists = await lockRow(tx, 'iam_identities', 'identity_id', identityId);
      const stored = exists ? await tx.findOneOrFail(IdentityEntity, { identityId }) : null;
      checkPrecondition('identity', stored, precondition);
      if (stored !== null && stored.user.userId !== input.userId) {
        // Re-pointing an identity would log its owner in as someone else.
        throw new AdminWriteError('conflict', `Identity "${identityId}" belongs to user "${stored.user.userId}"; it cannot be moved.`);
      }
      const before = stored === null ? null : toIdentityRecord(stored);
      // An enabled identity logs in as its user, with everything the user's active profiles grant.
      if (input.enabled) await refuseUserEscalation(tx, audit.holds, input.userId, '/userId');
      const now = new Date();
      let identity = stored;
      if (identity === null) {
        identity = tx.create(IdentityEntity, { identityId, user, identityDomain: input.identityDomain, enabled: input.enabled, createdAt: now, updatedAt: now });
      } else {
        identity.identityDomain = input.identityDomain;
        identity.enabled = input.enabled;
      }
      const changed = changedFields(withoutVersion(before), withoutVersion(toIdentityRecord(identity)));
      if (stored !== null && changed.length > 0) identity.updatedAt = now;
      await tx.flush();
      const after = toIdentityRecord(identity);
      if (!after.enabled && stored !== null) await recordPrincipalChanges(tx, [{ kind: 'identity-disabled', userId: input.userId, identityId }], audit);
      await insertAdminAudit(tx, audit, {
        action: stored === null ? 'admin.identity.create' : 'admin.identity.update',
        targetType: 'identity',
        targetId: identityId,
        details: { before: before && withoutVersion(before), after: withoutVersion(after), changed },
      });
      return { identity: after, created: stored === null };
    });
  }

  upsertProfile(profileId: string, input: ProfileInput, precondition: VersionPrecondition, audit: AdminAuditContext): Promise<ProfileWriteResult> {
    return this.write(async (tx) => recordProfileChanges(tx, await writeProfile(tx, profileId, input, precondition, audit), audit));
  }

  replaceProfileScopes(profileId: string, scopes: ScopeRecord[], precondition: VersionPrecondition, audit: AdminAuditContext): Promise<ProfileWriteResult> {
    return this.write(async (tx) => recordProfileChanges(tx, await writeProfileScopes(tx, profileId, scopes, precondition, audit), audit));
  }

  raiseAuthorizationVersion(userId: string, audit: AdminAuditContext): Promise<RaisedAuthorization | null> {
    return this.write(async (tx) => {
      const [raised] = await raiseAuthorizationVersions(tx, { userId });
      if (raised === undefined) return null;
      await recordPrincipalChanges(tx, [authorizationChanged(raised)], audit);
      await insertAdminAudit(tx, audit, {
        action: 'admin.user.authorization-version.raise',
        targetType: 'user',
        targetId: userId,
        details: { before: { authorizationVersion: raised.authorizationVersion - 1 }, after: { authorizationVersion: raised.authorizationVersion } },
      });
      return raised;
    });
  }

  listAudit(query: AuditListQuery): Promise<StoredAuditEvent[]> {
    return this.run(async (em) => {
      const where: string[] = [];
      const params: unknown[] = [];
      if (query.before !== null) {
        where.push('id < ?');
        params.push(query.before);
      }
      if (query.userId !== null) {
        where.push(`(actor_user_id = ? or (target_type = 'user' and target_id = ?))`);
        params.push(query.userId, query.userId);
      }
      if (query.action !== null) {
        where.push('action = ?');
        params.push(query.action);
      }
      if (query.since !== null) {
        where.push('occurred_at >= ?');
        params.push(query.since);
      }
      params.push(query.limit + 1);
      const rows = await em.execute<AuditRow[]>(
        `select id, occurred_at, actor_user_id, action, target_type, target_id, outcome, request_id, decision_id, client_address, details
         from iam_audit_events ${where.length > 0 ? `where ${where.join(' and ')}` : ''} order by id desc limit ?`,
        params,
      );
      return rows.map(fromAuditRow);
    });
  }
}

function authorizationChanged(raised: RaisedAuthorization): PrincipalChange {
  return { kind: 'authorization-changed', userId: raised.userId, authorizationVersion: raised.authorizationVersion };
}

/** A changed profile is a principal change of its user (sessions on it are downgraded on their next request). */
async function recordProfileChanges(tx: EntityManager, result: ProfileWriteResult, audit: AdminAuditContext): Promise<ProfileWriteResult> {
  if (!result.changed) return result;
  await tx.flush();
  const changes: PrincipalChange[] = [{ kind: 'profile-changed', profileId: result.profile.profileId, userId: result.profile.userId }];
  if (result.raised) changes.push(authorizationChanged(result.raised));
  await recordPrincipalChanges(tx, changes, audit);
  return result;
}

interface UserRow {
  user_id: string;
  display_name: string | null;
  enabled: boolean;
  authorization_version: number;
  session_epoch: number;
  sessions_revoked_at: Date | string | null;
  created_at: Date | string;
  updated_at: Date | string;
  version: number | string;
}

interface AuditRow {
  id: string | number;
  occurred_at: Date | string;
  actor_user_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  outcome: AuditEventRecord['outcome'];
  request_id: string | null;
  decision_id: string | null;
  client_address: string | null;
  details: Record<string, unknown> | string | null;
}

function userSummary(user: Pick<UserRecord, 'displayName' | 'enabled' | 'authorizationVersion'>): Record<string, unknown> {
  return { displayName: user.displayName, enabled: user.enabled, authorizationVersion: user.authorizationVersion };
}


function fromUserRow(row: UserRow): UserRecord {
  return {
    userId: row.user_id,
    displayName: row.display_name,
    enabled: row.enabled,
    authorizationVersion: Number(row.authorization_version),
    sessionEpoch: Number(row.session_epoch),
    sessionsRevokedAt: row.sessions_revoked_at === null ? null : new Date(row.sessions_revoked_at),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
    version: Number(row.version),
  };
}

function fromAuditRow(row: AuditRow): StoredAuditEvent {
  return {
    id: String(row.id),
    occurredAt: new Date(row.occurred_at),
    actorUserId: row.actor_user_id,
    action: row.action,
    targetType: row.target_type,
    targetId: row.target_id,
    outcome: row.outcome,
    requestId: row.request_id,
    decisionId: row.decision_id,
    clientAddress: row.client_address,
    details: typeof row.details === 'string' ? (JSON.parse(row.details) as Record<string, unknown>) : row.details,
  };
}
