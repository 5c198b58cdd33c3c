/**
 * Resource-server mode's token-type rule (RFC 8725 §3.11, RFC 9068 §4) and identity linking, on the access-token
 * verifier itself: tokens signed with jose against a local key set stand in for the provider's. A JWT the provider
 * signed is an access token only when typed as one and carrying none of an ID token's or logout token's claims;
 * its claims attach a new provider account to an existing user only as `iam.oidc.link-by` allows, and a refusal is
 * audited once per token.
 */
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT, type JWK, type JWTHeaderParameters } from 'jose';
import { AccessTokenVerifier, type AccessTokenDeps } from '../../src/auth/oidc/access-tokens';
import type { LinkBy } from '../../src/auth/oidc/identity-linking';
import { notAnAccessToken, normalizeTyp } from '../../src/auth/oidc/token-types';
import { IdentityLinkError, type IdentityAttach } from '../../src/domain/iam-repository';
import type { UserRecord } from '../../src/domain/records';

const ISSUER = 'https://idp.example';
const AUDIENCE = 'https://api.example';
const AT_JWT: readonly string[] = ['at+jwt', 'application/at+jwt'];

let privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
let jwks: ReturnType<typeof createLocalJWKSet>;

beforeAll(async () => {
  const pair = await generateKeyPair('RS256', { extractable: true });
  privateKey = pair.privateKey;
  const publicJwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  jwks = createLocalJWKSet({ keys: [publicJwk] });
});

const now = (): number => Math.floor(Date.now() / 1000);

/** A JWT the provider would sign: `header` over `{ alg: RS256, kid }`, `extra` over a valid access token's claims. */
function sign(extra: Record<string, unknown> = {}, header: Partial<JWTHeaderParameters> = { typ: 'at+jwt' }): Promise<string> {
  const claims = { iss: ISSUER, aud: AUDIENCE, sub: 'alice-sub', iat: now(), exp: now() + 3600, jti: `j-${Math.random()}`, ...extra };
  return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'k1', ...header }).sign(privateKey);
}

interface Harness {
  verifier: AccessTokenVerifier;
  /** What each `ensurePrincipal` call was asked to attach, in order. */
  attached: IdentityAttach[];
  audited: Array<Record<string, unknown>>;
}

const user = (userId: string): UserRecord => ({ userId, displayName: null, enabled: true, authorizationVersion: 0, sessionEpoch: 0, createdAt: new Date(0), updatedAt: new Date(0) }) as UserRecord;

function harness(options: { types?: readonly string[]; linkBy?: LinkBy; userIdClaim?: string; refuse?: boolean } = {}): Harness {
  const attached: IdentityAttach[] = [];
  const audited: Array<Record<string, unknown>> = [];
  const deps: AccessTokenDeps = {
    rp: {
      issuer: ISSUER,
      verifyJwt: async (token, verify) => (await jwtVerify(token, jwks, { issuer: ISSUER, audience: verify.audience, algorithms: ['RS256'], requiredClaims: verify.requiredClaims })).payload,
    },
    audience: AUDIENCE,
    types: options.types ?? AT_JWT,
    claims: { userId: options.userIdClaim ?? 'sub', identityDomain: null, profile: null, users: 'jit', linkBy: options.linkBy ?? 'none' },
    clientType: 'API',
    repository: {
      getUser: async (userId) => user(userId),
      ensurePrincipal: async (input) => {
        attached.push(input.attach ?? 'any');
        if (options.refuse) throw new IdentityLinkError('identity-not-linked', 'not linked');
        return { user: user(input.userId), identity: { identityId: input.identityId, userId: input.userId, identityDomain: input.identityDomain, enabled: true, version: 1 } };
      },
      listProfiles: async () => [],
    },
    revocations: { refuses: () => false, raiseEpoch: () => undefined },
    maxEntries: 100,
    audit: { record: (event) => audited.push(event as unknown as Record<string, unknown>) },
  };
  return { verifier: new AccessTokenVerifier(deps), attached, audited };
}

const accepted = async (verifier: AccessTokenVerifier, token: Promise<string>): Promise<boolean> => (await verifier.verify(await token)) !== null;

