/**
 * Compiles a profile + its template + its scopes into a CASL ability, once per grant (docs/policy-format.md,
 * "How a route is decided"). Permission codes become rules `(action, subject)`; scopes become rule conditions over the
 * resource instance `{ scopeRefs: [{type, id}], access }` the decision engine checks.
 */
import type * as Casl from '@casl/ability/dist/types';
import type { ProfileRecord, ScopeRecord, TemplateRecord } from '../domain/records';
import { GrantAbility, type GrantAlternative } from './grant-ability';
import { ANY, parsePermissionCode } from '../domain/permission-code';

/**
 * The tsconfig's `moduleResolution: node` ignores package.json `exports`, which is the only place
 * @casl/ability 7 declares its types: types come from their file, values through `require` (same module).
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- values through require, see above
const casl = require('@casl/ability') as typeof Casl;

/**
 * CASL's `subject()` helper: tags a plain object with its subject type for conditions checks. Typed here, not
 * inferred: an inferred type would name @casl/ability's internal types file in the package's declarations,
 * which TypeScript programs resolving through package.json `exports` (node16, bundler) cannot import.
 */
export const caslSubject: (type: string, object: ScopeSubject) => ScopeSubject = casl.subject;

/*
 * CASL's wildcards are `manage` / `all` by default, but both are valid names in our codes: a template granting
 * `project:manage` or `all:read` must not turn into "every action" / "every resource". `*` cannot appear in
 * a name, so it is the only safe wildcard (grant-ability.ts passes it to CASL).
 */

/** The instance the scope step checks: the resolved scope refs of a resource and the access asked for. */
export interface ScopeSubject {
  scopeRefs: Array<{ type: string; id: string }>;
  access: 'READ' | 'WRITE';
}

/** Everything a decision needs about one user's active profile; immutable once compiled. */
export interface CompiledGrant {
  userId: string;
  profileId: string;
  templateVersionId: string;
  authorizationVersion: number;
  clientTypes: string[];
  /** The template's valid permission codes (malformed ones are left out and never grant anything). */
  permissions: string[];
  scopes: ScopeRecord[];
  /** False only for an explicitly unscoped profile: otherwise every rule carries scope conditions. */
  scoped: boolean;
  /** Built one resource type at a time, on its first question (grant-ability.ts). */
  ability: GrantAbility;
}

/**
 * Approximate heap bytes of a compiled grant, for the memory bound of the grant cache: CASL keeps each rule
 * with its conditions and index entries (~250 bytes measured), plus the codes and scopes kept alongside. The
 * rules counted are the most the grant can build (two per scope group and resource type), not the ones built
 * so far, so a cached grant never outgrows its weight.
 */
export function approximateGrantBytes(grant: CompiledGrant): number {
  const groups = Math.max(1, groupScopes(grant.scopes).length);
  return 1024 + grant.permissions.length * 96 + grant.scopes.length * 160 + 2 * groups * (grant.ability.resourceTypes + 1) * 256;
}

/** Accesses a scope's `accessMode` covers: `WRITE` covers `READ` (docs/policy-format.md). */
function coveredAccesses(mode: ScopeRecord['accessMode']): string[] {
  return mode === 'WRITE' ? ['READ', 'WRITE'] : ['READ'];
}

interface ScopeGroup {
  type: string;
  mode: ScopeRecord['accessMode'];
  ids: string[];
  wildcard: boolean;
}

/** Scopes grouped by (type, accessMode): one condition alternative per group, ids merged into `$in`. */
function groupScopes(scopes: ScopeRecord[]): ScopeGroup[] {
  const groups = new Map<string, ScopeGroup>();
  for (const scope of scopes) {
    const key = `${scope.scopeType}\u0000${scope.accessMode}`;
    let group = groups.get(key);
    if (!group) {
      group = { type: scope.scopeType, mode: scope.accessMode, ids: [], wildcard: false };
      groups.set(key, group);
    }
    if (scope.scopeRefId === ANY) group.wildcard = true;
    else if (!group.ids.includes(scope.scopeRefId)) group.ids.push(scope.scopeRefId);
  }
  return [...groups.values()];
}

/**
 * Mongo-style conditions for one scope group. CASL's default matcher has no top-level `$or`, so the
 * alternatives are separate rules (CASL ORs rules with the same action and subject).
 */
function scopeConditions(group: ScopeGroup): { conditions: Record<string, unknown>; description: string } {
  const elem: Record<string, unknown> = { type: group.type };
  if (!group.wildcard) elem.id = { $in: group.ids };
  const ids = group.wildcard ? '*' : group.ids.join(', ');
  return {
    conditions: { scopeRefs: { $elemMatch: elem }, access: { $in: coveredAccesses(group.mode) } },
    description: `scope ${group.type} ${ids} (${group.mode})`,
  };
}

/** The one alternative of a scoped profile that has no scopes: a condition no resource meets. */
const NO_RESOURCE: GrantAlternative = { conditions: { access: { $in: [] as string[] } }, description: 'scoped profile without scopes (no resource)' };

/**
 * Compiles a grant in time linear in its codes and scopes. Unscoped profiles (`unscoped: true`) get plain
 * rules (their permissions apply to every resource); scoped profiles get one rule per (actions of a resource
 * type, scope group), each with conditions, and the rule's `reason` names the scope so a decision can say
 * which scope let it through. The CASL rules themselves are built per resource type on first use.
 */
export function compileGrant(input: {
  userId: string;
  authorizationVersion: number;
  profile: ProfileRecord;
  template: TemplateRecord;
}): CompiledGrant {
  const { profile, template } = input;
  const seen = new Set<string>();
  const actions = new Map<string, string[]>();
  for (const code of template.permissions) {
    const parsed = parsePermissionCode(code);
    if (!parsed || seen.has(code)) continue;
    seen.add(code);
    const list = actions.get(parsed.resource);
    if (list) list.push(parsed.action);
    else actions.set(parsed.resource, [parsed.action]);
  }
  const permissions = [...seen];

  const scopes = profile.scopes.map((scope) => ({ ...scope }));
  // Unscoped only when the profile says so explicitly (#11.31); a scope next to the flag wins (fail closed).
  const scoped = !profile.unscoped || scopes.length > 0;
  // A scoped profile without scopes keeps its permissions for routes naming no resource, but no scope covers any resource.
  const alternatives: GrantAlternative[] = !scoped
    ? [{ conditions: null, description: 'unscoped profile' }]
    : scopes.length > 0
      ? groupScopes(scopes).map(scopeConditions)
      : [NO_RESOURCE];

  return {
    userId: input.userId,
    profileId: profile.profileId,
    templateVersionId: template.versionId,
    authorizationVersion: input.authorizationVersion,
    clientTypes: [...profile.clientTypes],
    permissions,
    scopes,
    scoped,
    ability: new GrantAbility(actions, alternatives),
  };
}
