import type { EntityManager } from '@mikro-orm/postgresql';
import { IdentityEntity } from './entities/identity-entity';
import { PermissionTemplateEntity } from './entities/permission-template-entity';
import { ProfileEntity } from './entities/profile-entity';
import { ResourceScopeEntity } from './entities/resource-scope-entity';
import { TemplatePermissionEntity } from './entities/template-permission-entity';
import { UserEntity } from './entities/user-entity';
import { ProvisioningError } from './iam-repository';
import { validateProvisioning, type StoredProvisioningState } from './provisioning-validation';
import type { ProvisioningDocument, ProvisioningSummary, ScopeRecord } from './records';

type TemplateInput = NonNullable<ProvisioningDocument['templates']>[number];
type UserInput = NonNullable<ProvisioningDocument['users']>[number];
type ProfileInput = NonNullable<UserInput['profiles']>[number];

/**
 * Key of a transaction-scoped advisory lock: gateway instances that apply the same file at start would
 * otherwise race to insert the same rows.
 */
const PROVISIONING_LOCK_KEY = 7_311_004_211;

const unique = <T>(values: Iterable<T>): T[] => [...new Set(values)];
const sameSet = (a: Iterable<string>, b: Iterable<string>): boolean => {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((value) => right.has(value));
};
const scopeKey = (scope: { scopeType: string; scopeRefId: string }): string => `${scope.scopeType}\u0000${scope.scopeRefId}`;

/** Counts and describes what one run changed. */
class SummaryBuilder {
  readonly summary: ProvisioningSummary = { created: 0, updated: 0, unchanged: 0, changes: [], affectedUserIds: [] };

  created(kind: string, id: string): void {
    this.summary.created += 1;
    this.summary.changes.push(`${kind} ${id}: created`);
  }

  /** An empty `fields` list counts the object as unchanged. */
  compared(kind: string, id: string, fields: string[]): void {
    if (fields.length === 0) {
      this.summary.unchanged += 1;
      return;
    }
    this.summary.updated += 1;
    this.summary.changes.push(`${kind} ${id}: updated (${fields.join(', ')})`);
  }
}

