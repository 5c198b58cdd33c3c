import type { EntityManager } from '@mikro-orm/postgresql';
import { unique } from './apply-profile';
import { changedFields, checkPrecondition, insertAdminAudit, lockRow, raiseAuthorizationVersions, withoutVersion } from './admin-write-support';
import { AdminWriteError, type AdminAuditContext } from '../../domain/admin-repository';
import { grantedBy, profileEscalations, refuseEscalation, shareLockTemplate } from './admin-escalation';
import { PermissionTemplateEntity } from './entities/permission-template-entity';
import { ProfileEntity, ResourceScopeEntity } from './entities/profile-entity';
import { UserEntity } from './entities/user-entity';
import { toProfileRecord } from './record-mappers';
import type { ProfileRecord, ScopeRecord } from '../../domain/records';
import { type ProfileInput, type VersionPrecondition, type ProfileWriteResult } from '../../domain/admin-repository';

const scopeKey = (scope: { scopeType: string; scopeRefId: string }): string => `${scope.scopeType}\u0000${scope.scopeRefId}`;


/**
 * Locks the profile row (`select … for update`) so two admins writing the same profile are serialized,
 * then checks `If-Match` against the version read under the lock: an update is never lost silently.
 */
async function lockProfile(em: EntityManager, profileId: string, precondition: VersionPrecondition): Promise<ProfileEntity | null> {
  const exists = await lockRow(em, 'iam_profiles', 'profile_id', profileId);
  const stored = exists ? await em.findOneOrFail(ProfileEntity, { profileId }, { populate: ['scopes', 'template', 'user'] }) : null;
  checkPrecondition('profile', stored, precondition);
  return stored;
}

/** Re-reads the profile after flush, so the record carries the version the database assigned. */
async function reload(em: EntityManager, profileId: string): Promise<ProfileRecord> {
  const profile = await em.findOneOrFail(ProfileEntity, { profileId }, { populate: ['scopes'], refresh: true });
  return toProfileRecord(profile);
}

/** Creates or replaces a profile (not its scopes) inside the caller's transaction; audits `admin.profile.create|update`. */
export async function writeProfile(
  em: EntityManager,
  profileId: string,
  input: ProfileInput,
  precondition: VersionPrecondition,
  audit: AdminAuditContext,
): Promise<ProfileWriteResult> {
  const stored = await lockProfile(em, profileId, precondition);
  await shareLockTemplate(em, input.templateVersionId);
  const [user, template] = await Promise.all([
    em.findOne(UserEntity, { userId: input.userId }),
    em.findOne(PermissionTemplateEntity, { versionId: input.templateVersionId }, { populate: ['permissions'] }),
  ]);
  const problems: Array<{ pointer: string; message: string }> = [];
  if (user === null) problems.push({ pointer: '/userId', message: `user "${input.userId}" does not exist` });
  if (template === null) problems.push({ pointer: '/templateVersionId', message: `template "${input.templateVersionId}" does not exist` });
  if (problems.length > 0) throw new AdminWriteError('unknown-reference', 'The profile names objects that do not exist.', problems);
  if (stored !== null && stored.user.userId !== input.userId) {
    // Moving a profile would hand its live sessions' grants to someone else; create a new profile instead.
    throw new AdminWriteError('conflict', `Profile "${profileId}" belongs to user "${stored.user.userId}"; it cannot be moved.`);
  }
  const permissions = template!.permissions.getItems().map((permission) => permission.permissionCode);
  // Unscoped is explicit (#11.31): a new profile without scopes is unscoped unless the body says otherwise.
  const unscoped = input.unscoped ?? stored?.unscoped ?? true;
  const scopes = unscoped || stored === null ? [] : grantedBy(stored, { permissions }).scopes;
  // What the profile grants once written: the new template, flags and scoping.
  refuseEscalation(profileEscalations(audit.holds, { profileId, permissions, scopes, unscoped, clientTypes: unique(input.clientTypes), active: input.enabled && !input.revoked }));

  const before = stored === null ? null : toProfileRecord(stored);
  const now = new Date();
  if (stored === null) {
    em.create(ProfileEntity, {
      profileId,
      user: user!,
      profileName: input.profileName,
      template: template!,
      clientTypes: unique(input.clientTypes),
      enabled: input.enabled,
      revoked: input.revoked,
      unscoped,
      createdAt: now,
      updatedAt: now,
    });
  } else {
    stored.profileName = input.profileName;
    stored.template = template!;
    stored.clientTypes = unique(input.clientTypes);
    stored.enabled = input.enabled;
    stored.revoked = input.revoked;
    stored.unscoped = unscoped;
    // An unscoped profile has no scopes: making it unscoped drops them (audited in `changed`).
    if (unscoped) stored.scopes.removeAll();
  }
  const afterInput = { ...(before ?? { scopes: [] }), profileId, ...input, clientTypes: unique(input.clientTypes), unscoped, scopes };
  const changed = changedFields(before === null ? null : withoutVersion(before), withoutVersion(afterInput as ProfileRecord));
  if (stored !== null && changed.length > 0) stored.updatedAt = now;
  await em.flush();
  const profile = await reload(em, profileId);
  // A renamed profile grants the same; anything else can change what the owner's sessions may do.
  const raised = stored === null || changed.some((field) => field !== 'profileName') ? (await raiseAuthorizationVersions(em, { userId: input.userId }))[0] ?? null : null;
  await insertAdminAudit(em, audit, {
    action: stored === null ? 'admin.profile.create' : 'admin.profile.update',
    targetType: 'profile',
    targetId: profileId,
    details: { before: before && withoutVersion(before), after: withoutVersion(profile), changed, authorizationVersion: raised?.authorizationVersion ?? null },
  });
  return { profile, created: stored === null, changed: stored === null || changed.length > 0, raised };
}

