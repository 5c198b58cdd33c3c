import { validateProvisioning } from '../../src/adapters/postgres/provisioning-validation';
import type { ProvisioningDocument } from '../../src/domain/records';

const EMPTY = { templates: new Map(), identities: new Map(), profiles: new Map() };
const documentWithScopes = (scopes: Array<[string, string]>): ProvisioningDocument => ({
  templates: [{ versionId: 'reader-v1', name: 'Reader', permissions: ['orders:read'] }],
  users: [{ userId: 'u-1', profiles: [{ profileId: 'p-1', profileName: 'P', templateVersionId: 'reader-v1', clientTypes: ['WEB'], scopes: scopes.map(([scopeType, scopeRefId]) => ({ scopeType, scopeRefId, accessMode: 'READ' as const })) }] }],
});

describe('duplicate scopes of a profile', () => {
  it('two scopes whose type and id split one string differently are two scopes, not a duplicate', () => {
    expect(validateProvisioning(documentWithScopes([['A/B', 'C'], ['A', 'B/C']]), EMPTY)).toEqual([]);
  });

  it('the same type and id twice is still refused, naming both', () => {
    expect(validateProvisioning(documentWithScopes([['TEAM', 't/1'], ['TEAM', 't/1']]), EMPTY)).toEqual([
      { pointer: '/users/0/profiles/0/scopes/1', message: 'duplicate scope "TEAM t/1" (first at /users/0/profiles/0/scopes/0)' },
    ]);
  });
});
