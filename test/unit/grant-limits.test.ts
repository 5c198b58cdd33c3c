/**
 * #11.32 (grants): what one grant compiles to is bounded at write time (codes per template, scopes per
 * profile: 400 IAM_VALIDATION_FAILED at the admin API, the provisioning file and authenticator projections),
 * and the grant cache is bounded by approximate memory, not only by entry count.
 */
import { ScopesInput, TemplateInput } from '../../src/api/schemas/requests';
import { ProvisioningFileError, validateProvisioningDocument } from '../../src/auth/provisioning-file';
import { checkAuthenticatedIdentity } from '../../src/auth/identity-validation';
import { approximateGrantBytes, compileGrant } from '../../src/authz/ability-compiler';
import { GrantCache } from '../../src/authz/grant-cache';
import { MAX_PROFILE_SCOPES, MAX_TEMPLATE_PERMISSIONS } from '../../src/domain/grant-limits';
import { GrantProvider } from '../../src/authz/grant-provider';
import { assertValid, createBodyValidator } from '../../src/api/validate-body';
import type { ProfileRecord, ScopeRecord, TemplateRecord, UserRecord } from '../../src/domain/records';
import { ProblemError } from '../../src/domain/problem';

const codes = (n: number): string[] => Array.from({ length: n }, (_, i) => `res${i}:read`);
const scopes = (n: number): ScopeRecord[] => Array.from({ length: n }, (_, i) => ({ scopeType: `TYPE${i}`, scopeRefId: String(i), accessMode: 'READ' }));

function profile(profileId: string, userId: string, templateVersionId: string, profileScopes: ScopeRecord[]): ProfileRecord {
  return { profileId, userId, profileName: profileId, templateVersionId, clientTypes: ['WEB'], enabled: true, revoked: false, unscoped: profileScopes.length === 0, scopes: profileScopes, version: 1 };
}

function problemOf(work: () => unknown): ProblemError {
  try {
    work();
  } catch (error) {
    if (error instanceof ProblemError) return error;
    throw error;
  }
  throw new Error('no problem was thrown');
}

describe('#11.32 grant size limits at write time', () => {
  const ajv = createBodyValidator();
  const template = ajv.compile<{ name: string; permissions: string[] }>(TemplateInput);
  const scopeList = ajv.compile(ScopesInput);

  it(`#11.32: a template over ${MAX_TEMPLATE_PERMISSIONS} codes or a profile over ${MAX_PROFILE_SCOPES} scopes is 400 IAM_VALIDATION_FAILED (admin API)`, () => {
    expect(assertValid(template, { name: 't', permissions: codes(MAX_TEMPLATE_PERMISSIONS) }).permissions).toHaveLength(MAX_TEMPLATE_PERMISSIONS);
    const tooMany = problemOf(() => assertValid(template, { name: 't', permissions: codes(MAX_TEMPLATE_PERMISSIONS + 1) }));
    expect(tooMany).toMatchObject({ code: 'IAM_VALIDATION_FAILED', status: 400 });
    expect(tooMany.extensions.errors?.map((e) => e.pointer)).toContain('/permissions');
    expect(assertValid(scopeList, scopes(MAX_PROFILE_SCOPES))).toHaveLength(MAX_PROFILE_SCOPES);
    expect(problemOf(() => assertValid(scopeList, scopes(MAX_PROFILE_SCOPES + 1)))).toMatchObject({ code: 'IAM_VALIDATION_FAILED', status: 400 });
  });

  it('#11.32: the same bounds hold for provisioning files and authenticator projections', () => {
    expect(() => validateProvisioningDocument({ templates: [{ versionId: 't', name: 't', permissions: codes(MAX_TEMPLATE_PERMISSIONS + 1) }] }, 'file')).toThrow(
      ProvisioningFileError,
    );
    const projected = (n: number) => ({
      userId: 'u',
      identityId: 'i',
      identityDomain: 'd',
      profiles: [{ profileId: 'p', profileName: 'p', templateVersionId: 't', clientTypes: ['WEB'], scopes: scopes(n) }],
    });
    expect(() => validateProvisioningDocument({ users: [{ userId: 'u', profiles: projected(MAX_PROFILE_SCOPES + 1).profiles }] }, 'file')).toThrow(ProvisioningFileError);
    expect(checkAuthenticatedIdentity(projected(MAX_PROFILE_SCOPES))).toHaveProperty('identity');
    expect(checkAuthenticatedIdentity(projected(MAX_PROFILE_SCOPES + 1))).toHaveProperty('error');
  });

  it('#11.32: the largest grant the bounds allow builds CASL rules one resource type at a time, at most three per type', () => {
    const grant = compileGrant({
      userId: 'u',
      authorizationVersion: 1,
      profile: profile('p', 'u', 't', scopes(MAX_PROFILE_SCOPES)),
      template: { versionId: 't', name: 't', description: null, permissions: [...codes(MAX_TEMPLATE_PERMISSIONS - 1), 'res0:*'] },
    });
    // Compiling builds no CASL rule (it was codes × scope groups, 32,768 here, all at once).
    expect(grant.ability.builtRules).toBe(0);
    expect(grant.ability.can('read', 'res0')).toBe(true);
    // res0's exact actions and its `*`: two rules, whatever the number of scopes (scopes are the scope index's).
    expect(grant.ability.builtRules).toBe(2);
    expect(grant.ability.can('read', 'res1')).toBe(true);
    expect(grant.ability.can('write', 'res1')).toBe(false);
    expect(grant.ability.builtRules).toBe(3);
    // Every scope is in the index, each id found with one set lookup per group.
    expect(grant.scopeIndex.groups.reduce((sum, group) => sum + (group.ids?.size ?? 0), 0)).toBe(MAX_PROFILE_SCOPES);
    // The cache weighs a grant by what it may build, never by what it built so far.
    expect(approximateGrantBytes(grant)).toBeGreaterThan(3 * grant.ability.resourceTypes * 200 + MAX_PROFILE_SCOPES * 200);
  });
});

