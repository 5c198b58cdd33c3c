/**
 * Escalation prevention for admin writes (docs/threat-model.md #11.4), after Kubernetes RBAC's rule: an actor may grant
 * only what the active profile they act under holds, to anyone, themselves included. "Grant" is any write
 * whose result lets a user do something: a profile that ends up active (its template's codes, its scopes,
 * being unscoped), codes added to a template profiles use, a user re-enabled, an identity created or
 * enabled (it logs in as the user, with all of the user's active profiles). Writes that only take away
 * (disable, revoke, remove codes) are never refused by this rule.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ANY, parsePermissionCode } from '../../domain/permission-code';
import { AdminWriteError } from '../../domain/admin-repository';
import { ProfileEntity } from './entities/profile-entity';
import type { ScopeRecord } from '../../domain/records';
import { type HeldGrant } from '../../domain/admin-repository';

/** What a profile grants once written. */
export interface GrantedProfile {
  profileId: string;
  /** Enabled and not revoked: an inactive profile grants nothing. */
  active: boolean;
  permissions: string[];
  unscoped: boolean;
  scopes: ScopeRecord[];
  /** The client types whose logins the profile applies to. */
  clientTypes: readonly string[];
}

type Problem = { pointer: string; message: string };

/**
 * Whether holding `held` covers granting `code`: `*:*` covers everything, `res:*` covers every `res:<action>`
 * and itself; granting `res:*` needs `res:*` or `*:*`, granting `*:*` needs `*:*`.
 */
export function holdsPermission(held: readonly string[], code: string): boolean {
  if (held.includes('*:*') || held.includes(code)) return true;
  const parsed = parsePermissionCode(code);
  if (parsed === null || parsed.resource === ANY || parsed.action === ANY) return false;
  return held.includes(`${parsed.resource}:${ANY}`);
}

/** Whether the actor's scopes cover `scope`: same type, the same id or `*`, and WRITE covering READ. */
export function holdsScope(held: HeldGrant, scope: ScopeRecord): boolean {
  if (held.unscoped) return true;
  return held.scopes.some(
    (mine) =>
      mine.scopeType === scope.scopeType &&
      (mine.scopeRefId === ANY || mine.scopeRefId === scope.scopeRefId) &&
      (mine.accessMode === 'WRITE' || scope.accessMode === 'READ'),
  );
}

/** Codes of `codes` the actor does not hold. */
export function missingPermissions(held: HeldGrant, codes: readonly string[]): string[] {
  return codes.filter((code) => !holdsPermission(held.permissions, code));
}

/** Whether the actor's profile applies to logins of `clientType` (null: every client type). */
export function holdsClientType(held: HeldGrant, clientType: string): boolean {
  return held.clientTypes === null || held.clientTypes.includes(clientType);
}

/**
 * Why granting `profile` would escalate, as JSON pointers into the profile (`/templateVersionId` for
 * codes, `/scopes/{i}`, `/unscoped`, `/clientTypes/{i}`); empty when the actor holds all of it or the profile is
 * inactive. Every part of the grant is covered: what (codes), where (scopes) and from which clients (client types:
 * an admin whose profile applies only to WEB cannot hand out an API profile).
 */
export function profileEscalations(held: HeldGrant, profile: GrantedProfile, where = ''): Problem[] {
  if (!profile.active) return [];
  const found: Problem[] = missingPermissions(held, profile.permissions).map((code) => ({
    pointer: `${where}/templateVersionId`,
    message: `profile ${profile.profileId} would grant "${code}", which your active profile does not hold`,
  }));
  profile.clientTypes.forEach((clientType, index) => {
    if (holdsClientType(held, clientType)) return;
    found.push({ pointer: `${where}/clientTypes/${index}`, message: `profile ${profile.profileId} would apply to ${clientType} logins; your active profile applies only to ${held.clientTypes!.join(', ') || 'none'}` });
  });
  if (profile.unscoped && !held.unscoped) {
    found.push({ pointer: `${where}/unscoped`, message: `profile ${profile.profileId} would apply to every resource; your active profile is scoped` });
  } else if (!profile.unscoped) {
    profile.scopes.forEach((scope, index) => {
      if (holdsScope(held, scope)) return;
      found.push({
        pointer: `${where}/scopes/${index}`,
        message: `profile ${profile.profileId} would grant scope ${scope.scopeType} ${scope.scopeRefId} (${scope.accessMode}), which your active profile does not cover`,
      });
    });
  }
  return found;
}

