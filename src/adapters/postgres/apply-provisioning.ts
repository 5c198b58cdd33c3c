import type { EntityManager } from '@mikro-orm/postgresql';
import { IdentityEntity } from './entities/identity-entity';
import { PermissionTemplateEntity, TemplatePermissionEntity } from './entities/permission-template-entity';
import { ProfileEntity } from './entities/profile-entity';
import { UserEntity } from './entities/user-entity';
import { ProvisioningError } from '../../domain/iam-repository';
import { applyProfile, sameSet, unique } from './apply-profile';
import { auditProvisioningChanges, missingPart } from './provisioning-mode';
import { OVERWRITE_UNAUDITED, type ProvisioningOptions } from '../../domain/provisioning';
import { recordPrincipalChanges } from './change-log';
import { type PrincipalChange } from '../../domain/changes';
import { SummaryBuilder } from './provisioning-summary';
import { validateProvisioning, type StoredProvisioningState } from './provisioning-validation';
import type { ProvisioningDocument, ProvisioningSummary } from '../../domain/records';

type TemplateInput = NonNullable<ProvisioningDocument['templates']>[number];
type UserInput = NonNullable<ProvisioningDocument['users']>[number];

/**
 * Key of a transaction-scoped advisory lock: gateway instances that apply the same file at start would
 * otherwise race to insert the same rows.
 */
const PROVISIONING_LOCK_KEY = 7_311_004_211;

/**
 * Applies a provisioning document inside the caller's transaction: reads everything it
 * mentions, validates it (rejecting with `ProvisioningError` before any write), then writes only the
 * differences. An omitted optional field (`displayName`, `enabled`, `revoked`, `description`, a profile's
 * `scopes`) keeps the stored value, so re-applying a file at start never undoes an admin's revocation;
 * new objects get the defaults. Given scopes replace the stored ones as a set.
 *
 * A user is affected (and its `authorizationVersion` raised by 1) when one of its profiles is created or
 * changes template, scopes, client types, enabled or revoked; when its own enabled flag changes; or when
 * the permissions of a template one of its profiles uses change. Users created by this run are not listed:
 * they have no sessions to refresh.
 */
export async function applyProvisioningDocument(
  em: EntityManager,
  input: ProvisioningDocument,
  options: ProvisioningOptions = OVERWRITE_UNAUDITED,
): Promise<ProvisioningSummary> {
  await em.execute('select pg_advisory_xact_lock(?)', [PROVISIONING_LOCK_KEY]);
  // Create-missing (#11.22): the objects the database already holds are left out, so nothing existing changes.
  const document = options.overwrite ? input : await missingPart(em, input);
  const templates = document.templates ?? [];
  const users = document.users ?? [];

  const state = await loadStoredState(em, document);
  const problems = validateProvisioning(document, state);
  if (problems.length > 0) {
    throw new ProvisioningError(`The provisioning document has ${problems.length} problem(s); nothing was changed.`, problems);
  }

  // Read phase, finished before the first write: users whose templates' permissions are about to change.
  const changedTemplateIds = templates
    .filter((template) => {
      const stored = state.templates.get(template.versionId);
      return stored !== undefined && !sameSet(permissionCodes(stored), template.permissions);
    })
    .map((template) => template.versionId);
  const affected = new Set(await usersOfTemplates(em, changedTemplateIds));
  const storedUsers = await loadUsers(em, unique([...users.map((user) => user.userId), ...affected]));

  const now = new Date();
  const builder = new SummaryBuilder();
  const createdUsers = new Set<string>();
  // What other instances must act on: the same principal changes the admin API records (change-log.ts).
  const changes: PrincipalChange[] = changedTemplateIds.map((versionId) => ({ kind: 'template-changed', versionId }));
  for (const template of templates) applyTemplate(em, template, state, builder, now);
  for (const input of users) {
    const { user, created, enabledChanged } = applyUser(em, input, storedUsers, builder, now);
    if (created) createdUsers.add(input.userId);
    if (enabledChanged) affected.add(input.userId);
    if (enabledChanged && !user.enabled) changes.push({ kind: 'user-disabled', userId: input.userId });
    for (const identityId of applyIdentities(em, user, input, state, builder, now)) {
      changes.push({ kind: 'identity-disabled', userId: input.userId, identityId });
    }
    for (const profile of input.profiles ?? []) {
      if (!applyProfile(em, user, profile, state, builder, now)) continue;
      affected.add(input.userId);
      if (!created) changes.push({ kind: 'profile-changed', userId: input.userId, profileId: profile.profileId });
    }
  }

  // Live sessions compare this version with their cached ability and recompute it.
  const raised = [...affected].filter((userId) => !createdUsers.has(userId)).sort();
  for (const userId of raised) {
    const user = storedUsers.get(userId);
    if (user === undefined) continue;
    user.authorizationVersion += 1;
    user.updatedAt = now;
  }
  builder.summary.affectedUserIds = raised;
  await auditProvisioningChanges(em, builder.entries, options);
  for (const userId of raised) {
    const user = storedUsers.get(userId);
    changes.push({ kind: 'authorization-changed', userId, ...(user ? { authorizationVersion: user.authorizationVersion } : {}) });
  }
  await em.flush();
  await recordPrincipalChanges(em, changes, { actorUserId: null, requestId: null, clientAddress: null });
  return builder.summary;
}

function permissionCodes(template: PermissionTemplateEntity): string[] {
  return template.permissions.getItems().map((permission) => permission.permissionCode);
}

