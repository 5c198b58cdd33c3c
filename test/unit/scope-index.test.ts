/**
 * The scope index answers the scope step exactly as the CASL conditions it replaced did: the same
 * covered/refused answer and the same deciding scope, checked on random profiles and resources against a
 * reference built the old way (one CASL rule per scope group, `$elemMatch` over the scope refs).
 */
import type * as Casl from '@casl/ability/dist/types';
import { ScopeIndex, groupScopes } from '../../src/authz/scope-index';
import type { ScopeRecord } from '../../src/domain/records';
import { seededRandom } from '../support/random';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- @casl/ability's types come from their file (see src/authz/ability-compiler.ts)
const casl = require('@casl/ability') as typeof Casl;

/** The previous scope step: CASL rules with conditions, the rule defined last winning. */
function referenceCovering(scopes: ScopeRecord[], refs: Array<{ type: string; id: string }>, access: 'READ' | 'WRITE'): string | null {
  const groups = groupScopes(scopes);
  const rules = groups.map((group) => ({
    action: 'read',
    subject: 'thing',
    reason: group.description,
    conditions: {
      scopeRefs: { $elemMatch: group.ids === null ? { type: group.type } : { type: group.type, id: { $in: [...group.ids] } } },
      access: { $in: group.mode === 'WRITE' ? ['READ', 'WRITE'] : ['READ'] },
    },
  }));
  const ability = casl.createMongoAbility(rules as never);
  const rule = ability.relevantRuleFor('read', casl.subject('thing', { scopeRefs: refs, access }) as never);
  return rule ? (rule.reason ?? null) : null;
}

describe('ScopeIndex', () => {
  it('agrees with the CASL conditions it replaced on 5,000 random profiles and resources', () => {
    const next = seededRandom(18);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
    const types = ['PROJECT', 'TEAM', 'ORG'];
    const ids = ['1', '2', '3', '10', '*'];
    let covered = 0;
    for (let round = 0; round < 5000; round++) {
      const scopes: ScopeRecord[] = Array.from({ length: Math.floor(next() * 6) }, () => ({
        scopeType: pick(types),
        scopeRefId: pick(ids),
        accessMode: pick(['READ', 'WRITE'] as const),
      }));
      const refs = Array.from({ length: Math.floor(next() * 4) }, () => ({ type: pick(types), id: pick(ids.filter((id) => id !== '*').concat('4')) }));
      const access = pick(['READ', 'WRITE'] as const);
      const expected = referenceCovering(scopes, refs, access);
      const actual = ScopeIndex.of(scopes).covering(refs, access);
      if (actual !== expected) throw new Error(`seed round ${round}: ${JSON.stringify({ scopes, refs, access, expected, actual })}`);
      if (actual !== null) covered++;
    }
    // Both answers occur often enough for the comparison to mean something.
    expect(covered).toBeGreaterThan(500);
    expect(covered).toBeLessThan(4500);
  });

  it('answers an id lookup in a group of 128 ids without scanning them (a set)', () => {
    const scopes: ScopeRecord[] = Array.from({ length: 128 }, (_, i) => ({ scopeType: 'PROJECT', scopeRefId: String(i), accessMode: 'READ' }));
    const index = ScopeIndex.of(scopes);
    expect(index.groups).toHaveLength(1);
    expect(index.groups[0]!.ids).toBeInstanceOf(Set);
    expect(index.covering([{ type: 'PROJECT', id: '127' }], 'READ')).toMatch(/^scope PROJECT 0, 1, 2/);
    expect(index.covering([{ type: 'PROJECT', id: '128' }], 'READ')).toBeNull();
  });

  it('covers every resource only when built unscoped', () => {
    expect(ScopeIndex.unscoped().covering([], 'WRITE')).toBe('unscoped profile');
    expect(ScopeIndex.of([]).covering([], 'READ')).toBeNull();
  });
});
