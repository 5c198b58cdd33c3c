/**
 * Resource-server mode (docs/oidc.md, `iam.oidc.accept-access-tokens`): `Authorization: Bearer <JWT>` from the
 * OpenID Provider (oidc-provider in its own process) is verified against its JWKS; the principal comes from the
 * claims; authorization, policies, the headers the host receives and diagnostics are those of a session. Forged,
 * expired, `alg: none`, HMAC-with-the-public-key and wrong-audience tokens are refused; a disabled user's tokens stop.
 * #28: "revoke every session" refuses every token issued before it, also one first presented afterwards — on this
 * instance, on a second one sharing Redis and PostgreSQL, and on a gateway started afterwards on the same database.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair } from 'jose';
import type { RunningGateway } from '../../src/app/start-gateway';
import { describeWithRedis, uniquePrefix } from '../support/env';
import { freePort } from '../support/front-proxy';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { startTestOp, type TestOp } from '../support/oidc-op';
import { recordedHeader } from '../support/recording-upstream';
import { until } from '../support/wait';

const API = 'https://api.example.test';
const CALLBACK = 'http://127.0.0.1:1/app-callback';

let op: TestOp;
let fixture: GatewayWithUpstream;
let gw: string;
let discovery: { authorization_endpoint: string; token_endpoint: string };
/** One token-store prefix for every gateway of this file: a second instance shares the first one's events. */
const PREFIX = uniquePrefix('oidc-at');
/** The configuration of every gateway of this file (the fixture's, a second instance, a restarted one). */
const overrides = (): Record<string, string> => ({
  IAM_POLICIES_DIR: E2E_POLICIES,
  IAM_OIDC_ISSUER: op.issuer,
  IAM_OIDC_ACCEPT_ACCESS_TOKENS: 'true',
  IAM_OIDC_AUDIENCE: API,
  IAM_OIDC_USERS: 'existing',
  IAM_OIDC_CLIENT_ID: 'iam-gateway',
  IAM_TOKEN_STORE_PREFIX: PREFIX,
});

beforeAll(async () => {
  op = await startTestOp({
    clients: [
      // A single-page or mobile app of the team: it gets access tokens for the API from the provider.
      { client_id: 'app', client_secret: 'app-secret', redirect_uris: [CALLBACK], grant_types: ['authorization_code'], response_types: ['code'] },
    ],
    accounts: { alice: { sub: 'u-alice', password: 'alice-password' }, bob: { sub: 'u-bob', password: 'bob-password' } },
    resourceAudience: API,
  });
  fixture = await startGatewayWithUpstream(overrides());
  gw = fixture.gateway.url;
  discovery = (await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json()) as typeof discovery;
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await op?.close();
});
beforeEach(() => fixture.upstream.clear());

/** What the app does: the code flow with `resource=API`, then the access token (a JWT for the API). */
async function accessToken(user: 'alice' | 'bob'): Promise<string> {
  const verifier = randomBytes(32).toString('base64url');
  const url = new URL(discovery.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: 'app',
    response_type: 'code',
    redirect_uri: CALLBACK,
    scope: 'openid api:read',
    resource: API,
    state: randomBytes(8).toString('hex'),
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  const callback = new URL(await op.loginThrough(url.href, user, `${user}-password`, CALLBACK));
  const response = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from('app:app-secret').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: CALLBACK, code_verifier: verifier }),
  });
  return ((await response.json()) as { access_token: string }).access_token;
}

const now = (): number => Math.floor(Date.now() / 1000);
const claims = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ iss: op.issuer, aud: API, sub: 'u-alice', iat: now(), exp: now() + 300, ...extra });
const status = async (token: string, path = '/api/projects', base = gw): Promise<number> => (await fetch(`${base}${path}`, { headers: bearer(token) })).status;

