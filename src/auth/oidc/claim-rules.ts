import { createHash } from 'node:crypto';
import { MAX_PROFILE_SCOPES } from '../../domain/grant-limits';
import type { ScopeRecord } from '../../domain/records';
import type { ProjectedProfiles } from '../authenticator';
import { HEADER_SAFE_PATTERN, IDENTIFIER_PATTERN } from '../identity-validation';

/**
 * `iam.oidc.allowed` and `iam.oidc.profiles` (docs/oidc.md): the provider's claims decide who may sign in, and
 * which profiles the gateway projects for them at every login — the provider is the host's directory, as its
 * groups are for oauth2-proxy (`allowed_groups`) and Pomerium (`groups`, `claim/*`).
 */

/** A claim that must hold one of `values` (a string or number claim equal to one, a list claim containing one); no values: present. */
export interface ClaimCondition {
  claim: string;
  values: readonly string[];
}

/** One scope of a projected profile: a fixed id, or one scope per value of a claim. */
export type ScopeRule = { type: string; access: 'READ' | 'WRITE' } & ({ id: string; claim?: undefined } | { claim: string; id?: undefined });

/** One rule of `iam.oidc.profiles`: when every condition holds, the user has this profile; when not, it is revoked. */
export interface ProfileRule {
  /** The rule's name: part of the projected profile's id, so it must not change once users hold the profile. */
  name: string;
  when: readonly ClaimCondition[];
  profileName: string;
  templateVersionId: string;
  clientTypes: readonly string[];
  scopes: readonly ScopeRule[];
  /** Every resource (no scopes); null: the provisioning default (true for a new profile without scopes). */
  unscoped: boolean | null;
}

/**
 * The verified claims of an ID token (jose's `JWTPayload` fits; not imported from jose, which is an ES module: these
 * types reach the package's public declarations through the configuration).
 */
export type Claims = Readonly<Record<string, unknown>>;

const IDENTIFIER = new RegExp(IDENTIFIER_PATTERN);
const HEADER_SAFE = new RegExp(HEADER_SAFE_PATTERN);

/** The claim's values as strings (a string, a number or a boolean; a list of them); anything else has none. */
function valuesOf(claims: Claims, claim: string): string[] | null {
  if (!Object.hasOwn(claims, claim)) return null;
  const value = claims[claim];
  const scalar = (item: unknown): string | null => (typeof item === 'string' ? item : typeof item === 'number' || typeof item === 'boolean' ? String(item) : null);
  if (Array.isArray(value)) return value.map(scalar).filter((item): item is string => item !== null);
  const one = scalar(value);
  return one === null ? null : [one];
}

export function conditionHolds(claims: Claims, condition: ClaimCondition): boolean {
  const values = valuesOf(claims, condition.claim);
  if (values === null) return false;
  if (condition.values.length === 0) return values.length > 0 && values.some((value) => value !== '' && value !== 'false');
  return values.some((value) => condition.values.includes(value));
}

/** The first condition of `iam.oidc.allowed` the claims do not meet; null when the login may go on. */
export function unmetCondition(claims: Claims, conditions: readonly ClaimCondition[]): ClaimCondition | null {
  return conditions.find((condition) => !conditionHolds(claims, condition)) ?? null;
}

/**
 * The id of the profile a rule projects for a user: `oidc-<rule>-<userId>`, readable in the console; a userId
 * that would make it too long is replaced by a digest of it (the id stays the same at every login).
 */
export function ruleProfileId(ruleName: string, userId: string): string {
  const readable = `oidc-${ruleName}-${userId}`;
  if (readable.length <= 200 && IDENTIFIER.test(readable)) return readable;
  return `oidc-${ruleName}-${createHash('sha256').update(userId).digest('base64url').slice(0, 32)}`;
}

/**
 * The profiles the rules give a user with these claims, and the ids of the rules' profiles the user no longer
 * qualifies for (to revoke where they exist). A rule whose claim-valued scope finds no usable value (missing, or
 * not a header-safe id) does not match: a scoped profile without scopes would grant nothing anyway.
 */
export function projectProfiles(claims: Claims, userId: string, rules: readonly ProfileRule[]): { profiles: ProjectedProfiles; retract: string[] } {
  const profiles: ProjectedProfiles = [];
  const retract: string[] = [];
  for (const rule of rules) {
    const profileId = ruleProfileId(rule.name, userId);
    const scopes = rule.when.every((condition) => conditionHolds(claims, condition)) ? scopesOf(claims, rule) : null;
    if (scopes === null) {
      retract.push(profileId);
      continue;
    }
    profiles.push({
      profileId,
      profileName: rule.profileName,
      templateVersionId: rule.templateVersionId,
      clientTypes: [...rule.clientTypes],
      revoked: false,
      ...(rule.scopes.length > 0 ? { unscoped: false, scopes } : rule.unscoped !== null ? { unscoped: rule.unscoped } : {}),
    });
  }
  return { profiles, retract };
}

function scopesOf(claims: Claims, rule: ProfileRule): ScopeRecord[] | null {
  const scopes: ScopeRecord[] = [];
  for (const scope of rule.scopes) {
    const ids = scope.claim === undefined ? [scope.id] : (valuesOf(claims, scope.claim) ?? []).filter((value) => value !== '' && HEADER_SAFE.test(value));
    if (ids.length === 0) return null;
    for (const id of ids) {
      if (!scopes.some((known) => known.scopeType === scope.type && known.scopeRefId === id && known.accessMode === scope.access)) scopes.push({ scopeType: scope.type, scopeRefId: id, accessMode: scope.access });
    }
  }
  return scopes.slice(0, MAX_PROFILE_SCOPES);
}
