/**
 * The gateway verifies its own `X-IAM-Assertion` when a host sends it back as a bearer (POST
 * /iam/authorization/check and /plan): only its signer's header, signature, issuer, audience and expiry pass
 * (src/auth/assertion-verifier.ts). A verified assertion is kept until its `exp`, bounded, its audience checked again.
 */
import { AssertionVerifier } from '../../src/auth/assertion-verifier';
import { AssertionSigner } from '../../src/gateway/assertion-signer';
import type { AuthorizationDecision } from '../../src/authz/decision';
import type { VerifiedSession } from '../../src/sessions/session-service';

const session = { tokenHash: 'h', record: { sessionId: 's-1', principal: { userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com', activeProfileId: 'p-1', authorizationVersion: 0 }, clientType: 'WEB', createdAt: '', expiresAt: '', idleTimeoutMs: 0 } } as VerifiedSession;
const decision = { decisionId: 'd-1', allowed: true, permissionCode: 'project:read', profileId: 'p-1', userId: 'u-alice', steps: [{ code: 'PROFILE_ACTIVE', passed: true, reason: '' }], status: 200, problemCode: null, failedStep: null, shadowed: false, evaluatedAt: '' } as unknown as AuthorizationDecision;

/** The signer with the verifier built from its key, as the gateway wires them. */
const signer = (audience: string | null = null, issuer = 'iam-gateway', ttlMs = 60_000) => {
  const signing = new AssertionSigner({ ttlMs, issuer, audience, keyFile: null });
  const verifier = new AssertionVerifier(signing.key);
  return { sign: signing.sign.bind(signing), verify: verifier.verify.bind(verifier), key: signing.key };
};

describe('AssertionVerifier.verify', () => {
  it('accepts what it signed, naming the session', () => {
    const gateway = signer('my-host');
    const token = gateway.sign(decision, session, 'GET', '/api/projects', 'r-1');
    expect(gateway.verify(token)).toEqual({ userId: 'u-alice', sessionId: 's-1', expiresAtMs: expect.any(Number) });
  });

  it('refuses a tampered payload or signature, another key, another issuer or audience, an expired one, and non-assertions', () => {
    const gateway = signer('my-host');
    const token = gateway.sign(decision, session, 'GET', '/x', 'r-1');
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), sub: 'u-admin' })).toString('base64url');
    expect(gateway.verify(`${header}.${forged}.${signature}`)).toBeNull();
    expect(gateway.verify(`${header}.${payload}.${signature.slice(0, -4)}AAAA`)).toBeNull();
    expect(gateway.verify(signer('my-host').sign(decision, session, 'GET', '/x', 'r-1'))).toBeNull(); // another instance's own key
    const otherIssuer = signer('my-host', 'someone');
    expect(otherIssuer.verify(otherIssuer.sign(decision, session, 'GET', '/x', 'r-1').replace(/^[^.]+/, header))).toBeNull();
    expect(gateway.verify(token, { nowMs: Date.now() + 61_000 })).toBeNull();
    expect(gateway.verify('iamt_' + 'a'.repeat(43))).toBeNull();
    expect(gateway.verify('eyJhbGciOiJSUzI1NiJ9.e30.c2ln')).toBeNull();
  });

  it('checks the audience only when one is configured', () => {
    const open = signer(null);
    expect(open.verify(open.sign(decision, session, 'GET', '/x', 'r-1'))).not.toBeNull();
  });

  it('signs a route\'s audience instead of the configured one, and accepts back every audience it issues, no other', () => {
    const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    for (const configured of ['my-host', null]) {
      const gateway = signer(configured);
      const billing = gateway.sign(decision, session, 'DELETE', '/billing/invoices/7', 'r-1', 'billing');
      expect(claims(billing)).toMatchObject({ aud: 'billing', htm: 'DELETE', htu: '/billing/invoices/7' });
      expect(gateway.verify(billing, { audiences: new Set(['billing']) })).toMatchObject({ sessionId: 's-1' });
      // The policy no longer names it (or never did): not an audience this gateway issues.
      expect(gateway.verify(billing)).toBeNull();
      expect(gateway.verify(billing, { audiences: new Set(['tasks']) })).toBeNull();
      // A route without one: the configured audience, or none.
      const plain = gateway.sign(decision, session, 'GET', '/x', 'r-1', null);
      expect(claims(plain).aud).toBe(configured ?? undefined);
      expect(gateway.verify(plain, { audiences: new Set(['billing']) })).not.toBeNull();
    }
  });
});