describe('a JWT access token from the provider', () => {
  it('is authorized exactly like a session: the same decision, and the host sees the same identity, never the token', async () => {
    const token = await accessToken('alice');
    expect(token.split('.')).toHaveLength(3);
    expect(await status(token)).toBe(200);
    const [seen] = await fixture.upstream.requests();
    expect(recordedHeader(seen!, 'x-iam-user-id')).toEqual(['u-alice']);
    expect(recordedHeader(seen!, 'x-iam-identity-id')).toEqual(['oidc:u-alice']);
    expect(recordedHeader(seen!, 'x-iam-session-id')[0]).toMatch(/^at:/);
    expect(recordedHeader(seen!, 'authorization')).toEqual([]);
    // Same profile, same denials as alice's session (the e2e policies deny her the admin area).
    const session = (await login(gw, 'alice', 'alice-password', 'API')).accessToken;
    for (const path of ['/api/projects', '/api/admin/stats', '/api/projects/2']) expect([path, await status(token, path)]).toEqual([path, await status(session, path)]);
  });

  it('serves /iam/auth/me and diagnostics; cannot be logged out or switched (it is not a gateway session)', async () => {
    const token = await accessToken('alice');
    const me = (await (await fetch(`${gw}/iam/auth/me`, { headers: bearer(token) })).json()) as Record<string, unknown>;
    expect(me).toMatchObject({ userId: 'u-alice', identityId: 'oidc:u-alice', identityDomain: op.issuer });
    const explained = await fetch(`${gw}/iam/authorization/diagnostics`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ method: 'GET', path: '/api/projects' }) });
    expect(((await explained.json()) as { allowed: boolean }).allowed).toBe(true);
    const logout = await fetch(`${gw}/iam/auth/logout`, { method: 'POST', headers: bearer(token) });
    expect([logout.status, ((await logout.json()) as { code: string }).code]).toEqual([400, 'IAM_BAD_REQUEST']);
    expect(await status(token)).toBe(200);
  });

  it('is refused when forged, expired, not yet valid, for another audience or issuer, alg none, or HMAC with the public key', async () => {
    const stranger = await generateKeyPair('RS256', { extractable: true });
    const strangerKey = { ...(await exportJWK(stranger.privateKey)), kid: op.jwks.keys[0]!.kid, alg: 'RS256' };
    const publicKey = { ...op.jwks.keys[0]! };
    delete publicKey.d;
    const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
    const hmac = `${encode({ alg: 'HS256', kid: publicKey.kid })}.${encode(claims())}`;
    const cases: Array<[string, string]> = [
      ['another key with the same kid', await op.sign(claims(), {}, strangerKey)],
      ['expired beyond the tolerance', await op.sign(claims({ exp: now() - 120 }))],
      ['not valid yet', await op.sign(claims({ nbf: now() + 600 }))],
      ['another audience', await op.sign(claims({ aud: 'https://other.example.test' }))],
      ['another issuer', await op.sign(claims({ iss: 'https://evil.test' }))],
      ['no exp', await op.sign({ ...claims(), exp: undefined })],
      // #28: iat decides a revocation (RFC 9068 §2.2 requires it); without it no token could be told from an older one.
      ['no iat', await op.sign({ ...claims(), iat: undefined })],
      ['alg none', `${encode({ alg: 'none' })}.${encode(claims())}.`],
      ['HMAC with the public key', `${hmac}.${createHmac('sha256', JSON.stringify(publicKey)).update(hmac).digest('base64url')}`],
      ['a user the gateway does not know (users: existing)', await op.sign(claims({ sub: 'u-stranger' }))],
      ['a sub that cannot travel in a header', await op.sign(claims({ sub: 'u alice' }))],
    ];
    for (const [name, token] of cases) expect([name, await status(token)]).toEqual([name, 401]);
    // The control: the same claims, signed by the provider, pass.
    expect(await status(await op.sign(claims()))).toBe(200);
    expect(await fixture.upstream.requests()).toHaveLength(1);
  });

  it('stops at once for a user whose sessions are all revoked (the session epoch), on the cached path too', async () => {
    const token = await accessToken('bob');
    expect(await status(token)).toBe(200);
    await fixture.gateway.services!.sessions.revokeUser('u-bob', 'admin_revoke', 'u-admin', { requestId: 'test', clientAddress: null });
    expect(await status(token)).toBe(401);
  });

  it("fails closed with 502 IAM_IDP_UNAVAILABLE when the provider's keys cannot be fetched (never a guess)", async () => {
    let orphan: RunningGateway | null = null;
    try {
      orphan = await startTestGateway(fixture.upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_OIDC_ISSUER: `http://127.0.0.1:${await freePort()}`, IAM_OIDC_ACCEPT_ACCESS_TOKENS: 'true', IAM_OIDC_AUDIENCE: API });
      const answer = await fetch(`${orphan.url}/api/projects`, { headers: bearer(await op.sign(claims())) });
      expect([answer.status, ((await answer.json()) as { code: string }).code]).toEqual([502, 'IAM_IDP_UNAVAILABLE']);
      expect(await fixture.upstream.requests()).toEqual([]);
    } finally {
      await orphan?.close();
    }
  });

  it('is refused unless accept-access-tokens is on: a JWT is then just an invalid token', async () => {
    let plain: RunningGateway | null = null;
    try {
      plain = await startTestGateway(fixture.upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_OIDC_ISSUER: op.issuer });
      const answer = await fetch(`${plain.url}/api/projects`, { headers: bearer(await op.sign(claims())) });
      expect(answer.status).toBe(401);
    } finally {
      await plain?.close();
    }
  });
});