/**
 * Applies a provisioning document (design.md §6) inside the caller's transaction: reads everything it
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
export async function applyProvisioningDocument(em: EntityManager, document: ProvisioningDocument): Promise<ProvisioningSummary> {
  await em.execute('select pg_advisory_xact_lock(?)', [PROVISIONING_LOCK_KEY]);
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
  for (const template of templates) applyTemplate(em, template, state, builder, now);
  for (const input of users) {
    let user = storedUsers.get(input.userId);
    if (user === undefined) {
      user = em.create(UserEntity, {
        userId: input.userId,
        displayName: input.displayName ?? null,
        enabled: input.enabled ?? true,
        createdAt: now,
        updatedAt: now,
      });
      storedUsers.set(input.userId, user);
      createdUsers.add(input.userId);
      builder.created('user', input.userId);
    } else {
      const fields: string[] = [];
      if (input.displayName !== undefined && user.displayName !== input.displayName) {
        user.displayName = input.displayName;
        fields.push('displayName');
      }
      if (input.enabled !== undefined && user.enabled !== input.enabled) {
        user.enabled = input.enabled;
        fields.push('enabled');
        affected.add(input.userId);
      }
      if (fields.length > 0) user.updatedAt = now;
      builder.compared('user', input.userId, fields);
    }
    applyIdentities(em, user, input, state, builder, now);
    for (const profile of input.profiles ?? []) {
      if (applyProfile(em, user, profile, state, builder, now)) affected.add(input.userId);
    }
  }

  // Live sessions compare this version with their cached ability and recompute it (design.md §6).
  const raised = [...affected].filter((userId) => !createdUsers.has(userId)).sort();
  for (const userId of raised) {
    const user = storedUsers.get(userId);
    if (user === undefined) continue;
    user.authorizationVersion += 1;
    user.updatedAt = now;
  }
  builder.summary.affectedUserIds = raised;
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

  const [templates, identities, storedProfiles] = [
    templateIds.length ? await em.find(PermissionTemplateEntity, { versionId: { $in: templateIds } }, { populate: ['permissions'] }) : [],
    identityIds.length ? await em.find(IdentityEntity, { identityId: { $in: identityIds } }) : [],
    profileIds.length ? await em.find(ProfileEntity, { profileId: { $in: profileIds } }, { populate: ['scopes', 'template'] }) : [],
  ];
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
): void {
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
    }
    if (fields.length > 0) stored.updatedAt = now;
    builder.compared('identity', identity.identityId, fields);
  }
}

/** Creates or updates one profile; true when the user's authorization changed. */
function applyProfile(
  em: EntityManager,
  user: UserEntity,
  input: ProfileInput,
  state: StoredProvisioningState,
  builder: SummaryBuilder,
  now: Date,
): boolean {
  // Validation guarantees the template is in the document (already applied) or stored.
  const template = state.templates.get(input.templateVersionId)!;
  const stored = state.profiles.get(input.profileId);
  if (stored === undefined) {
    const profile = em.create(ProfileEntity, {
      profileId: input.profileId,
      user,
      profileName: input.profileName,
      template,
      clientTypes: unique(input.clientTypes),
      enabled: input.enabled ?? true,
      revoked: input.revoked ?? false,
      createdAt: now,
      updatedAt: now,
    });
    for (const scope of input.scopes ?? []) profile.scopes.add(createScope(em, profile, scope));
    builder.created('profile', input.profileId);
    return true;
  }
  const fields: string[] = [];
  if (stored.profileName !== input.profileName) {
    stored.profileName = input.profileName;
    fields.push('profileName');
  }
  if (stored.template.versionId !== input.templateVersionId) {
    stored.template = template;
    fields.push('templateVersionId');
  }
  if (!sameSet(stored.clientTypes, input.clientTypes)) {
    stored.clientTypes = unique(input.clientTypes);
    fields.push('clientTypes');
  }
  if (input.enabled !== undefined && stored.enabled !== input.enabled) {
    stored.enabled = input.enabled;
    fields.push('enabled');
  }
  if (input.revoked !== undefined && stored.revoked !== input.revoked) {
    stored.revoked = input.revoked;
    fields.push('revoked');
  }
  if (input.scopes !== undefined && replaceScopes(em, stored, input.scopes)) fields.push('scopes');
  // Touching updatedAt also makes a scope-only change raise the profile's optimistic-lock version.
  if (fields.length > 0) stored.updatedAt = now;
  builder.compared('profile', input.profileId, fields);
  return fields.some((field) => field !== 'profileName');
}

/** Makes the stored scopes equal the wanted set; true when anything changed. */
function replaceScopes(em: EntityManager, profile: ProfileEntity, wanted: ScopeRecord[]): boolean {
  const wantedByKey = new Map(wanted.map((scope) => [scopeKey(scope), scope]));
  let changed = false;
  const storedKeys = new Set<string>();
  for (const scope of profile.scopes.getItems()) {
    const key = scopeKey(scope);
    storedKeys.add(key);
    const target = wantedByKey.get(key);
    if (target === undefined) {
      profile.scopes.remove(scope);
      changed = true;
    } else if (scope.accessMode !== target.accessMode) {
      scope.accessMode = target.accessMode;
      changed = true;
    }
  }
  for (const [key, scope] of wantedByKey) {
    if (storedKeys.has(key)) continue;
    profile.scopes.add(createScope(em, profile, scope));
    changed = true;
  }
  return changed;
}

function createScope(em: EntityManager, profile: ProfileEntity, scope: ScopeRecord): ResourceScopeEntity {
  return em.create(ResourceScopeEntity, {
    profile,
    scopeType: scope.scopeType,
    scopeRefId: scope.scopeRefId,
    accessMode: scope.accessMode,
  });
}
