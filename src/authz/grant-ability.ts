/**
 * The CASL side of a compiled grant: which (action, resource type) its permission codes grant. Built one
 * resource type at a time, on the first question about that type (#11.32), from that type's codes and the
 * wildcard-resource code only: at most three rules per type (the type's exact actions, its `*`, and `*:*`),
 * whatever the number of codes. Scopes are not CASL conditions: scope-index.ts answers the scope step.
 */
import type * as Casl from '@casl/ability/dist/types';
import { ANY } from '../domain/permission-code';

type MongoAbility = Casl.MongoAbility;
type RawRuleOf<T extends Casl.AnyAbility> = Casl.RawRuleOf<T>;

/** Values through `require` (the tsconfig's module resolution ignores the package's `exports`; see ability-compiler.ts). */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- values through require, see above
const casl = require('@casl/ability') as typeof Casl;

/** CASL's own wildcards renamed to `*`, the only name a permission code cannot use. */
const CASL_OPTIONS = { anyAction: ANY, anySubjectType: ANY } as const;

/**
 * What a decision reads from the CASL rule that answered it (CASL's own rule type would put @casl/ability's
 * internal types file into the package's declarations: see ability-compiler.ts).
 */
export interface GrantRule {
  readonly action: string | readonly string[];
  readonly subject: unknown;
  readonly inverted: boolean;
}

export class GrantAbility {
  private readonly bySubject = new Map<string, MongoAbility>();
  private built = 0;

  /** `actions`: resource type → the actions its codes grant (`*` included as given; `*` as a resource type holds the codes for every resource). */
  constructor(private readonly actions: ReadonlyMap<string, readonly string[]>) {}

  /** CASL rules built so far (at most three per resource type asked about). */
  get builtRules(): number {
    return this.built;
  }

  /** The number of resource types (the wildcard included) whose codes this grant holds. */
  get resourceTypes(): number {
    return this.actions.size;
  }

  /** Whether the codes grant `action` on resource type `type`. */
  can(action: string, type: string): boolean {
    return this.abilityFor(type).can(action, type);
  }

  /** CASL's `relevantRuleFor` on a resource type (its array `action` lists exact actions). */
  relevantRuleFor(action: string, type: string): GrantRule | null {
    return this.abilityFor(type).relevantRuleFor(action, type);
  }

  private abilityFor(type: string): MongoAbility {
    const cached = this.bySubject.get(type);
    if (cached) return cached;
    const ability = casl.createMongoAbility(this.rulesFor(type), CASL_OPTIONS) as MongoAbility;
    this.built += ability.rules.length;
    this.bySubject.set(type, ability);
    return ability;
  }

  private rulesFor(type: string): RawRuleOf<MongoAbility>[] {
    const rules: RawRuleOf<MongoAbility>[] = [];
    // `*:…` codes first, so a code naming the resource type itself is the one a decision reports.
    for (const subject of type === ANY ? [ANY] : [ANY, type]) {
      const actions = this.actions.get(subject);
      if (!actions) continue;
      const exact = actions.filter((action) => action !== ANY);
      // CASL prefers the rule defined last: an exact action names the code that grants it, over `resource:*`.
      if (exact.length < actions.length) rules.push({ action: ANY, subject });
      if (exact.length > 0) rules.push({ action: exact, subject });
    }
    return rules;
  }
}

/**
 * The permission code a rule found by {@link GrantAbility.relevantRuleFor} stands for, for `action`: its
 * exact action when the rule lists it, else the rule's wildcard.
 */
export function codeOfRule(rule: Pick<GrantRule, 'action' | 'subject'>, action: string): string {
  const actions = Array.isArray(rule.action) ? rule.action : [rule.action];
  return `${String(rule.subject)}:${actions.includes(action) ? action : String(actions[0])}`;
}