describe('#28 revocation is decided by time, not by first use', () => {
  /** The latest revocation instant of this describe (epoch ms), as the admin API reports it. */
  let lastRevokedAt = 0;

  /** `POST /iam/admin/users/{id}/sessions/revoke` through `base`; resolves the user's revocation instant (`GET` the user). */
  async function revokeAll(base: string, userId: string): Promise<number> {
    const admin = (await login(base, 'admin')).accessToken;
    const answer = await fetch(`${base}/iam/admin/users/${userId}/sessions/revoke`, { method: 'POST', headers: bearer(admin) });
    expect(answer.status).toBe(200);
    const user = (await (await fetch(`${base}/iam/admin/users/${userId}`, { headers: bearer(admin) })).json()) as { sessionsRevokedAt: string | null };
    expect(user.sessionsRevokedAt).not.toBeNull();
    lastRevokedAt = Date.parse(user.sessionsRevokedAt!);
    return lastRevokedAt;
  }

  /**
   * A token the provider issues after the latest revocation: `iat` has whole seconds, so this waits (on the clock the
   * provider shares with this machine) for the first second that begins after the revocation instant.
   */
  async function freshAccessToken(user: 'alice' | 'bob'): Promise<string> {
    const next = (Math.floor(lastRevokedAt / 1000) + 1) * 1000;
    await until('the first whole second after the latest revocation', () => Date.now() >= next);
    return accessToken(user);
  }

  it('#28: a token issued before "revoke every session" and first presented after it is refused; one issued after is accepted', async () => {
    const unseen = await accessToken('bob');
    await revokeAll(gw, 'u-bob');
    expect(await status(unseen)).toBe(401);
    expect(await status(await freshAccessToken('bob'))).toBe(200);
    expect(await status(unseen)).toBe(401);
  });

  it('#28: a user disabled and enabled again: the tokens issued before the disable stay refused (the disable ended every session)', async () => {
    const unseen = await freshAccessToken('bob');
    const admin = (await login(gw, 'admin')).accessToken;
    const put = (enabled: boolean): Promise<Response> =>
      fetch(`${gw}/iam/admin/users/u-bob`, { method: 'PUT', headers: { ...bearer(admin), 'content-type': 'application/json' }, body: JSON.stringify({ enabled }) });
    const disabled = await put(false);
    expect(disabled.status).toBe(200);
    const { sessionsRevokedAt } = (await disabled.json()) as { sessionsRevokedAt: string | null };
    expect(Date.parse(sessionsRevokedAt ?? '')).toBeGreaterThan(lastRevokedAt);
    lastRevokedAt = Date.parse(sessionsRevokedAt!);
    expect((await put(true)).status).toBe(200);
    expect(await status(unseen)).toBe(401);
    expect(await status(await freshAccessToken('bob'))).toBe(200);
  });

  it('#28: a gateway started afterwards on the same database refuses it too (the instant is read from PostgreSQL)', async () => {
    let token = '';
    const first = await startTestGateway(fixture.upstream.url, overrides());
    try {
      token = await freshAccessToken('bob');
      await revokeAll(first.url, 'u-bob');
    } finally {
      await first.close();
    }
    const restarted = await startTestGateway(fixture.upstream.url, overrides());
    try {
      expect(await status(token, '/api/projects', restarted.url)).toBe(401);
      expect(await status(await freshAccessToken('bob'), '/api/projects', restarted.url)).toBe(200);
    } finally {
      await restarted.close();
    }
  });

  describeWithRedis('#28 on a second instance sharing Redis and PostgreSQL', () => {
    it('#28: revoked through A, B refuses the token whether it never saw it or had it cached; a token issued after works on B', async () => {
      const b = await startTestGateway(fixture.upstream.url, overrides());
      try {
        const unseen = await freshAccessToken('bob');
        const cached = await accessToken('bob');
        expect(await status(cached, '/api/projects', b.url)).toBe(200);
        await revokeAll(gw, 'u-bob');
        expect(await status(unseen, '/api/projects', b.url)).toBe(401);
        expect(await status(cached, '/api/projects', b.url)).toBe(401);
        expect(await status(await freshAccessToken('bob'), '/api/projects', b.url)).toBe(200);
      } finally {
        await b.close();
      }
    });
  });
});
