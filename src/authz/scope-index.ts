/**
 * The scope step's answer for one grant (docs/policy-format.md, "How a route is decided"): does a scope of the
 * profile cover one of a resource's scope refs for the access asked? Built once when the grant is compiled, in
 * time linear in its scopes; a question costs one set lookup per (scope group, ref), whatever the number of ids
 * a group lists. The permission question stays with CASL (grant-ability.ts), which no longer carries scope
 * conditions: the two questions are independent (a permission is granted on a resource type; a scope covers
 * resource instances whatever the permission), so each is answered by the structure that fits it.
 */
import type { ScopeRecord } from '../domain/records';
import { ANY } from '../domain/permission-code';

/** A resource's scope ref as the decision checks it (the resolver's answer, or the resource itself). */
export interface ScopeRefLike {
  readonly type: string;
  readonly id: string;
}

/** One (scope type, access mode) group of a profile's scopes, with every id it lists. */
export interface ScopeGroup {
  readonly type: string;
  readonly mode: ScopeRecord['accessMode'];
  /** The ids the group covers; null when it covers every id of its type (`scopeRefId: *`). */
  readonly ids: ReadonlySet<string> | null;
  /** How a decision names it: `scope PROJECT 1, 2 (READ)`. */
  readonly description: string;
}

/** Scopes grouped by (type, accessMode), in the order each group first appears. */
export function groupScopes(scopes: readonly ScopeRecord[]): ScopeGroup[] {
  const groups = new Map<string, { type: string; mode: ScopeRecord['accessMode']; ids: string[]; wildcard: boolean }>();
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
  return [...groups.values()].map((group) => ({
    type: group.type,
    mode: group.mode,
    ids: group.wildcard ? null : new Set(group.ids),
    description: `scope ${group.type} ${group.wildcard ? ANY : group.ids.join(', ')} (${group.mode})`,
  }));
}

/** What {@link ScopeIndex.covering} answers for an unscoped profile (every resource). */
export const UNSCOPED_DESCRIPTION = 'unscoped profile';

export class ScopeIndex {
  /**
   * `groups`: the profile's scope groups ({@link groupScopes}); `unscoped`: the profile covers every resource
   * (only for an explicitly unscoped profile, which has no scopes). A scoped profile without scopes covers none.
   */
  private constructor(
    readonly groups: readonly ScopeGroup[],
    readonly unscoped: boolean,
  ) {}

  static unscoped(): ScopeIndex {
    return new ScopeIndex([], true);
  }

  static of(scopes: readonly ScopeRecord[]): ScopeIndex {
    return new ScopeIndex(groupScopes(scopes), false);
  }

  /**
   * The description of the scope group that covers one of `refs` for `access` (a `WRITE` group covers `READ`
   * too), or null when none does. When several do, the one listed last names the decision (as the CASL rules
   * defined last did before this index). `refs` with no entry never match a scoped profile.
   */
  covering(refs: readonly ScopeRefLike[], access: 'READ' | 'WRITE'): string | null {
    if (this.unscoped) return UNSCOPED_DESCRIPTION;
    const groups = this.groups;
    for (let g = groups.length - 1; g >= 0; g--) {
      const group = groups[g]!;
      if (access === 'WRITE' && group.mode !== 'WRITE') continue;
      for (let r = 0; r < refs.length; r++) {
        const ref = refs[r]!;
        if (ref.type === group.type && (group.ids === null || group.ids.has(ref.id))) return group.description;
      }
    }
    return null;
  }
}