async function loadStoredState(em: EntityManager, document: ProvisioningDocument): Promise<StoredProvisioningState> {
  const users = document.users ?? [];
  const profiles = users.flatMap((user) => user.profiles ?? []);
  const strings = (values: unknown[]): string[] => unique(values.filter((value): value is string => typeof value === 'string'));
  const templateIds = strings([
    ...(document.templates ?? []).map((template) => template.versionId),
    ...profiles.map((profile) => profile.templateVersionId),
  ]);
  const identityIds = strings(users.flatMap((user) => (user.identities ?? []).map((identity) => identity.identityId)));
  const profileIds = strings(profiles.map((profile) => profile.profileId));

  const templates = templateIds.length
    ? await em.find(PermissionTemplateEntity, { versionId: { $in: templateIds } }, { populate: ['permissions'] })
    : [];
  const identities = identityIds.length ? await em.find(IdentityEntity, { identityId: { $in: identityIds } }) : [];
  const storedProfiles = profileIds.length
    ? await em.find(ProfileEntity, { profileId: { $in: profileIds } }, { populate: ['scopes'] })
    : [];
  return {
    templates: new Map(templates.map((template) => [template.versionId, template])),
    identities: new Map(identities.map((identity) => [identity.identityId, identity])),
    profiles: new Map(storedProfiles.map((profile) => [profile.profileId, profile])),
  };
}

async function usersOfTemplates(em: EntityManager, versionIds: string[]): Promise<string[]> {
  if (versionIds.length === 0) return [];
  const rows = await em
    .createQueryBuilder(ProfileEntity, 'p')
    .select('p.user', true)
    .where({ template: { $in: versionIds } })
    .execute<Array<{ user: string }>>('all');
  return rows.map((row) => row.user);
}

async function loadUsers(em: EntityManager, userIds: string[]): Promise<Map<string, UserEntity>> {
  const users = userIds.length ? await em.find(UserEntity, { userId: { $in: userIds } }) : [];
  return new Map(users.map((user) => [user.userId, user]));
}

/** Creates the user, or updates what the document states about it (`enabled` decides whether it may act at all). */
function applyUser(
  em: EntityManager,
  input: UserInput,
  storedUsers: Map<string, UserEntity>,
  builder: SummaryBuilder,
  now: Date,
): { user: UserEntity; created: boolean; enabledChanged: boolean } {
  const user = storedUsers.get(input.userId);
  if (user === undefined) {
    const created = em.create(UserEntity, {
      userId: input.userId,
      displayName: input.displayName ?? null,
      enabled: input.enabled ?? true,
      createdAt: now,
      updatedAt: now,
    });
    storedUsers.set(input.userId, created);
    builder.created('user', input.userId);
    return { user: created, created: true, enabledChanged: false };
  }
  const fields: string[] = [];
  if (input.displayName !== undefined && user.displayName !== input.displayName) {
    user.displayName = input.displayName;
    fields.push('displayName');
  }
  if (input.enabled !== undefined && user.enabled !== input.enabled) {
    user.enabled = input.enabled;
    fields.push('enabled');
  }
  if (fields.length > 0) user.updatedAt = now;
  builder.compared('user', input.userId, fields);
  return { user, created: false, enabledChanged: fields.includes('enabled') };
}

function applyTemplate(em: EntityManager, input: TemplateInput, state: StoredProvisioningState, builder: SummaryBuilder, now: Date): void {
  const wanted = unique(input.permissions);
  const stored = state.templates.get(input.versionId);
  if (stored === undefined) {
    const template = em.create(PermissionTemplateEntity, {
      versionId: input.versionId,
      name: input.name,
      description: input.description ?? null,
      createdAt: now,
      updatedAt: now,
    });
    for (const code of wanted) template.permissions.add(em.create(TemplatePermissionEntity, { template, permissionCode: code }));
    state.templates.set(input.versionId, template);
    builder.created('template', input.versionId);
    return;
  }
  const fields: string[] = [];
  if (stored.name !== input.name) {
    stored.name = input.name;
    fields.push('name');
  }
  if (input.description !== undefined && stored.description !== input.description) {
    stored.description = input.description;
    fields.push('description');
  }
  const current = new Set(permissionCodes(stored));
  if (!sameSet(current, wanted)) {
    const keep = new Set(wanted);
    for (const permission of stored.permissions.getItems()) {
      if (!keep.has(permission.permissionCode)) stored.permissions.remove(permission);
    }
    for (const code of wanted) {
      if (!current.has(code)) stored.permissions.add(em.create(TemplatePermissionEntity, { template: stored, permissionCode: code }));
    }
    fields.push('permissions');
  }
  if (fields.length > 0) stored.updatedAt = now;
  builder.compared('template', input.versionId, fields);
}

function applyIdentities(
  em: EntityManager,
  user: UserEntity,
  input: UserInput,
  state: StoredProvisioningState,
  builder: SummaryBuilder,
  now: Date,
): string[] {
  const disabled: string[] = [];
  for (const identity of input.identities ?? []) {
    const stored = state.identities.get(identity.identityId);
    if (stored === undefined) {
      em.create(IdentityEntity, {
        identityId: identity.identityId,
        user,
        identityDomain: identity.identityDomain,
        enabled: identity.enabled ?? true,
        createdAt: now,
        updatedAt: now,
      });
      builder.created('identity', identity.identityId);
      continue;
    }
    const fields: string[] = [];
    if (stored.identityDomain !== identity.identityDomain) {
      stored.identityDomain = identity.identityDomain;
      fields.push('identityDomain');
    }
    if (identity.enabled !== undefined && stored.enabled !== identity.enabled) {
      stored.enabled = identity.enabled;
      fields.push('enabled');
      if (!identity.enabled) disabled.push(identity.identityId);
    }
    if (fields.length > 0) stored.updatedAt = now;
    builder.compared('identity', identity.identityId, fields);
  }
  return disabled;
}