describe('an access token is explicitly typed (RFC 9068 §4, RFC 8725 §3.11)', () => {
  it('accepts at+jwt in either spelling and any case', async () => {
    const { verifier } = harness();
    for (const typ of ['at+jwt', 'application/at+jwt', 'AT+JWT', 'Application/At+Jwt']) expect([typ, await accepted(verifier, sign({}, { typ }))]).toEqual([typ, true]);
  });

  it('refuses a token without typ, typ JWT, a logout token type, or any other type', async () => {
    const { verifier } = harness();
    expect(await accepted(verifier, sign({}, {}))).toBe(false);
    for (const typ of ['JWT', 'jwt', 'logout+jwt', 'application/logout+jwt', 'secevent+jwt', 'at+jwt2', 'application/jwt']) {
      expect([typ, await accepted(verifier, sign({}, { typ }))]).toEqual([typ, false]);
    }
  });

  it('refuses a correctly typed token that carries an ID token or logout token claim', async () => {
    const { verifier } = harness();
    const foreign: Array<[string, unknown]> = [
      ['nonce', 'n-1'],
      ['at_hash', 'x'],
      ['c_hash', 'x'],
      ['s_hash', 'x'],
      ['events', { 'http://schemas.openid.net/event/backchannel-logout': {} }],
    ];
    for (const [claim, value] of foreign) expect([claim, await accepted(verifier, sign({ [claim]: value }))]).toEqual([claim, false]);
    expect(await accepted(verifier, sign())).toBe(true);
  });

  it('with a provider that types its access tokens JWT (configured), still refuses its ID tokens and logout tokens', async () => {
    const { verifier } = harness({ types: ['JWT'] });
    expect(await accepted(verifier, sign({}, { typ: 'JWT' }))).toBe(true);
    // An ID token (typ JWT, or none at all) carries a nonce; a logout token its events and its own type.
    expect(await accepted(verifier, sign({ nonce: 'n-1' }, { typ: 'JWT' }))).toBe(false);
    expect(await accepted(verifier, sign({}, {}))).toBe(false);
    expect(await accepted(verifier, sign({ events: { 'http://schemas.openid.net/event/backchannel-logout': {} }, sid: 's' }, { typ: 'JWT' }))).toBe(false);
    expect(await accepted(verifier, sign({}, { typ: 'logout+jwt' }))).toBe(false);
    expect(await accepted(verifier, sign({}, { typ: 'at+jwt' }))).toBe(false);
  });

  it('cannot be built to accept logout tokens, or nothing', () => {
    expect(() => harness({ types: ['at+jwt', 'logout+jwt'] })).toThrow(/never logout\+jwt/);
    expect(() => harness({ types: ['APPLICATION/LOGOUT+JWT'] })).toThrow(/never logout\+jwt/);
    expect(() => harness({ types: [] })).toThrow(/at least one/);
  });

  it('normalizes types as media types (application/ optional, case-insensitive) and names why a token is refused', () => {
    expect(['at+jwt', 'application/at+jwt', 'APPLICATION/AT+JWT'].map(normalizeTyp)).toEqual(['at+jwt', 'at+jwt', 'at+jwt']);
    expect(normalizeTyp('application/foo/bar')).toBe('application/foo/bar');
    expect(notAnAccessToken({ alg: 'RS256' }, {}, AT_JWT)).toMatch(/no typ/);
    expect(notAnAccessToken({ alg: 'RS256', typ: 'JWT' }, {}, AT_JWT)).toMatch(/not an access-token type/);
    expect(notAnAccessToken({ alg: 'RS256', typ: 'logout+jwt' }, {}, ['logout+jwt'])).toMatch(/not an access-token type/);
    expect(notAnAccessToken({ alg: 'RS256', typ: 'at+jwt' }, { nonce: 'n' }, AT_JWT)).toMatch(/nonce/);
    expect(notAnAccessToken({ alg: 'RS256', typ: 'at+jwt' }, { sub: 's' }, AT_JWT)).toBeNull();
  });
});

describe("an access token's claims link a new provider account only as iam.oidc.link-by allows", () => {
  it('link-by none: a new account may only come with a new user', async () => {
    const { verifier, attached } = harness();
    expect(await accepted(verifier, sign({ email: 'alice-sub', email_verified: true }))).toBe(true);
    expect(attached).toEqual(['new-user']);
  });

  it('link-by verified-email: the first account in the domain joins when the userId is the email and email_verified is true', async () => {
    const { verifier, attached } = harness({ linkBy: 'verified-email', userIdClaim: 'email' });
    await verifier.verify(await sign({ email: 'alice@example.test', email_verified: true }));
    // Not verified, verified only as a string, or a userId that is not the verified address: never joins.
    await verifier.verify(await sign({ email: 'alice@example.test', email_verified: false }));
    await verifier.verify(await sign({ email: 'alice@example.test', email_verified: 'true' }));
    await verifier.verify(await sign({ email: 'alice@example.test' }));
    expect(attached).toEqual(['first-in-domain', 'new-user', 'new-user', 'new-user']);
    const byUsername = harness({ linkBy: 'verified-email', userIdClaim: 'preferred_username' });
    await byUsername.verifier.verify(await sign({ preferred_username: 'alice', email: 'alice@example.test', email_verified: true }));
    expect(byUsername.attached).toEqual(['new-user']);
  });

  it('refuses a token whose account the records do not link, audits it once, and asks the records again after a while', async () => {
    const { verifier, attached, audited } = harness({ refuse: true });
    const token = await sign({ sub: 'mallory-sub' });
    expect(await verifier.verify(token)).toBeNull();
    expect(await verifier.verify(token)).toBeNull();
    expect(verifier.verifyCached(token)).toBeNull();
    expect(attached).toHaveLength(1);
    expect(audited).toEqual([
      expect.objectContaining({ action: 'auth.login.failed', outcome: 'failure', targetId: 'mallory-sub', details: { reason: 'identity-not-linked', authenticator: 'oidc-access-token', username: 'mallory-sub' } }),
    ]);
    const later = Date.now() + 31_000;
    const clock = jest.spyOn(Date, 'now').mockReturnValue(later);
    try {
      expect(verifier.verifyCached(token)).toBe('miss');
      expect(await verifier.verify(token)).toBeNull();
      expect(attached).toHaveLength(2);
    } finally {
      clock.mockRestore();
    }
  });
});