/** Replaces a profile's scopes as a set inside the caller's transaction; audits `admin.profile.scopes.update`. */
export async function writeProfileScopes(
  em: EntityManager,
  profileId: string,
  scopes: ScopeRecord[],
  precondition: VersionPrecondition,
  audit: AdminAuditContext,
): Promise<ProfileWriteResult> {
  const stored = await lockProfile(em, profileId, precondition);
  if (stored === null) throw new AdminWriteError('not-found', `No profile "${profileId}".`);
  await shareLockTemplate(em, stored.template.versionId);
  await em.populate(stored, ['template.permissions']);
  // Scopes make a profile scoped; removing the last one leaves it scoped, granting no resource (#11.31).
  const unscoped = scopes.length > 0 ? false : stored.unscoped;
  refuseEscalation(profileEscalations(audit.holds, grantedBy(stored, { scopes, unscoped })));
  const before = toProfileRecord(stored);

  const wanted = new Map(scopes.map((scope) => [scopeKey(scope), scope]));
  const kept = new Set<string>();
  let changed = false;
  for (const scope of stored.scopes.getItems()) {
    const target = wanted.get(scopeKey(scope));
    if (target === undefined) {
      stored.scopes.remove(scope);
      changed = true;
      continue;
    }
    kept.add(scopeKey(scope));
    if (scope.accessMode !== target.accessMode) {
      scope.accessMode = target.accessMode;
      changed = true;
    }
  }
  for (const [key, scope] of wanted) {
    if (kept.has(key)) continue;
    stored.scopes.add(em.create(ResourceScopeEntity, { profile: stored, ...scope }));
    changed = true;
  }
  if (stored.unscoped !== unscoped) {
    stored.unscoped = unscoped;
    changed = true;
  }
  // Touching the profile row raises its version, so If-Match also guards scope changes.
  if (changed) stored.updatedAt = new Date();
  await em.flush();
  const profile = await reload(em, profileId);
  const raised = changed ? (await raiseAuthorizationVersions(em, { userId: profile.userId }))[0] ?? null : null;
  await insertAdminAudit(em, audit, {
    action: 'admin.profile.scopes.update',
    targetType: 'profile',
    targetId: profileId,
    details: {
      before: { scopes: before.scopes, unscoped: before.unscoped },
      after: { scopes: profile.scopes, unscoped: profile.unscoped },
      changed: changed ? (before.unscoped !== profile.unscoped ? ['scopes', 'unscoped'] : ['scopes']) : [],
      authorizationVersion: raised?.authorizationVersion ?? null,
    },
  });
  return { profile, created: false, changed, raised };
}
