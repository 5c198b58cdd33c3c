/**
 * Compiles a profile + its template + its scopes into what a decision asks (docs/policy-format.md, "How a route
 * is decided"), once per grant: the permission codes into CASL rules `(action, resource type)` (grant-ability.ts),
 * the scopes into a {@link ScopeIndex} the scope step looks resources up in.
 */
import type { ProfileRecord, ScopeRecord, TemplateRecord } from '../domain/records';
import { GrantAbility } from './grant-ability';
import { parsePermissionCode } from '../domain/permission-code';
import { ScopeIndex } from './scope-index';

/*
 * CASL's wildcards are `manage` / `all` by default, but both are valid names in our codes: a template granting
 * `project:manage` or `all:read` must not turn into "every action" / "every resource". `*` cannot appear in
 * a name, so it is the only safe wildcard (grant-ability.ts passes it to CASL).
 */

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
  /** False only for an explicitly unscoped profile: otherwise only what its scopes list is covered. */
  scoped: boolean;
  /** The permission question; built one resource type at a time, on its first question (grant-ability.ts). */
  ability: GrantAbility;
  /** The scope question (scope-index.ts). */
  scopeIndex: ScopeIndex;
}

/**
 * Approximate heap bytes of a compiled grant, for the memory bound of the grant cache: the codes and scopes (each
 * scope kept as its record and as a set entry of the scope index) and the CASL rules the grant may build (at most
 * three per resource type, ~250 bytes each with CASL's index entries), not the ones built so far, so a cached
 * grant never outgrows its weight.
 */
export function approximateGrantBytes(grant: CompiledGrant): number {
  return 1024 + grant.permissions.length * 96 + grant.scopes.length * 224 + 3 * (grant.ability.resourceTypes + 1) * 256;
}

/**
 * Compiles a grant in time linear in its codes and scopes. An unscoped profile (`unscoped: true`) covers every
 * resource; a scoped one covers what its scopes list, and one without scopes keeps its permissions for routes that
 * name no resource but covers none. The CASL rules themselves are built per resource type on first use.
 */
export function compileGrant(input: {
  userId: string;
  authorizationVersion: number;
  profile: ProfileRecord;
  /** Only its codes count (a policy test's synthetic template has no stored version). */
  template: Omit<TemplateRecord, 'version'>;
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

  return {
    userId: input.userId,
    profileId: profile.profileId,
    templateVersionId: template.versionId,
    authorizationVersion: input.authorizationVersion,
    clientTypes: [...profile.clientTypes],
    permissions,
    scopes,
    scoped,
    ability: new GrantAbility(actions),
    scopeIndex: scoped ? ScopeIndex.of(scopes) : ScopeIndex.unscoped(),
  };
}
