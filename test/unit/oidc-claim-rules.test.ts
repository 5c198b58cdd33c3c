import { IDENTIFIER_PATTERN } from '../../src/auth/identity-validation';
import { conditionHolds, evaluateRules, formerRuleProfileId, projectProfiles, ruleProfileId, unmetCondition, type Claims, type ProfileRule } from '../../src/auth/oidc/claim-rules';

describe('a claim condition (iam.oidc.allowed, a rule\'s when)', () => {
  it.each([
    [{ groups: ['a', 'b'] }, ['b'], true],
    [{ groups: ['a'] }, ['b'], false],
    [{ groups: 'b' }, ['b'], true],
    [{ groups: [] }, ['b'], false],
    [{}, ['b'], false],
    [{ tier: 2 }, ['2'], true],
    [{ groups: [{ name: 'b' }] }, ['b'], false],
    [{ groups: 'B' }, ['b'], false],
    // No values: present, and not empty or false.
    [{ email_verified: true }, [], true],
    [{ email_verified: false }, [], false],
    [{ department: '' }, [], false],
    [{ groups: ['x'] }, [], true],
    [{}, [], false],
  ])('%j with values %j → %s', (claims, values, holds) => {
    expect(conditionHolds(claims, { claim: Object.keys(claims)[0] ?? 'groups', values })).toBe(holds);
  });

  it('unmetCondition names the first condition the claims fail, null when all hold', () => {
    const conditions = [{ claim: 'groups', values: ['eng'] }, { claim: 'email_verified', values: [] }];
    expect(unmetCondition({ groups: ['eng'], email_verified: true }, conditions)).toBeNull();
    expect(unmetCondition({ groups: ['eng'] }, conditions)).toEqual(conditions[1]);
    expect(unmetCondition({}, [])).toBeNull();
  });

  it('an inherited property is not a claim', () => {
    expect(conditionHolds({}, { claim: 'toString', values: [] })).toBe(false);
    expect(conditionHolds({}, { claim: '__proto__', values: [] })).toBe(false);
  });
});

