/**
 * A rule of `iam.oidc.profiles` whose `when` the claims meet but whose scope claim is unusable gives no profile; the
 * sign-in goes on, and the operator is told (one warn line and one audit event per rule, names only, never values).
 */
import type { JWTPayload } from 'jose';
import type { ProfileRule } from '../../src/auth/oidc/claim-rules';
import { LoginStateSeal } from '../../src/auth/oidc/login-state';
import { OidcLogin, type OidcLoginDeps } from '../../src/auth/oidc/oidc-login';
import type { RelyingParty } from '../../src/auth/oidc/relying-party';
import type { AuditInput } from '../../src/audit/audit-trail';
import type { AuthenticationResult } from '../../src/sessions/session-service';

const RULES: ProfileRule[] = [
  { name: 'projects', when: [{ claim: 'groups', values: ['eng'] }], profileName: 'Projects', templateVersionId: 'reader-v1', clientTypes: ['WEB'], scopes: [{ type: 'PROJECT', claim: 'project_ids', access: 'READ' }], unscoped: null },
  { name: 'teams', when: [{ claim: 'groups', values: ['eng'] }], profileName: 'Teams', templateVersionId: 'reader-v1', clientTypes: ['WEB'], scopes: [{ type: 'TEAM', claim: 'teams', access: 'READ' }], unscoped: null },
  { name: 'ops', when: [{ claim: 'groups', values: ['ops'] }], profileName: 'Ops', templateVersionId: 'reader-v1', clientTypes: ['WEB'], scopes: [{ type: 'TEAM', claim: 'teams', access: 'READ' }], unscoped: null },
];

async function signInWith(claims: JWTPayload): Promise<{ warnings: Array<[Record<string, unknown>, string]>; events: AuditInput[]; projected: string[] }> {
  const warnings: Array<[Record<string, unknown>, string]> = [];
  const events: AuditInput[] = [];
  const seal = new LoginStateSeal('a-client-secret-long-enough-for-the-seal');
  const rp = { issuer: 'https://op.example.test', completeLogin: async () => ({ claims, idToken: 'an-id-token' }) } as unknown as RelyingParty;
  let projected: string[] = [];
  const login: OidcLoginDeps['login'] = {
    loginVerified: async (identity, _clientType, _facts, options) => {
      projected = options.projection?.of(new Set()).profiles.map((profile) => profile.profileId) ?? [];
      return { accessToken: 't', sessionId: 's-1', expiresAt: '', principal: { userId: identity.userId, identityId: identity.identityId, identityDomain: identity.identityDomain, activeProfileId: null, authorizationVersion: 1 } } satisfies AuthenticationResult;
    },
  };
  const oidc = new OidcLogin({
    rp,
    audit: { record: (event) => events.push(event), recordUnauthenticated: (event) => events.push(event) },
    logger: { warn: ((fields: Record<string, unknown>, message: string) => warnings.push([fields, message])) as never },
    seal,
    login,
    store: { takeCounters: async () => ({ allowed: true, resetInMs: 0 }) },
    rateLimiter: { acquireAddress: async () => ({ succeeded: async () => undefined, notTried: async () => undefined }) },
    claims: { userId: 'sub', identityDomain: null, profile: null, users: 'jit', linkBy: 'none', profiles: RULES },
    clientType: 'WEB',
  });
  const cookie = seal.seal({ state: 'st', nonce: 'n', codeVerifier: 'v', returnTo: '/', expiresAtMs: Date.now() + 60_000 });
  await oidc.complete(new URLSearchParams({ state: 'st', code: 'c' }), cookie, { requestId: 'req-1', clientAddress: '192.0.2.1' });
  return { warnings, events, projected };
}

describe('a met rule that cannot apply', () => {
  it('is warned of and audited once per rule, naming the rule and the claim, never the claim\'s values', async () => {
    const { warnings, events, projected } = await signInWith({ sub: 'u-1', groups: ['eng'], teams: [{ secret: 'team-value-7f3a' }] });
    expect(projected).toEqual([]);
    expect(warnings.map(([fields]) => fields)).toEqual([
      { rule: 'projects', claim: 'project_ids', reason: 'missing', userId: 'u-1', requestId: 'req-1' },
      { rule: 'teams', claim: 'teams', reason: 'wrong-type', userId: 'u-1', requestId: 'req-1' },
    ]);
    expect(warnings[0]![1]).toContain('"projects"');
    expect(warnings[0]![1]).toContain('"project_ids"');
    expect(events).toEqual([
      expect.objectContaining({ action: 'oidc.claim-rule.skipped', actorUserId: 'u-1', targetType: 'user', targetId: 'u-1', outcome: 'failure', requestId: 'req-1', details: { rule: 'projects', claim: 'project_ids', reason: 'missing', sessionId: 's-1' } }),
      expect.objectContaining({ action: 'oidc.claim-rule.skipped', details: { rule: 'teams', claim: 'teams', reason: 'wrong-type', sessionId: 's-1' } }),
    ]);
    expect(JSON.stringify([warnings, events])).not.toContain('team-value-7f3a');
  });

  it('a rule that applies, or whose when is not met, is neither warned of nor audited', async () => {
    const { warnings, events, projected } = await signInWith({ sub: 'u-2', groups: ['eng'], project_ids: ['p1'], teams: ['t1'] });
    expect(projected).toEqual(['oidc:projects:u-2', 'oidc:teams:u-2']);
    expect(warnings).toEqual([]);
    expect(events).toEqual([]);
  });
});
