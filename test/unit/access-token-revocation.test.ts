/**
 * #28 item 3: a provider access token issued before "revoke every session" is refused whenever it is first presented
 * (src/auth/oidc/access-tokens.ts with the revocation registry's time rule). The provider is a stub answering fixed
 * claims; every instant is fixed, none is read from the clock.
 */
import type { JWTPayload } from 'jose';
import { AccessTokenVerifier } from '../../src/auth/oidc/access-tokens';
import type { RelyingParty } from '../../src/auth/oidc/relying-party';
import type { IdentityRecord, UserRecord } from '../../src/domain/records';
import { RevocationRegistry } from '../../src/sessions/revocation-registry';

const ISSUER = 'https://idp.example.test';
const REVOKED_AT = Date.parse('2030-01-01T12:00:00.500Z');
const seconds = (iso: string): number => Date.parse(`2030-01-01T${iso}Z`) / 1000;
/** A compact JWS typed as an access token (RFC 9068) naming `name`: the stub provider maps it to its claims. */
const jwt = (name: string): string => `${Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'at+jwt' })).toString('base64url')}.${Buffer.from(name).toString('base64url')}.c2ln`;
/** Far enough ahead that the verifier's own expiry check never decides. */
const EXP = Math.floor(Date.now() / 1000) + 3600;

/** A verifier over a stub provider (token → claims) and a repository holding one user, `u-alice`. */
function verifierWith(user: Partial<UserRecord>, revocations = new RevocationRegistry(60_000)): { verifier: AccessTokenVerifier; revocations: RevocationRegistry; tokens: Map<string, JWTPayload> } {
  const tokens = new Map<string, JWTPayload>();
  const rp = {
    issuer: ISSUER,
    verifyJwt: (token: string) => {
      const claims = tokens.get(token);
      return claims ? Promise.resolve(claims) : Promise.reject(new Error('bad token'));
    },
  } as unknown as RelyingParty;
  const stored: UserRecord = { userId: 'u-alice', displayName: null, enabled: true, authorizationVersion: 0, createdAt: new Date(0), updatedAt: new Date(0), version: 1, ...user };
  const identity: IdentityRecord = { identityId: 'oidc:alice', userId: 'u-alice', identityDomain: ISSUER, enabled: true, version: 1 };
  const verifier = new AccessTokenVerifier({
    rp,
    audience: 'api',
    claims: { userId: 'user_id', identityDomain: null, profile: null, users: 'existing', linkBy: 'none' },
    clientType: 'API',
    repository: {
      getUser: () => Promise.resolve(stored),
      ensurePrincipal: () => Promise.resolve({ user: stored, identity }),
      listProfiles: () => Promise.resolve([]),
    },
    revocations,
    maxEntries: 100,
    types: ['at+jwt'],
    audit: { record: () => undefined },
  });
  return { verifier, revocations, tokens };
}

const claimsIssuedAt = (iso: string): JWTPayload => ({ iss: ISSUER, aud: 'api', sub: 'alice', user_id: 'u-alice', iat: seconds(iso), exp: EXP });

describe('#28 provider access tokens and "revoke every session"', () => {
  it('#28: a token issued before the revocation and first presented after it is refused; one issued after it is accepted', async () => {
    // This instance heard the revocation (the epoch raised to 1 at 12:00:00.5) and the database says the same.
    const registry = new RevocationRegistry(60_000);
    registry.apply({ type: 'user-sessions-ended', userId: 'u-alice', reason: 'revoked_by_admin', sessionEpoch: 1, revokedAt: new Date(REVOKED_AT).toISOString() });
    const { verifier, tokens } = verifierWith({ sessionEpoch: 1, sessionsRevokedAt: new Date(REVOKED_AT) }, registry);
    tokens.set(jwt('before'), claimsIssuedAt('11:59:30.000'));
    tokens.set(jwt('same-second'), claimsIssuedAt('12:00:00.000'));
    tokens.set(jwt('after'), claimsIssuedAt('12:00:01.000'));
    await expect(verifier.verify(jwt('before'))).resolves.toBeNull();
    await expect(verifier.verify(jwt('same-second'))).resolves.toBeNull();
    const after = await verifier.verify(jwt('after'));
    expect(after?.record).toMatchObject({ source: 'access-token', createdAt: new Date(seconds('12:00:01.000') * 1000).toISOString(), sessionEpoch: 1 });
  });

  it('#28: the revocation the database committed before its event reached this instance refuses the token at its first verification', async () => {
    const { verifier, revocations, tokens } = verifierWith({ sessionEpoch: 1, sessionsRevokedAt: new Date(REVOKED_AT) });
    tokens.set(jwt('before'), claimsIssuedAt('11:59:30.000'));
    tokens.set(jwt('after'), claimsIssuedAt('12:00:01.000'));
    await expect(verifier.verify(jwt('before'))).resolves.toBeNull();
    expect(await verifier.verify(jwt('after'))).not.toBeNull();
    // What the database said is now this instance's: the epoch too.
    expect(revocations.epochOf('u-alice')).toBe(1);
  });

  it('#28: a token cached before the revocation is refused after it, on the cached path, also when only the instant is known yet', async () => {
    const { verifier, revocations, tokens } = verifierWith({ sessionEpoch: 0 });
    tokens.set(jwt('cached'), claimsIssuedAt('11:59:30.000'));
    expect(await verifier.verify(jwt('cached'))).not.toBeNull();
    expect(verifier.verifyCached(jwt('cached'))).not.toBe('miss');
    // The revoking instance's first event (before the database recorded the epoch) carries the instant alone.
    revocations.apply({ type: 'user-sessions-ended', userId: 'u-alice', reason: 'revoked_by_admin', revokedAt: new Date(REVOKED_AT).toISOString() });
    expect(verifier.verifyCached(jwt('cached'))).toBeNull();
    await expect(verifier.verify(jwt('cached'))).resolves.toBeNull();
  });

  it('#28: an iat no Date can hold is not a token (never a RangeError)', async () => {
    const { verifier, tokens } = verifierWith({});
    tokens.set(jwt('huge'), { ...claimsIssuedAt('12:00:01.000'), iat: 1e300 });
    await expect(verifier.verify(jwt('huge'))).resolves.toBeNull();
  });
});
