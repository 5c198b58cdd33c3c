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

describe('the verified-assertion cache', () => {
  const verifications = (key: ReturnType<typeof signer>['key']) => {
    const verifier = new AssertionVerifier(key, 2);
    // Counts the signature checks: a cached assertion is never verified again.
    const spy = jest.spyOn(verifier as unknown as { verifySignature: (token: string) => unknown }, 'verifySignature');
    return { verifier, count: () => spy.mock.calls.length };
  };

  it('verifies an assertion once, then serves it until its exp, its audience checked again at each use', () => {
    const gateway = signer('my-host');
    const { verifier, count } = verifications(gateway.key);
    const billing = gateway.sign(decision, session, 'GET', '/billing/x', 'r-1', 'billing');
    const audiences = new Set(['billing']);
    expect(verifier.verify(billing, { audiences })).toMatchObject({ sessionId: 's-1' });
    expect(verifier.verify(billing, { audiences })).toMatchObject({ sessionId: 's-1' });
    expect(count()).toBe(1);
    // A reload dropped the route's audience: the cached assertion is refused as a fresh one would be.
    expect(verifier.verify(billing)).toBeNull();
    const { expiresAtMs } = verifier.verify(billing, { audiences })!;
    expect(verifier.verify(billing, { audiences, nowMs: expiresAtMs })).toBeNull();
    expect(verifier.verify(billing, { audiences, nowMs: expiresAtMs - 1 })).not.toBeNull(); // left the cache at its exp: verified again
    expect(count()).toBe(2);
  });

  it('is bounded: the oldest assertion leaves first', () => {
    const gateway = signer(null);
    const { verifier, count } = verifications(gateway.key);
    const [a, b, c] = ['r-1', 'r-2', 'r-3'].map((id) => gateway.sign(decision, session, 'GET', '/x', id)) as [string, string, string];
    for (const token of [a, b, c, c, b]) expect(verifier.verify(token)).not.toBeNull();
    expect(count()).toBe(3);
    expect(verifier.verify(a)).not.toBeNull(); // evicted by c: verified again
    expect(count()).toBe(4);
  });

  it('never keeps what fails', () => {
    const gateway = signer('my-host');
    const { verifier, count } = verifications(gateway.key);
    const tampered = gateway.sign(decision, session, 'GET', '/x', 'r-1').slice(0, -4) + 'AAAA';
    expect(verifier.verify(tampered)).toBeNull();
    expect(verifier.verify(tampered)).toBeNull();
    expect(count()).toBe(2);
  });
});