describe('projectProfiles', () => {
  const rule = (over: Partial<ProfileRule> = {}): ProfileRule => ({ name: 'eng', when: [{ claim: 'groups', values: ['eng'] }], profileName: 'Engineering', templateVersionId: 'editor-v1', clientTypes: ['WEB'], scopes: [], unscoped: null, ...over });
  const project = (claims: Claims, userId: string, rules: ProfileRule[], held?: ReadonlySet<string>) => projectProfiles(evaluateRules(claims, rules), userId, held);

  it('a met rule gives its profile; an unmet one is listed for revocation (under either id it may be held)', () => {
    const rules = [rule(), rule({ name: 'ops', when: [{ claim: 'groups', values: ['ops'] }], unscoped: true })];
    expect(project({ groups: ['eng'] }, 'u-1', rules)).toEqual({
      profiles: [{ profileId: 'oidc:eng:u-1', profileName: 'Engineering', templateVersionId: 'editor-v1', clientTypes: ['WEB'], revoked: false }],
      retract: ['oidc-eng-u-1', 'oidc:ops:u-1', 'oidc-ops-u-1'],
    });
    expect(project({ groups: ['ops'] }, 'u-1', rules).profiles[0]).toEqual(expect.objectContaining({ profileId: 'oidc:ops:u-1', unscoped: true }));
  });

  it('scopes: a fixed id, or one per value of a claim (header-safe values only, no duplicates)', () => {
    const scoped = rule({ scopes: [{ type: 'ORG', id: 'acme', access: 'READ' }, { type: 'TEAM', claim: 'teams', access: 'WRITE' }] });
    const { profiles } = project({ groups: ['eng'], teams: ['t1', 't1', 't2', 'bad\nid', ''] }, 'u-1', [scoped]);
    expect(profiles[0]).toEqual(expect.objectContaining({
      unscoped: false,
      scopes: [
        { scopeType: 'ORG', scopeRefId: 'acme', accessMode: 'READ' },
        { scopeType: 'TEAM', scopeRefId: 't1', accessMode: 'WRITE' },
        { scopeType: 'TEAM', scopeRefId: 't2', accessMode: 'WRITE' },
      ],
    }));
  });

  it('a rule whose scope claim has no usable value does not match (a scoped profile without scopes grants nothing)', () => {
    const scoped = rule({ scopes: [{ type: 'TEAM', claim: 'teams', access: 'READ' }] });
    expect(project({ groups: ['eng'] }, 'u-1', [scoped])).toEqual({ profiles: [], retract: ['oidc:eng:u-1', 'oidc-eng-u-1'] });
    expect(project({ groups: ['eng'], teams: ['a b\u0000'] }, 'u-1', [scoped]).profiles).toEqual([]);
  });

  it('the profile id is stable, and a digest when the userId would make it too long', () => {
    expect(ruleProfileId('eng', 'alice@example.test')).toBe('oidc:eng:alice@example.test');
    const long = 'u'.repeat(199);
    expect(ruleProfileId('eng', long)).toMatch(/^oidc:eng~[A-Za-z0-9_-]{43}$/);
    expect(ruleProfileId('eng', long)).toBe(ruleProfileId('eng', long));
    expect(ruleProfileId('eng', long)).not.toBe(ruleProfileId('eng', `${long}x`));
  });

  it('two (rule, user) pairs never share an id, whatever "-" or ":" the parts hold', () => {
    // The finding: with "-" between them, rule staff + user admin-bob and rule staff-admin + user bob were one id.
    expect(ruleProfileId('staff', 'admin-bob')).not.toBe(ruleProfileId('staff-admin', 'bob'));
    expect(ruleProfileId('a', 'b:c')).not.toBe(ruleProfileId('a-b', 'c'));
    // A userId spelling out another user's digest form is still another id.
    const long = 'u'.repeat(199);
    const digest = ruleProfileId('eng', long).slice('oidc:eng~'.length);
    expect(ruleProfileId('eng', digest)).not.toBe(ruleProfileId('eng', long));
    expect(ruleProfileId('eng', `~${digest}`)).not.toBe(ruleProfileId('eng', long));
    // Every id is one the admin API accepts.
    for (const id of [ruleProfileId('staff-admin', 'bob'), ruleProfileId('eng', long), ruleProfileId('a'.repeat(40), 'x'.repeat(200))]) expect(id).toMatch(new RegExp(IDENTIFIER_PATTERN));
  });

  it('a rule name that could end early is refused, never turned into an id', () => {
    expect(() => ruleProfileId('staff:x', 'bob')).toThrow('is not a rule name');
    expect(() => ruleProfileId('staff~x', 'bob')).toThrow('is not a rule name');
  });

  it('a profile held under its former id keeps that id: no second profile, nothing lost', () => {
    const former = formerRuleProfileId('eng', 'u-1');
    expect(former).toBe('oidc-eng-u-1');
    expect(project({ groups: ['eng'] }, 'u-1', [rule()], new Set([former])).profiles.map((profile) => profile.profileId)).toEqual([former]);
    expect(project({ groups: [] }, 'u-1', [rule()], new Set([former])).retract).toContain(former);
    // Held under both (an admin made one): the current one is kept, the former revoked.
    const both = project({ groups: ['eng'] }, 'u-1', [rule()], new Set([former, 'oidc:eng:u-1']));
    expect(both).toEqual({ profiles: [expect.objectContaining({ profileId: 'oidc:eng:u-1' })], retract: [former] });
  });
});

describe('evaluateRules: why a rule whose when holds gives no profile', () => {
  const rule: ProfileRule = { name: 'eng', when: [{ claim: 'groups', values: ['eng'] }], profileName: 'Engineering', templateVersionId: 'editor-v1', clientTypes: ['WEB'], scopes: [{ type: 'TEAM', claim: 'teams', access: 'READ' }], unscoped: null };
  it.each([
    [{ groups: ['eng'] }, 'missing'],
    [{ groups: ['eng'], teams: { a: 1 } }, 'wrong-type'],
    [{ groups: ['eng'], teams: [{ id: 'a' }] }, 'wrong-type'],
    [{ groups: ['eng'], teams: null }, 'wrong-type'],
    [{ groups: ['eng'], teams: [] }, 'no-usable-value'],
    [{ groups: ['eng'], teams: ['', 'a b'] }, 'no-usable-value'],
  ])('%j → skipped, claim teams, %s', (claims, reason) => {
    expect(evaluateRules(claims, [rule])).toEqual([{ rule, status: 'skipped', claim: 'teams', reason }]);
  });

  it('an unmet when is not a skip: it names the condition', () => {
    expect(evaluateRules({ groups: ['ops'] }, [rule])).toEqual([{ rule, status: 'unmet', condition: rule.when[0] }]);
  });
});
