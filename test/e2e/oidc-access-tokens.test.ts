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
      // A client whose id is the API's audience (the API signing its own users in): its ID tokens carry aud = API.
      { client_id: API, client_secret: 'api-secret', redirect_uris: [CALLBACK], grant_types: ['authorization_code'], response_types: ['code'] },
    ],
    accounts: { alice: { sub: 'u-alice', password: 'alice-password' }, bob: { sub: 'u-bob', password: 'bob-password' } },
    resourceAudience: API,
  });
  fixture = await startGatewayWithUpstream(overrides(), { keepDatabase: true });
  gw = fixture.gateway.url;
  // u-alice and u-bob exist (the example provisioning); an admin linked their accounts at this provider.
  await fixture.gateway.services!.repository.applyProvisioning({
    users: ['u-alice', 'u-bob'].map((userId) => ({ userId, identities: [{ identityId: `oidc:${userId}`, identityDomain: op.issuer }] })),
  });
  discovery = (await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json()) as typeof discovery;
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await op?.close();
});
beforeEach(() => fixture.upstream.clear());

/** The code flow of `client` for `user` (with PKCE; `resource=API` when asked): the token endpoint's answer. */
async function codeFlow(user: 'alice' | 'bob', client: { id: string; secret: string }, resource: boolean): Promise<{ access_token: string; id_token: string }> {
  const verifier = randomBytes(32).toString('base64url');
  const url = new URL(discovery.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: client.id,
    response_type: 'code',
    redirect_uri: CALLBACK,
    scope: resource ? 'openid api:read' : 'openid',
    ...(resource ? { resource: API } : {}),
    state: randomBytes(8).toString('hex'),
    nonce: randomBytes(8).toString('hex'),
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  const callback = new URL(await op.loginThrough(url.href, user, `${user}-password`, CALLBACK));
  const response = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.id)}:${client.secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: CALLBACK, code_verifier: verifier }),
  });
  return (await response.json()) as { access_token: string; id_token: string };
}

/** What the app does: the code flow with `resource=API`, then the access token (a JWT for the API). */
async function accessToken(user: 'alice' | 'bob'): Promise<string> {
  return (await codeFlow(user, { id: 'app', secret: 'app-secret' }, true)).access_token;
}

