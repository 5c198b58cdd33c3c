import type { EntityManager } from '@mikro-orm/postgresql';
import { ProfileEntity, ResourceScopeEntity } from './entities/profile-entity';
import type { UserEntity } from './entities/user-entity';
import type { StoredProvisioningState } from './provisioning-validation';
import type { SummaryBuilder } from './provisioning-summary';
import type { ProvisioningDocument, ScopeRecord } from '../../domain/records';

type ProfileInput = NonNullable<NonNullable<ProvisioningDocument['users']>[number]['profiles']>[number];

/** Distinct values in first-seen order. */
export const unique = <T>(values: Iterable<T>): T[] => [...new Set(values)];
/** Equal as sets (order and repetition ignored). */
export const sameSet = (a: Iterable<string>, b: Iterable<string>): boolean => {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((value) => right.has(value));
};
const scopeKey = (scope: { scopeType: string; scopeRefId: string }): string => `${scope.scopeType}\u0000${scope.scopeRefId}`;

/** Creates or updates one profile; true when the user's authorization changed. */
export function applyProfile(
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
      // A new profile without scopes keeps the long-standing meaning, every resource, unless it says otherwise.
      unscoped: input.unscoped ?? (input.scopes ?? []).length === 0,
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
  if (applyUnscoped(stored, input)) fields.push('unscoped');
  // Touching updatedAt also makes a scope-only change raise the profile's optimistic-lock version.
  if (fields.length > 0) stored.updatedAt = now;
  builder.compared('profile', input.profileId, fields);
  return fields.some((field) => field !== 'profileName');
}

/**
 * Unscoped is explicit (#11.31): `unscoped: true` makes the profile apply to every resource (its scopes go);
 * given scopes make it scoped; a scoped profile whose last scope is removed stays scoped and grants no
 * resource. True when the flag changed.
 */
function applyUnscoped(profile: ProfileEntity, input: ProfileInput): boolean {
  const unscoped = input.unscoped ?? ((input.scopes ?? []).length > 0 ? false : profile.unscoped);
  if (unscoped && profile.scopes.length > 0) profile.scopes.removeAll();
  if (profile.unscoped === unscoped) return false;
  profile.unscoped = unscoped;
  return true;
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