describe('#11.32 grant cache memory bound', () => {
  it('#11.32: the LRU drops the least recently used values beyond maxBytes, and never keeps one heavier than the bound', () => {
    const cache = new GrantCache<string>(1000, { maxBytes: 100, weigh: (value) => value.length });
    cache.set('a', 'x'.repeat(40));
    cache.set('b', 'x'.repeat(40));
    expect(cache.get('a')).toBeDefined();
    cache.set('c', 'x'.repeat(40));
    expect([cache.get('a') !== undefined, cache.get('b') !== undefined, cache.get('c') !== undefined]).toEqual([true, false, true]);
    expect(cache.bytes).toBe(80);
    cache.set('huge', 'x'.repeat(101));
    expect(cache.size).toBe(0);
    expect(cache.bytes).toBe(0);
    cache.set('a', 'x'.repeat(10));
    cache.deleteWhere(() => true);
    expect(cache.bytes).toBe(0);
  });

  it('#11.32: GrantProvider keeps the compiled grants it caches under iam.authz.ability-cache-memory', async () => {
    const users = new Map<string, UserRecord>();
    const profiles = new Map<string, ProfileRecord>();
    const template: TemplateRecord = { versionId: 't-big', name: 'big', description: null, permissions: codes(MAX_TEMPLATE_PERMISSIONS), version: 1 };
    for (let i = 0; i < 20; i++) {
      users.set(`u-${i}`, { userId: `u-${i}`, displayName: null, enabled: true, authorizationVersion: 1, createdAt: new Date(0), updatedAt: new Date(0), version: 1 });
      profiles.set(`p-${i}`, profile(`p-${i}`, `u-${i}`, 't-big', scopes(16)));
    }
    const one = approximateGrantBytes(compileGrant({ userId: 'u-0', authorizationVersion: 1, profile: profiles.get('p-0')!, template }));
    const maxBytes = one * 5 + 1;
    const provider = new GrantProvider({
      repository: {
        getProfile: async (id) => profiles.get(id) ?? null,
        getUser: async (id) => users.get(id) ?? null,
        getTemplate: async () => template,
      },
      maxEntries: 10_000,
      maxBytes,
      trustCache: () => true,
    });
    for (let i = 0; i < 20; i++) {
      const grant = await provider.getGrant({ userId: `u-${i}`, identityId: 'i', identityDomain: 'd', activeProfileId: `p-${i}`, authorizationVersion: 1 });
      expect(grant?.profileId).toBe(`p-${i}`);
      expect(provider.cachedBytes()).toBeLessThanOrEqual(maxBytes);
    }
    expect(provider.stats()).toMatchObject({ size: 5 });
  });
});
