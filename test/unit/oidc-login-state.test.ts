import { LoginStateSeal, type LoginState } from '../../src/auth/oidc/login-state';
import { identityFromClaims } from '../../src/auth/oidc/oidc-login';

const state: LoginState = { state: 's-123', nonce: 'n-456', codeVerifier: 'v'.repeat(43), returnTo: '/api', expiresAtMs: Date.now() + 60_000 };

describe('the sealed OpenID Connect login state', () => {
  const seal = new LoginStateSeal('client-secret');

  it('round-trips, and reveals nothing of what it holds', () => {
    const sealed = seal.seal(state);
    expect(seal.unseal(sealed)).toEqual(state);
    for (const secret of ['s-123', 'n-456', 'vvvv', '/api']) expect(sealed).not.toContain(secret);
    expect(sealed).not.toBe(seal.seal(state)); // a fresh IV each time
  });

  it('refuses a changed byte, another key, an expired state, and garbage', () => {
    const sealed = seal.seal(state);
    const [version, iv, body, tag] = sealed.split('.');
    const flip = (text: string): string => `${text.slice(0, 5)}${text[5] === 'A' ? 'B' : 'A'}${text.slice(6)}`;
    expect(seal.unseal([version, flip(iv!), body, tag].join('.'))).toBeNull();
    expect(seal.unseal([version, iv, flip(body!), tag].join('.'))).toBeNull();
    expect(seal.unseal([version, iv, body, flip(tag!)].join('.'))).toBeNull();
    expect(seal.unseal(['v2', iv, body, tag].join('.'))).toBeNull();
    expect(new LoginStateSeal('another-secret').unseal(sealed)).toBeNull();
    expect(seal.unseal(seal.seal({ ...state, expiresAtMs: Date.now() - 1 }))).toBeNull();
    for (const junk of [null, undefined, '', 'v1', 'v1.a.b', 'v1.a.b.c.d', 'x'.repeat(5000)]) expect(seal.unseal(junk)).toBeNull();
  });
});

describe('claims → identity', () => {
  const issuer = 'https://idp.example/realms/main';

  it('takes userId from the configured claim, the domain from the issuer or a claim, the identity from sub', () => {
    expect(identityFromClaims({ sub: 'abc', name: 'Ann' }, { userId: 'sub', identityDomain: null }, issuer)).toEqual({ userId: 'abc', identityId: 'oidc:abc', identityDomain: issuer, displayName: 'Ann' });
    expect(identityFromClaims({ sub: 'abc', employee_id: 42, tenant: 'acme' }, { userId: 'employee_id', identityDomain: 'tenant' }, issuer)).toEqual({ userId: '42', identityId: 'oidc:abc', identityDomain: 'acme' });
  });

  it('refuses a missing claim or one that cannot travel in a header (401 IAM_OIDC_LOGIN_FAILED)', () => {
    for (const claims of [{ sub: 'abc' }, { sub: 'abc', email: 'a b@x' }, { sub: 'abc', email: 'x\r\nX-IAM-User-Id: admin' }, { email: 'a@x' }]) {
      expect(() => identityFromClaims(claims, { userId: 'email', identityDomain: null }, issuer)).toThrow(expect.objectContaining({ code: 'IAM_OIDC_LOGIN_FAILED' }));
    }
  });
});
