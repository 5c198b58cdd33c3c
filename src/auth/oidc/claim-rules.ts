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
 * A rule's name: lower-case letters, digits and `-`. It never holds the `:` or `~` that end it in a profile id
 * ({@link ruleProfileId}), which is what keeps those ids apart.
 */
export const RULE_NAME_PATTERN = '^[a-z0-9][a-z0-9-]{0,39}$';
const RULE_NAME = new RegExp(RULE_NAME_PATTERN);

/**
 * The id of the profile a rule projects for a user: `oidc:<rule>:<userId>`, readable in the console; when that would
 * be too long, `oidc:<rule>~<digest of the userId>`. The rule name cannot hold `:` or `~`, so the first of them ends
 * it and says which form follows: two (rule, user) pairs never share an id, whatever characters the userId holds
 * (with `-` between them, rule `staff` + user `admin-bob` and rule `staff-admin` + user `bob` did).
 */
export function ruleProfileId(ruleName: string, userId: string): string {
  if (!RULE_NAME.test(ruleName)) throw new Error(`iam.oidc.profiles: "${ruleName}" is not a rule name`);
  const readable = `oidc:${ruleName}:${userId}`;
  if (readable.length <= 200 && IDENTIFIER.test(readable)) return readable;
  return `oidc:${ruleName}~${createHash('sha256').update(userId).digest('base64url')}`;
}

/**
 * The id earlier releases gave the same profile (`oidc-<rule>-<userId>`, ambiguous): a user who already holds a
 * profile under it keeps it at sign-in under that id, so the upgrade neither drops a profile nor grants a second one.
 */
export function formerRuleProfileId(ruleName: string, userId: string): string {
  const readable = `oidc-${ruleName}-${userId}`;
  if (readable.length <= 200 && IDENTIFIER.test(readable)) return readable;
  return `oidc-${ruleName}-${createHash('sha256').update(userId).digest('base64url').slice(0, 32)}`;
}

/** Why a rule whose `when` holds gives no profile: a claim one of its scopes takes its ids from is unusable. */
export type SkipReason = 'missing' | 'wrong-type' | 'no-usable-value';

/** A skip reason in words: the log line and `iam-gateway oidc test-claims` say it the same way. */
export const SKIP_WORDS: Readonly<Record<SkipReason, string>> = {
  missing: 'is missing from the ID token',
  'wrong-type': 'is not a string, a number or a list of them',
  'no-usable-value': 'holds no value usable as a scope id (visible ASCII, 1 to 200 characters)',
};

/** What one rule makes of the claims of one sign-in. */
export type RuleOutcome =
  | { rule: ProfileRule; status: 'applies'; scopes: ScopeRecord[] }
  | { rule: ProfileRule; status: 'unmet'; condition: ClaimCondition }
  | { rule: ProfileRule; status: 'skipped'; claim: string; reason: SkipReason };

/**
 * Each rule against the claims, in order. A rule whose claim-valued scope finds no usable value (missing, not a
 * string or a list of them, or no value that is a header-safe id) is `skipped`, naming the claim: it does not match
 * (a scoped profile without scopes would grant nothing), and the operator is told why (docs/oidc.md).
 */
export function evaluateRules(claims: Claims, rules: readonly ProfileRule[]): RuleOutcome[] {
  return rules.map((rule): RuleOutcome => {
    const unmet = unmetCondition(claims, rule.when);
    if (unmet !== null) return { rule, status: 'unmet', condition: unmet };
    const scopes: ScopeRecord[] = [];
    for (const scope of rule.scopes) {
      let ids: string[];
      if (scope.claim === undefined) ids = [scope.id];
      else {
        const values = valuesOf(claims, scope.claim);
        const present = Object.hasOwn(claims, scope.claim);
        if (!present) return { rule, status: 'skipped', claim: scope.claim, reason: 'missing' };
        const raw = claims[scope.claim];
        if (values === null || (Array.isArray(raw) && raw.length > 0 && values.length === 0)) return { rule, status: 'skipped', claim: scope.claim, reason: 'wrong-type' };
        ids = values.filter((value) => value !== '' && HEADER_SAFE.test(value));
        if (ids.length === 0) return { rule, status: 'skipped', claim: scope.claim, reason: 'no-usable-value' };
      }
      for (const id of ids) {
        if (!scopes.some((known) => known.scopeType === scope.type && known.scopeRefId === id && known.accessMode === scope.access)) scopes.push({ scopeType: scope.type, scopeRefId: id, accessMode: scope.access });
      }
    }
    return { rule, status: 'applies', scopes: scopes.slice(0, MAX_PROFILE_SCOPES) };
  });
}

/** The profile a rule that applies gives, under `profileId`. */
export function profileOf(outcome: Extract<RuleOutcome, { status: 'applies' }>, profileId: string): ProjectedProfiles[number] {
  const { rule, scopes } = outcome;
  return {
    profileId,
    profileName: rule.profileName,
    templateVersionId: rule.templateVersionId,
    clientTypes: [...rule.clientTypes],
    revoked: false,
    ...(rule.scopes.length > 0 ? { unscoped: false, scopes } : rule.unscoped !== null ? { unscoped: rule.unscoped } : {}),
  };
}

/**
 * The profiles the rules' outcomes give a user, and the ids of the rules' profiles the user no longer qualifies for
 * (to revoke where they exist). `held`: the ids of the profiles the user has now; a profile held under its
 * {@link formerRuleProfileId} keeps that id, and a former-id profile beside a current one is revoked.
 */
export function projectProfiles(outcomes: readonly RuleOutcome[], userId: string, held: ReadonlySet<string> = new Set()): { profiles: ProjectedProfiles; retract: string[] } {
  const profiles: ProjectedProfiles = [];
  const retract: string[] = [];
  for (const outcome of outcomes) {
    const current = ruleProfileId(outcome.rule.name, userId);
    const former = formerRuleProfileId(outcome.rule.name, userId);
    const profileId = held.has(former) && !held.has(current) ? former : current;
    if (outcome.status !== 'applies') {
      retract.push(current, former);
      continue;
    }
    profiles.push(profileOf(outcome, profileId));
    if (profileId !== former) retract.push(former);
  }
  return { profiles, retract };
}
