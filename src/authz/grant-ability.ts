/**
 * The CASL side of a compiled grant, built one resource type at a time (#11.32). A grant holds codes ×
 * scope groups worth of rules; building them all at once blocked the proxy's event loop for tens of
 * milliseconds on a large grant. A decision only ever asks about one resource type, so each type's CASL
 * ability is built on its first question, from that type's codes and the wildcard-resource codes only, with one
 * rule per (exact actions, scope group) and one per (`*` action, scope group): its size is bounded by
 * the number of scope groups, whatever the number of codes.
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
 * internal types file into the package's declarations: see caslSubject in ability-compiler.ts).
 */
export interface GrantRule {
  readonly action: string | readonly string[];
  readonly subject: unknown;
  readonly inverted: boolean;
  /** The scope group's description (GrantAlternative.description). */
  readonly reason: string | undefined;
}

/** One alternative a scoped grant allows (a scope group); `null` conditions: unscoped, every resource. */
export interface GrantAlternative {
  conditions: Record<string, unknown> | null;
  description: string;
}

export class GrantAbility {
  private readonly bySubject = new Map<string, MongoAbility>();
  private built = 0;

  /**
   * `actions`: resource type → the actions its codes grant (`*` included as given; `*` as a resource type
   * holds the codes for every resource). `alternatives`: one per scope group, or one without conditions.
   */
  constructor(
    private readonly actions: ReadonlyMap<string, readonly string[]>,
    private readonly alternatives: readonly GrantAlternative[],
  ) {}

  /** CASL rules built so far (the grant cache weighs grants by what they may build: see approximateGrantBytes). */
  get builtRules(): number {
    return this.built;
  }

  /** The number of resource types (the wildcard included) whose codes this grant holds. */
  get resourceTypes(): number {
    return this.actions.size;
  }

  can(action: string, subject: string | object): boolean {
    return this.abilityFor(subject).can(action, subject as never);
  }

  /** CASL's `relevantRuleFor` on the subject's own resource type (its array `action` lists exact actions). */
  relevantRuleFor(action: string, subject: string | object): GrantRule | null {
    return this.abilityFor(subject).relevantRuleFor(action, subject as never);
  }

  private abilityFor(subject: string | object): MongoAbility {
    const type = typeof subject === 'string' ? subject : String(casl.detectSubjectType(subject as never));
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
      for (const { conditions, description } of this.alternatives) {
        const shared = { subject, reason: description, ...(conditions ? { conditions } : {}) };
        // CASL prefers the rule defined last: an exact action names the code that grants it, over `resource:*`.
        if (exact.length < actions.length) rules.push({ action: ANY, ...shared });
        if (exact.length > 0) rules.push({ action: exact, ...shared });
      }
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