/** A JWT's protected header and payload, as sent (no verification). */
const decoded = (jwt: string): [Record<string, unknown>, Record<string, unknown>] =>
  jwt.split('.').slice(0, 2).map((part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>) as [Record<string, unknown>, Record<string, unknown>];

const now = (): number => Math.floor(Date.now() / 1000);
const claims = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ iss: op.issuer, aud: API, sub: 'u-alice', iat: now(), exp: now() + 300, ...extra });
/** Signed by the provider's key and typed as an access token (RFC 9068), like the provider's own. */
const signAt = (payload: Record<string, unknown>, key?: Parameters<TestOp['sign']>[2]): Promise<string> => op.sign(payload, { typ: 'at+jwt' }, key);
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
    const hmac = `${encode({ alg: 'HS256', kid: publicKey.kid, typ: 'at+jwt' })}.${encode(claims())}`;
    const cases: Array<[string, string]> = [
      ['another key with the same kid', await signAt(claims(), strangerKey)],
      ['expired beyond the tolerance', await signAt(claims({ exp: now() - 120 }))],
      ['not valid yet', await signAt(claims({ nbf: now() + 600 }))],
      ['another audience', await signAt(claims({ aud: 'https://other.example.test' }))],
      ['another issuer', await signAt(claims({ iss: 'https://evil.test' }))],
      ['no exp', await signAt({ ...claims(), exp: undefined })],
      // #28: iat decides a revocation (RFC 9068 §2.2 requires it); without it no token could be told from an older one.
      ['no iat', await signAt({ ...claims(), iat: undefined })],
      ['alg none', `${encode({ alg: 'none', typ: 'at+jwt' })}.${encode(claims())}.`],
      ['HMAC with the public key', `${hmac}.${createHmac('sha256', JSON.stringify(publicKey)).update(hmac).digest('base64url')}`],
      ['a user the gateway does not know (users: existing)', await signAt(claims({ sub: 'u-stranger' }))],
      ['a sub that cannot travel in a header', await signAt(claims({ sub: 'u alice' }))],
    ];
    for (const [name, token] of cases) expect([name, await status(token)]).toEqual([name, 401]);
    // The control: the same claims, signed by the provider, pass.
    expect(await status(await signAt(claims()))).toBe(200);
    expect(await fixture.upstream.requests()).toHaveLength(1);
  });

  it('is refused unless typed as an access token: a real ID token, a logout token, an untyped or typ JWT token (RFC 8725 §3.11, RFC 9068)', async () => {
    // A real ID token for the API's audience (the client whose id it is): the provider's signature, iss, aud and exp all pass.
    const { id_token: idToken } = await codeFlow('alice', { id: API, secret: 'api-secret' }, false);
    const [idHeader, idClaims] = decoded(idToken);
    expect([idHeader.typ ?? null, idClaims.aud, idClaims.sub]).toEqual([null, API, 'u-alice']);
    const logoutEvent = { 'http://schemas.openid.net/event/backchannel-logout': {} };
    const cases: Array<[string, string]> = [
      ['a real ID token', idToken],
      ['a logout token', await op.sign(claims({ jti: randomBytes(8).toString('hex'), events: logoutEvent }), { typ: 'logout+jwt' })],
      ['a logout token typed at+jwt', await signAt(claims({ jti: randomBytes(8).toString('hex'), events: logoutEvent }))],
      ['an ID token typed at+jwt', await signAt(claims({ nonce: 'n-1', at_hash: 'x' }))],
      ['no typ', await op.sign(claims())],
      ['typ JWT', await op.sign(claims(), { typ: 'JWT' })],
    ];
    for (const [name, token] of cases) expect([name, await status(token)]).toEqual([name, 401]);
    // The controls: the provider's own access token (typ at+jwt), and the other spelling of the type.
    const real = await accessToken('alice');
    expect(decoded(real)[0].typ).toBe('at+jwt');
    expect(await status(real)).toBe(200);
    expect(await status(await op.sign(claims(), { typ: 'application/at+jwt' }))).toBe(200);
    expect(await fixture.upstream.requests()).toHaveLength(2);
  });

  it('does not attach a provider account nobody linked to the existing user it names; audited once; an admin links it', async () => {
    // u-carol exists (the example provisioning: a profile, her own users-file identity) and was never linked here.
    const token = await signAt(claims({ sub: 'u-carol' }));
    expect(await status(token)).toBe(401);
    expect(await status(token)).toBe(401);
    expect(await fixture.gateway.services!.repository.getIdentity('oidc:u-carol')).toBeNull();
    await fixture.gateway.services!.audit.flush();
    const rows = await fixture.db!.orm.em.fork().execute<Array<{ details: { reason: string } }>>(
      "select details from iam_audit_events where action = 'auth.login.failed' and target_id = 'u-carol' and details->>'authenticator' = 'oidc-access-token'",
    );
    expect(rows.map((row) => row.details.reason)).toEqual(['identity-not-linked']);
    // The admin API links the account (docs/oidc.md); a token of it then acts as u-carol.
    const admin = (await login(gw, 'admin', 'admin-password', 'API')).accessToken;
    const linked = await fetch(`${gw}/iam/admin/identities/${encodeURIComponent('oidc:u-carol')}`, {
      method: 'PUT',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'u-carol', identityDomain: op.issuer, enabled: true }),
    });
    expect(linked.status).toBe(201);
    // Another token: the refused one stays refused for up to 30 s (its refusal is remembered, docs/oidc.md).
    expect(await status(token)).toBe(401);
    const fresh = await signAt(claims({ sub: 'u-carol', jti: randomBytes(8).toString('hex') }));
    expect((await (await fetch(`${gw}/iam/auth/me`, { headers: bearer(fresh) })).json()) as Record<string, unknown>).toMatchObject({ userId: 'u-carol', identityId: 'oidc:u-carol' });
  });

  it('refuses to start with accept-access-tokens and no audience of its own (the client id is the aud of ID tokens)', async () => {
    const settings = { IAM_POLICIES_DIR: E2E_POLICIES, IAM_OIDC_ISSUER: op.issuer, IAM_OIDC_ACCEPT_ACCESS_TOKENS: 'true', IAM_OIDC_CLIENT_ID: 'iam-gateway' };
    await expect(startTestGateway(fixture.upstream.url, settings)).rejects.toThrow(/iam\.oidc\.audience is required when iam\.oidc\.accept-access-tokens is true/);
    await expect(startTestGateway(fixture.upstream.url, { ...settings, IAM_OIDC_AUDIENCE: 'iam-gateway' })).rejects.toThrow(/iam\.oidc\.audience: must differ from iam\.oidc\.client-id/);
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
      const answer = await fetch(`${orphan.url}/api/projects`, { headers: bearer(await signAt(claims())) });
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
      const answer = await fetch(`${plain.url}/api/projects`, { headers: bearer(await signAt(claims())) });
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
