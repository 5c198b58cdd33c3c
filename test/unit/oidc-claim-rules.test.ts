import { conditionHolds, projectProfiles, ruleProfileId, unmetCondition, type ProfileRule } from '../../src/auth/oidc/claim-rules';

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

  it('a met rule gives its profile; an unmet one is listed for revocation', () => {
    const rules = [rule(), rule({ name: 'ops', when: [{ claim: 'groups', values: ['ops'] }], unscoped: true })];
    expect(projectProfiles({ groups: ['eng'] }, 'u-1', rules)).toEqual({
      profiles: [{ profileId: 'oidc-eng-u-1', profileName: 'Engineering', templateVersionId: 'editor-v1', clientTypes: ['WEB'], revoked: false }],
      retract: ['oidc-ops-u-1'],
    });
    expect(projectProfiles({ groups: ['ops'] }, 'u-1', rules).profiles[0]).toEqual(expect.objectContaining({ profileId: 'oidc-ops-u-1', unscoped: true }));
  });

  it('scopes: a fixed id, or one per value of a claim (header-safe values only, no duplicates)', () => {
    const scoped = rule({ scopes: [{ type: 'ORG', id: 'acme', access: 'READ' }, { type: 'TEAM', claim: 'teams', access: 'WRITE' }] });
    const { profiles } = projectProfiles({ groups: ['eng'], teams: ['t1', 't1', 't2', 'bad\nid', ''] }, 'u-1', [scoped]);
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
    expect(projectProfiles({ groups: ['eng'] }, 'u-1', [scoped])).toEqual({ profiles: [], retract: ['oidc-eng-u-1'] });
    expect(projectProfiles({ groups: ['eng'], teams: ['a b\u0000'] }, 'u-1', [scoped]).profiles).toEqual([]);
  });

  it('the profile id is stable, and a digest when the userId would make it too long or unusable', () => {
    expect(ruleProfileId('eng', 'alice@example.test')).toBe('oidc-eng-alice@example.test');
    const long = 'u'.repeat(199);
    expect(ruleProfileId('eng', long)).toMatch(/^oidc-eng-[A-Za-z0-9_-]{32}$/);
    expect(ruleProfileId('eng', long)).toBe(ruleProfileId('eng', long));
    expect(ruleProfileId('eng', long)).not.toBe(ruleProfileId('eng', `${long}x`));
  });
});