/** Throws the 403 of the rule (inside the write's transaction, so nothing is written) when `found` is not empty. */
export function refuseEscalation(found: Problem[]): void {
  if (found.length === 0) return;
  throw new AdminWriteError(
    'forbidden',
    'Escalation prevention: you can grant only permission codes and scopes your active profile holds (to anyone, yourself included).',
    found,
  );
}

/** A loaded profile entity (scopes and, unless given, template permissions populated) as what it grants. */
export function grantedBy(profile: ProfileEntity, overrides: Partial<GrantedProfile> = {}): GrantedProfile {
  const scopes = overrides.scopes ?? profile.scopes.getItems().map((s) => ({ scopeType: s.scopeType, scopeRefId: s.scopeRefId, accessMode: s.accessMode }));
  return {
    profileId: profile.profileId,
    active: overrides.active ?? (profile.enabled && !profile.revoked),
    permissions: overrides.permissions ?? profile.template.permissions.getItems().map((permission) => permission.permissionCode),
    unscoped: overrides.unscoped ?? profile.unscoped,
    scopes,
    clientTypes: overrides.clientTypes ?? profile.clientTypes,
  };
}

/**
 * Takes a share lock on the template row, so a concurrent template write (which locks it for update and
 * checks the profiles using it) cannot add codes between this check and the commit.
 */
export async function shareLockTemplate(em: EntityManager, versionId: string): Promise<void> {
  await em.execute('select 1 from "iam_permission_templates" where "version_id" = ? for share', [versionId]);
}

/**
 * Everything a user's active profiles grant (re-enabling the user, or an identity logging in as them). No
 * template locks here: a concurrent template write checks every profile on the template itself, and taking
 * them after the user's row lock could deadlock with it.
 */
export async function activeProfilesOf(em: EntityManager, userId: string): Promise<GrantedProfile[]> {
  const profiles = await em.find(ProfileEntity, { user: userId, enabled: true, revoked: false }, { populate: ['scopes', 'template.permissions'], orderBy: { profileId: 'asc' } });
  return profiles.map((profile) => grantedBy(profile));
}

/** Refuses when the actor does not hold all of what the user's active profiles grant. */
export async function refuseUserEscalation(em: EntityManager, held: HeldGrant, userId: string, pointer: string): Promise<void> {
  if (held.unscoped && held.permissions.includes('*:*') && held.clientTypes === null) return;
  const found = (await activeProfilesOf(em, userId)).flatMap((profile) =>
    profileEscalations(held, profile).map((problem) => ({ pointer, message: `user ${userId}: ${problem.message}` })),
  );
  refuseEscalation(found);
}

/**
 * Codes added to a template reach every profile using it, with that profile's scopes: the actor must hold
 * the added codes, and (when scoped) cover the scopes of every profile on the template. `wanted` is the
 * body's list (for the pointers).
 */
export async function refuseTemplateEscalation(em: EntityManager, held: HeldGrant, versionId: string, wanted: string[], before: string[]): Promise<void> {
  const stored = new Set(before);
  const added = wanted.filter((code) => !stored.has(code));
  if (added.length === 0) return;
  const profiles = await em.find(ProfileEntity, { template: versionId }, { populate: ['scopes'], orderBy: { profileId: 'asc' } });
  if (profiles.length === 0) return;
  const found: Problem[] = missingPermissions(held, added).map((code) => ({
    pointer: `/permissions/${wanted.indexOf(code)}`,
    message: `"${code}" would reach the ${profiles.length} profile(s) on this template; your active profile does not hold it`,
  }));
  // The added codes apply with each profile's scopes: a scoped actor must cover them all.
  for (const profile of profiles) {
    for (const problem of profileEscalations(held, grantedBy(profile, { permissions: [], active: true }))) {
      found.push({ pointer: '/permissions', message: `the added codes would reach ${problem.message.replace(/ would /, ', which would ')}` });
    }
  }
  refuseEscalation(found);
}
