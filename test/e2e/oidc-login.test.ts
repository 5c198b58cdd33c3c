/**
 * OpenID Connect login (docs/oidc.md) against a real OpenID Provider (oidc-provider in its own process,
 * test/support/oidc-op.ts): the authorization code flow with PKCE, state and nonce through the gateway's
 * /iam/auth/oidc/login and /callback; the session cookie it sets works like any session; every tampered, replayed
 * or refused step is answered clearly and creates no session; RP-initiated logout; a provider that is down or slow.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunningGateway } from '../../src/app/start-gateway';
import { freePort } from '../support/front-proxy';
import { startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { exportJWK, generateKeyPair } from 'jose';
import { CookieJar, startTestOp, type TestOp } from '../support/oidc-op';
import { recordedHeader } from '../support/recording-upstream';

const CLIENT = { id: 'iam-gateway', secret: 'gateway-secret-for-tests' };
const ACCOUNTS = {
  alice: { sub: 'u-alice', password: 'alice-password', claims: { name: 'Alice', email: 'alice@example.test' } },
  eve: { sub: 'u-eve', password: 'eve-password' },
  newcomer: { sub: 'u-newcomer', password: 'newcomer-password', claims: { name: 'New Comer' } },
  stranger: { sub: 'u-stranger', password: 'stranger-password' },
  bob: { sub: 'u-bob', password: 'bob-password' },
  admin: { sub: 'u-admin', password: 'admin-password' },
};

let op: TestOp;
let fixture: GatewayWithUpstream;
let gw: string;

/** The gateway's settings for this OP (the redirect and back-channel URIs name the gateway's port). */
function oidcSettings(issuer: string, port: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: String(port),
    IAM_POLICIES_DIR: E2E_POLICIES,
    IAM_AUTHENTICATOR_TYPE: 'oidc',
    IAM_OIDC_ISSUER: issuer,
    IAM_OIDC_CLIENT_ID: CLIENT.id,
    IAM_OIDC_CLIENT_SECRET: CLIENT.secret,
    IAM_OIDC_REDIRECT_URI: `http://127.0.0.1:${port}/iam/auth/oidc/callback`,
    IAM_OIDC_POST_LOGOUT_REDIRECT_URI: `http://127.0.0.1:${port}/logged-out`,
    ...extra,
  };
}

beforeAll(async () => {
  const port = await freePort();
  op = await startTestOp({
    clients: [
      {
        client_id: CLIENT.id,
        client_secret: CLIENT.secret,
        redirect_uris: [`http://127.0.0.1:${port}/iam/auth/oidc/callback`],
        post_logout_redirect_uris: [`http://127.0.0.1:${port}/logged-out`],
        backchannel_logout_uri: `http://127.0.0.1:${port}/iam/auth/oidc/backchannel-logout`,
        backchannel_logout_session_required: true,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    accounts: ACCOUNTS,
  });
  fixture = await startGatewayWithUpstream(oidcSettings(op.issuer, port), { keepDatabase: true });
  gw = fixture.gateway.url;
  // u-alice and u-bob exist (the example provisioning, with their users-file identities): their provider accounts
  // join them because an admin linked them, as docs/oidc.md tells admins to.
  await linkAccounts(fixture.gateway, op.issuer, [
    ['u-alice', 'u-alice'],
    ['u-bob', 'u-bob'],
  ]);
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await op?.close();
});
beforeEach(() => fixture.upstream.clear());

const send = (url: string, init: RequestInit = {}): Promise<Response> => fetch(url, { redirect: 'manual', ...init });
const cookieValue = (answer: Response, name: string): string | null => {
  for (const line of answer.headers.getSetCookie()) {
    const [pair] = line.split(';');
    const at = pair!.indexOf('=');
    if (pair!.slice(0, at) === name) return pair!.slice(at + 1);
  }
  return null;
};
const codeOf = async (answer: Response): Promise<string> => ((await answer.json()) as { code: string }).code;

/** What an admin or provisioning does so that a provider account (its `sub`) signs in as a user the gateway has. */
async function linkAccounts(gateway: RunningGateway, issuer: string, links: Array<[sub: string, userId: string]>): Promise<void> {
  await gateway.services!.repository.applyProvisioning({ users: links.map(([sub, userId]) => ({ userId, identities: [{ identityId: `oidc:${sub}`, identityDomain: issuer }] })) });
}

/** The `auth.login.failed` reasons audited for the request of `answer` (flushed first). */
async function refusalReasons(gateway: RunningGateway, answer: Response): Promise<string[]> {
  await gateway.services!.audit.flush();
  const rows = await fixture.db!.orm.em.fork().execute<Array<{ details: { reason: string } }>>(
    "select details from iam_audit_events where action = 'auth.login.failed' and request_id = ?",
    [answer.headers.get('x-request-id')],
  );
  return rows.map((row) => row.details.reason);
}

/** Starts a login at the gateway: the provider's authorization URL and the sealed state cookie. */
async function begin(of = gw, returnTo = '/api/projects'): Promise<{ authorizationUrl: string; stateCookie: string }> {
  const started = await send(`${of}/iam/auth/oidc/login?returnTo=${encodeURIComponent(returnTo)}`);
  expect(started.status).toBe(302);
  return { authorizationUrl: started.headers.get('location')!, stateCookie: cookieValue(started, '__Host-iam-oidc')! };
}

/** A whole login: begin, sign in at the provider, come back. Resolves the callback's answer. */
async function signIn(user: keyof typeof ACCOUNTS, jar = new CookieJar(), returnTo = '/api/projects'): Promise<{ answer: Response; callback: string; stateCookie: string }> {
  const { authorizationUrl, stateCookie } = await begin(gw, returnTo);
  const callback = await op.loginThrough(authorizationUrl, user, ACCOUNTS[user].password, `${gw}/iam/auth/oidc/callback`, jar);
  const answer = await send(callback, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
  return { answer, callback, stateCookie };
}

describe('the OpenID Connect login', () => {
  it('sends the browser to the provider with PKCE S256, state and nonce, binding the callback to a sealed cookie', async () => {
    const started = await send(`${gw}/iam/auth/oidc/login?returnTo=%2Fapi%2Fprojects`);
    expect(started.status).toBe(302);
    const url = new URL(started.headers.get('location')!);
    expect(url.origin).toBe(op.issuer);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      client_id: CLIENT.id,
      response_type: 'code',
      redirect_uri: `${gw}/iam/auth/oidc/callback`,
      scope: 'openid profile email',
      code_challenge_method: 'S256',
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      state: expect.stringMatching(/.{20,}/),
      nonce: expect.stringMatching(/.{20,}/),
    });
    const cookie = started.headers.getSetCookie().find((line) => line.startsWith('__Host-iam-oidc='))!;
    expect(cookie).toMatch(/^__Host-iam-oidc=v1\.[^;]+; Max-Age=600; Path=\/; HttpOnly; SameSite=Lax; Secure$/);
    // Sealed: neither the state nor the PKCE verifier can be read from it.
    expect(cookie).not.toContain(url.searchParams.get('state')!);
  });

  it('logs in: 303 back to returnTo with the session cookie, which works like any session (the host sees the user)', async () => {
    const { answer } = await signIn('alice');
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('/api/projects');
    const token = cookieValue(answer, '__Host-iam-session')!;
    expect(token).toMatch(/^iamt_/);
    expect(answer.headers.getSetCookie()).toContain('__Host-iam-oidc=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax; Secure');
    const page = await send(`${gw}/api/projects`, { headers: { cookie: `__Host-iam-session=${token}` } });
    expect(page.status).toBe(200);
    const [seen] = await fixture.upstream.requests();
    expect(recordedHeader(seen!, 'x-iam-user-id')).toEqual(['u-alice']);
    // The provider's identity, in the provider's domain; alice's own profiles apply.
    const me = (await (await send(`${gw}/iam/auth/me`, { headers: { cookie: `__Host-iam-session=${token}` } })).json()) as Record<string, unknown>;
    expect(me).toMatchObject({ userId: 'u-alice', identityId: 'oidc:u-alice', identityDomain: op.issuer, activeProfileId: 'p-alice-editor' });
  });

  it('creates a user at first login (users: jit) who has no profile, so can do nothing yet', async () => {
    const { answer } = await signIn('newcomer');
    expect(answer.status).toBe(303);
    const token = cookieValue(answer, '__Host-iam-session')!;
    const me = (await (await send(`${gw}/iam/auth/me`, { headers: { cookie: `__Host-iam-session=${token}` } })).json()) as Record<string, unknown>;
    expect(me).toMatchObject({ userId: 'u-newcomer', displayName: 'New Comer', activeProfileId: null });
    expect((await send(`${gw}/api/projects`, { headers: { cookie: `__Host-iam-session=${token}` } })).status).toBe(403);
  });

  it('refuses a disabled user (401), with no session', async () => {
    await fixture.gateway.services!.repository.applyProvisioning({ users: [{ userId: 'u-eve', enabled: false, identities: [{ identityId: 'oidc:u-eve', identityDomain: op.issuer }] }] });
    const { answer } = await signIn('eve');
    expect([answer.status, cookieValue(answer, '__Host-iam-session')]).toEqual([401, null]);
    expect(await codeOf(answer)).toBe('IAM_INVALID_CREDENTIALS');
    expect(await refusalReasons(fixture.gateway, answer)).toEqual(['user-disabled']);
  });

  it('returnTo never leaves the gateway', async () => {
    for (const returnTo of ['//evil.test', 'https://evil.test/', '/\\evil.test']) {
      const { answer } = await signIn('alice', new CookieJar(), returnTo);
      expect([returnTo, answer.status, answer.headers.get('location')]).toEqual([returnTo, 303, '/']);
    }
  });

  it('sends /iam/login and a browser without a session to the provider; the password login answers 501', async () => {
    const page = await send(`${gw}/iam/login?returnTo=%2Fapi%2Fprojects`);
    expect([page.status, page.headers.get('location')]).toEqual([302, '/iam/auth/oidc/login?returnTo=%2Fapi%2Fprojects']);
    const navigation = await send(`${gw}/api/projects`, { headers: { accept: 'text/html' } });
    expect([navigation.status, navigation.headers.get('location')]).toEqual([302, '/iam/auth/oidc/login?returnTo=%2Fapi%2Fprojects']);
    const password = await send(`${gw}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' }) });
    expect([password.status, await codeOf(password)]).toEqual([501, 'IAM_LOGIN_NOT_CONFIGURED']);
  });
});

describe('a callback that is not the one this browser started', () => {
  it('refuses a replayed callback (the state is spent on every instance), and audits the refusal', async () => {
    const { answer, callback, stateCookie } = await signIn('alice');
    expect(answer.status).toBe(303);
    const again = await send(callback, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
    expect([again.status, await codeOf(again), cookieValue(again, '__Host-iam-session')]).toEqual([400, 'IAM_OIDC_STATE_INVALID', null]);
    const requestId = again.headers.get('x-request-id')!;
    await fixture.gateway.services!.audit.flush();
    const rows = await fixture.db!.orm.em.fork().execute<Array<{ action: string; details: { reason: string; authenticator: string } }>>(
      'select action, details from iam_audit_events where request_id = ?',
      [requestId],
    );
    expect(rows.map((row) => [row.action, row.details.reason, row.details.authenticator])).toEqual([['auth.login.failed', 'IAM_OIDC_STATE_INVALID', 'oidc']]);
  });

  it('refuses a callback without the state cookie, with a tampered one, or with the cookie of another login', async () => {
    const jar = new CookieJar();
    const { authorizationUrl, stateCookie } = await begin();
    const callback = await op.loginThrough(authorizationUrl, 'alice', 'alice-password', `${gw}/iam/auth/oidc/callback`, jar);
    const other = await begin();
    const [head, iv, body, tag] = stateCookie.split('.');
    // The second-to-last character changes (the last may carry only padding bits a decoder ignores), always to
    // another one: choosing by the last character left it unchanged one time in 64, and the "tampered" cookie was the real one.
    const flipped = `${head}.${iv}.${body!.slice(0, -2)}${body!.at(-2) === 'A' ? 'B' : 'A'}${body!.slice(-1)}.${tag}`;
    expect(flipped).not.toBe(stateCookie);
    for (const cookie of ['', `__Host-iam-oidc=${flipped}`, `__Host-iam-oidc=${other.stateCookie}`, '__Host-iam-oidc=v1.garbage']) {
      const refused = await send(callback, { headers: cookie ? { cookie } : {} });
      expect([cookie, refused.status, await codeOf(refused), cookieValue(refused, '__Host-iam-session')]).toEqual([cookie, 400, 'IAM_OIDC_STATE_INVALID', null]);
    }
    // The real one still works: the refusals spent nothing.
    expect((await send(callback, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } })).status).toBe(303);
  });

  it('refuses a tampered state or code, and a provider error, with 400/401 and no session', async () => {
    const jar = new CookieJar();
    const { authorizationUrl, stateCookie } = await begin();
    const callback = new URL(await op.loginThrough(authorizationUrl, 'alice', 'alice-password', `${gw}/iam/auth/oidc/callback`, jar));
    const withState = new URL(callback);
    withState.searchParams.set('state', 'forged-state');
    const forgedState = await send(withState.href, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
    expect([forgedState.status, await codeOf(forgedState)]).toEqual([400, 'IAM_OIDC_STATE_INVALID']);

    const { authorizationUrl: second, stateCookie: secondCookie } = await begin();
    const callback2 = new URL(await op.loginThrough(second, 'alice', 'alice-password', `${gw}/iam/auth/oidc/callback`, jar));
    callback2.searchParams.set('code', `${callback2.searchParams.get('code')}x`);
    const forgedCode = await send(callback2.href, { headers: { cookie: `__Host-iam-oidc=${secondCookie}` } });
    expect([forgedCode.status, await codeOf(forgedCode), cookieValue(forgedCode, '__Host-iam-session')]).toEqual([401, 'IAM_OIDC_LOGIN_FAILED', null]);

    const { authorizationUrl: third, stateCookie: thirdCookie } = await begin();
    const state = new URL(third).searchParams.get('state')!;
    const denied = await send(`${gw}/iam/auth/oidc/callback?error=access_denied&error_description=${encodeURIComponent('<b>no</b>')}&state=${state}&iss=${encodeURIComponent(op.issuer)}`, {
      headers: { cookie: `__Host-iam-oidc=${thirdCookie}`, accept: 'text/html' },
    });
    expect(denied.status).toBe(401);
    const html = await denied.text();
    expect(html).toContain('access_denied');
    expect(html).toContain('&lt;b&gt;no&lt;/b&gt;');
    expect(html).toContain('<a href="/iam/login">Sign in again</a>');
    expect(denied.headers.get('content-security-policy')).toMatch(/^default-src 'none'/);
  });

  it('refuses the code of another login (its PKCE verifier and nonce are not this browser\'s)', async () => {
    const jar = new CookieJar();
    const first = await begin();
    const second = await begin();
    const callback = new URL(await op.loginThrough(first.authorizationUrl, 'alice', 'alice-password', `${gw}/iam/auth/oidc/callback`, jar));
    // An attacker's callback (code + state of the first login) delivered to a browser that started the second.
    const swapped = await send(callback.href, { headers: { cookie: `__Host-iam-oidc=${second.stateCookie}` } });
    expect([swapped.status, await codeOf(swapped)]).toEqual([400, 'IAM_OIDC_STATE_INVALID']);
  });
});

describe('logout', () => {
  it('ends the session here, clears the cookie and sends the browser to the provider\'s end_session_endpoint', async () => {
    const jar = new CookieJar();
    const { answer } = await signIn('alice', jar);
    const token = cookieValue(answer, '__Host-iam-session')!;
    const out = await send(`${gw}/iam/auth/oidc/logout`, { headers: { cookie: `__Host-iam-session=${token}` } });
    expect(out.status).toBe(302);
    const endSession = new URL(out.headers.get('location')!);
    expect(endSession.origin).toBe(op.issuer);
    expect(Object.fromEntries(endSession.searchParams)).toMatchObject({ client_id: CLIENT.id, post_logout_redirect_uri: `${gw}/logged-out` });
    // The login's ID token, kept server side, goes back to the provider as id_token_hint.
    const hint = endSession.searchParams.get('id_token_hint');
    expect(hint).toEqual(expect.any(String));
    const hinted = JSON.parse(Buffer.from(hint!.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    expect(hinted).toMatchObject({ iss: op.issuer, aud: CLIENT.id });
    expect(cookieValue(out, '__Host-iam-session')).toBe('');
    expect((await send(`${gw}/api/projects`, { headers: { cookie: `__Host-iam-session=${token}` } })).status).toBe(401);
    // The provider ends its own session too, and sends the browser back where the gateway asked.
    expect(await op.logoutThrough(endSession.href, jar)).toBe(`${gw}/logged-out`);
  });

  it('the 403 page of a signed-in browser links to the sign-out and back to the start page', async () => {
    const { answer } = await signIn('alice');
    const token = cookieValue(answer, '__Host-iam-session')!;
    const denied = await send(`${gw}/api/admin/stats`, { headers: { cookie: `__Host-iam-session=${token}`, accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(denied.status).toBe(403);
    const page = await denied.text();
    expect(page).toContain('<a href="/iam/auth/oidc/logout" rel="nofollow">Sign out</a>');
    expect(page).toContain('<a href="/" rel="nofollow">Back to the start page</a>');
    // The link is a same-origin navigation: the logout's CSRF check lets it through and the provider is next.
    const out = await send(`${gw}/iam/auth/oidc/logout`, { headers: { cookie: `__Host-iam-session=${token}`, 'sec-fetch-site': 'same-origin' } });
    expect(out.status).toBe(302);
    expect(new URL(out.headers.get('location')!).searchParams.get('id_token_hint')).toEqual(expect.any(String));
  });

  it('does not end a session for a navigation from another site', async () => {
    const { answer } = await signIn('alice');
    const token = cookieValue(answer, '__Host-iam-session')!;
    const crossSite = await send(`${gw}/iam/auth/oidc/logout`, { headers: { cookie: `__Host-iam-session=${token}`, 'sec-fetch-site': 'cross-site' } });
    expect([crossSite.status, await codeOf(crossSite)]).toEqual([403, 'IAM_CSRF_REJECTED']);
    expect((await send(`${gw}/api/projects`, { headers: { cookie: `__Host-iam-session=${token}` } })).status).toBe(200);
  });
});

describe('back-channel logout', () => {
  const EVENT = { 'http://schemas.openid.net/event/backchannel-logout': {} };
  const now = (): number => Math.floor(Date.now() / 1000);
  const post = (logoutToken: string | null, contentType = 'application/x-www-form-urlencoded'): Promise<Response> =>
    send(`${gw}/iam/auth/oidc/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: logoutToken === null ? '' : new URLSearchParams({ logout_token: logoutToken }).toString(),
    });
  const claims = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ iss: op.issuer, aud: CLIENT.id, iat: now(), jti: randomUUID(), events: EVENT, ...extra });
  const works = async (token: string): Promise<boolean> => (await send(`${gw}/iam/auth/me`, { headers: { cookie: `__Host-iam-session=${token}` } })).status === 200;
  /** A login and the provider session id (`sid`) it belongs to. */
  async function loggedIn(user: keyof typeof ACCOUNTS = 'alice', jar = new CookieJar()): Promise<{ token: string; sid: string; jar: CookieJar }> {
    const { answer } = await signIn(user, jar);
    const token = cookieValue(answer, '__Host-iam-session')!;
    const session = (await (await send(`${gw}/iam/sessions`, { headers: { cookie: `__Host-iam-session=${token}` } })).json()) as Array<{ sessionId: string; current: boolean }>;
    const current = session.find((entry) => entry.current)!;
    const row = await fixture.gateway.services!.repository.getSession(current.sessionId);
    return { token, sid: row!.idpSessionId!, jar };
  }

  it('the provider ends the user\'s session: its logout token revokes exactly the sessions of that sid, everywhere', async () => {
    const jar = new CookieJar();
    const first = await loggedIn('alice', jar);
    const sameSid = await loggedIn('alice', jar); // SSO: the same provider session
    const elsewhere = await loggedIn('alice'); // another browser: another provider session
    expect(first.sid).toBe(sameSid.sid);
    expect(elsewhere.sid).not.toBe(first.sid);
    // The user signs out at the provider: it posts a logout token to the gateway before it answers.
    const endSession = new URL(`${op.issuer}/session/end`);
    endSession.searchParams.set('client_id', CLIENT.id);
    await op.logoutThrough(endSession.href, jar);
    expect([await works(first.token), await works(sameSid.token), await works(elsewhere.token)]).toEqual([false, false, true]);
    const audit = await fixture.gateway.services!.repository.listSessions('u-alice');
    expect(audit.filter((row) => row.idpSessionId === first.sid).map((row) => row.revokeReason)).toEqual(['idp_logout', 'idp_logout']);
  });

  it('accepts a valid token naming only sub: every session of that user ends', async () => {
    const { token } = await loggedIn('bob');
    const answer = await post(await op.sign(claims({ sub: 'u-bob' }), { typ: 'logout+jwt' }));
    expect([answer.status, answer.headers.get('cache-control')]).toEqual([200, 'no-store']);
    expect(await works(token)).toBe(false);
  });

  it('refuses every forged, malformed or replayed logout token with 400 IAM_LOGOUT_TOKEN_INVALID, ending nothing', async () => {
    const { token, sid } = await loggedIn('alice');
    const other = await generateKeyPair('RS256', { extractable: true });
    const otherKey = { ...(await exportJWK(other.privateKey)), kid: op.jwks.keys[0]!.kid, alg: 'RS256' };
    const publicKey = { ...op.jwks.keys[0]! };
    delete publicKey.d;
    const unsigned = (payload: Record<string, unknown>): string =>
      `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.`;
    const { createHmac } = await import('node:crypto');
    const hmacWithPublicKey = (payload: Record<string, unknown>): string => {
      const input = `${Buffer.from(JSON.stringify({ alg: 'HS256', kid: op.jwks.keys[0]!.kid })).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
      return `${input}.${createHmac('sha256', JSON.stringify(publicKey)).update(input).digest('base64url')}`;
    };
    const cases: Array<[string, string | null]> = [
      ['no token', null],
      ['not a JWT', 'not-a-jwt'],
      ['alg none', unsigned(claims({ sid }))],
      ['HMAC with the public key', hmacWithPublicKey(claims({ sid }))],
      ['signed by another key with the same kid', await op.sign(claims({ sid }), {}, otherKey)],
      ['another issuer', await op.sign(claims({ sid, iss: 'https://evil.test' }))],
      ['another audience', await op.sign(claims({ sid, aud: 'someone-else' }))],
      ['no events', await op.sign({ ...claims({ sid }), events: undefined })],
      ['the wrong event', await op.sign(claims({ sid, events: { 'http://schemas.openid.net/event/other': {} } }))],
      ['a nonce', await op.sign(claims({ sid, nonce: 'n' }))],
      ['neither sid nor sub', await op.sign(claims())],
      ['no jti', await op.sign({ ...claims({ sid }), jti: undefined })],
      ['issued an hour ago', await op.sign(claims({ sid, iat: now() - 3600 }))],
      ['expired', await op.sign(claims({ sid, exp: now() - 120 }))],
      ['issued in the future', await op.sign(claims({ sid, iat: now() + 3600 }))],
    ];
    for (const [name, logoutToken] of cases) {
      const refused = await post(logoutToken);
      expect([name, refused.status, await codeOf(refused)]).toEqual([name, 400, 'IAM_LOGOUT_TOKEN_INVALID']);
    }
    expect(await works(token)).toBe(true);

    // A valid one works once; the same jti again is a replay.
    const valid = await op.sign(claims({ sid }));
    expect((await post(valid)).status).toBe(200);
    expect(await works(token)).toBe(false);
    const replay = await post(valid);
    expect([replay.status, await codeOf(replay)]).toEqual([400, 'IAM_LOGOUT_TOKEN_INVALID']);
    // JSON is not the binding (form-encoded only).
    expect((await post(JSON.stringify({ logout_token: valid }), 'application/json')).status).toBe(415);
  });

  it('bounds the key refetch for unknown kids (a storm of them costs the provider at most one fetch)', async () => {
    const stranger = await generateKeyPair('RS256', { extractable: true });
    const key = { ...(await exportJWK(stranger.privateKey)), alg: 'RS256' };
    const answers = await Promise.all(
      Array.from({ length: 30 }, async (_, index) => post(await op.sign(claims({ sub: 'u-nobody' }), { kid: `unknown-${index}` }, { ...key, kid: `unknown-${index}` }))),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(30).fill(400));
    const before = (op.output().match(/request: GET \/jwks/g) ?? []).length;
    expect(before).toBeGreaterThan(0);
    const again = await Promise.all(
      Array.from({ length: 30 }, async (_, index) => post(await op.sign(claims({ sub: 'u-nobody' }), { kid: `again-${index}` }, { ...key, kid: `again-${index}` }))),
    );
    expect(again.map((answer) => answer.status)).toEqual(Array(30).fill(400));
    // Within the 30 s cooldown: no fetch at all for the second storm.
    expect((op.output().match(/request: GET \/jwks/g) ?? []).length).toBe(before);
  });
});

describe('users: existing', () => {
  let strict: RunningGateway;
  let strictOp: TestOp;

  beforeAll(async () => {
    const port = await freePort();
    strictOp = await startTestOp({
      clients: [{ client_id: CLIENT.id, client_secret: CLIENT.secret, redirect_uris: [`http://127.0.0.1:${port}/iam/auth/oidc/callback`], grant_types: ['authorization_code'], response_types: ['code'] }],
      accounts: ACCOUNTS,
    });
    strict = await startTestGateway(fixture.upstream.url, oidcSettings(strictOp.issuer, port, { IAM_OIDC_USERS: 'existing' }));
    await linkAccounts(strict, strictOp.issuer, [['u-admin', 'u-admin']]);
  }, 60_000);
  afterAll(async () => {
    await strict?.close();
    await strictOp?.close();
  });

  it('refuses a user the gateway does not know, and logs in one it knows', async () => {
    const attempt = async (user: keyof typeof ACCOUNTS): Promise<Response> => {
      const { authorizationUrl, stateCookie } = await begin(strict.url);
      const callback = await strictOp.loginThrough(authorizationUrl, user, ACCOUNTS[user].password, `${strict.url}/iam/auth/oidc/callback`);
      return send(callback, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
    };
    const stranger = await attempt('stranger');
    expect([stranger.status, await codeOf(stranger)]).toEqual([401, 'IAM_INVALID_CREDENTIALS']);
    expect(await strict.services!.repository.getUser('u-stranger')).toBeNull();
    // u-admin exists (provisioned) and never signed in at the first provider.
    expect((await attempt('admin')).status).toBe(303);
  });

  it("refuses an identity another provider already owns (the stored identity's domain wins)", async () => {
    // u-alice's oidc:u-alice identity is created by the first provider, whose issuer is another URL.
    expect((await signIn('alice')).answer.status).toBe(303);
    const { authorizationUrl, stateCookie } = await begin(strict.url);
    const callback = await strictOp.loginThrough(authorizationUrl, 'alice', 'alice-password', `${strict.url}/iam/auth/oidc/callback`);
    const refused = await send(callback, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
    expect([refused.status, await codeOf(refused)]).toEqual([401, 'IAM_INVALID_CREDENTIALS']);
  });
});

describe('linking a provider account to a user (iam.oidc.link-by; only iss + sub identify an account)', () => {
  // The userId is the email claim: the configuration under which an unverified claim could name someone else.
  const LINKING_ACCOUNTS = {
    // The reproduction: a new account whose (unverified) email is the id of an existing user, a full admin.
    mallory: { sub: 'mallory-sub', password: 'mallory-password', claims: { email: 'u-admin', email_verified: false } },
    gina: { sub: 'gina-sub', password: 'gina-password', claims: { email: 'gina@example.test', email_verified: true } },
    hal: { sub: 'hal-sub', password: 'hal-password', claims: { email: 'hal@example.test', email_verified: true } },
    carla: { sub: 'carla-sub', password: 'carla-password', claims: { email: 'carla@example.test', email_verified: true } },
    carlaTwin: { sub: 'carla-twin-sub', password: 'twin-password', claims: { email: 'carla@example.test', email_verified: true } },
    dan: { sub: 'dan-sub', password: 'dan-password', claims: { email: 'dan@example.test', email_verified: false } },
    erin: { sub: 'erin-sub', password: 'erin-password', claims: { email: 'erin@example.test', email_verified: 'true' } },
    frank: { sub: 'frank-sub', password: 'frank-password', claims: { email: 'frank@example.test', email_verified: true } },
  };
  type LinkingAccount = keyof typeof LINKING_ACCOUNTS;
  let linkOp: TestOp;
  /** link-by none (the default), users: existing — which does not let a claim link either. */
  let adminOnly: RunningGateway;
  /** link-by verified-email, users: jit. */
  let byEmail: RunningGateway;

  beforeAll(async () => {
    const [adminOnlyPort, byEmailPort] = [await freePort(), await freePort()];
    const callbacks = [adminOnlyPort, byEmailPort].map((port) => `http://127.0.0.1:${port}/iam/auth/oidc/callback`);
    linkOp = await startTestOp({
      clients: [{ client_id: CLIENT.id, client_secret: CLIENT.secret, redirect_uris: callbacks, grant_types: ['authorization_code'], response_types: ['code'] }],
      accounts: LINKING_ACCOUNTS,
    });
    const byClaim = { IAM_OIDC_CLAIMS_USER_ID: 'email' };
    adminOnly = await startTestGateway(fixture.upstream.url, oidcSettings(linkOp.issuer, adminOnlyPort, { ...byClaim, IAM_OIDC_USERS: 'existing' }));
    byEmail = await startTestGateway(fixture.upstream.url, oidcSettings(linkOp.issuer, byEmailPort, { ...byClaim, IAM_OIDC_LINK_BY: 'verified-email' }));
    // Users the gateway already has, with no account at this provider yet.
    await adminOnly.services!.repository.applyProvisioning({ users: ['gina', 'hal', 'carla', 'dan', 'erin'].map((name) => ({ userId: `${name}@example.test` })) });
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled([adminOnly?.close(), byEmail?.close()]);
    await linkOp?.close();
  });

  const attemptAt = async (gateway: RunningGateway, user: LinkingAccount): Promise<Response> => {
    const { authorizationUrl, stateCookie } = await begin(gateway.url);
    const callback = await linkOp.loginThrough(authorizationUrl, user, LINKING_ACCOUNTS[user].password, `${gateway.url}/iam/auth/oidc/callback`);
    return send(callback, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
  };
  /** The answer's status, problem code (or redirect) and whether it set a session, and the audited refusal reasons. */
  const outcome = async (gateway: RunningGateway, answer: Response): Promise<[number, string, boolean, string[]]> => [
    answer.status,
    answer.status === 303 ? 'signed in' : await codeOf(answer),
    cookieValue(answer, '__Host-iam-session') !== null,
    await refusalReasons(gateway, answer),
  ];
  const refused = (reason: string): [number, string, boolean, string[]] => [401, 'IAM_INVALID_CREDENTIALS', false, [reason]];
  const signedIn: [number, string, boolean, string[]] = [303, 'signed in', true, []];
  const identityOwner = async (sub: string): Promise<string | null> => (await adminOnly.services!.repository.getIdentity(`oidc:${sub}`))?.userId ?? null;

  it("refuses a new account whose unverified email is an existing user's id (users: existing or not), audited, linking nothing", async () => {
    const adminSessions = async (): Promise<number> => (await adminOnly.services!.repository.listSessions('u-admin')).length;
    const before = await adminSessions();
    expect(await outcome(adminOnly, await attemptAt(adminOnly, 'mallory'))).toEqual(refused('identity-not-linked'));
    expect(await outcome(byEmail, await attemptAt(byEmail, 'mallory'))).toEqual(refused('identity-not-linked'));
    expect(await identityOwner('mallory-sub')).toBeNull();
    expect(await adminSessions()).toBe(before);
  });

  it('link-by none: even a verified email does not link; an admin does, and then the account signs in as that user', async () => {
    expect(await outcome(adminOnly, await attemptAt(adminOnly, 'gina'))).toEqual(refused('identity-not-linked'));
    await linkAccounts(adminOnly, linkOp.issuer, [['gina-sub', 'gina@example.test']]);
    const answer = await attemptAt(adminOnly, 'gina');
    expect(await outcome(adminOnly, answer)).toEqual(signedIn);
    const me = (await (await send(`${adminOnly.url}/iam/auth/me`, { headers: { cookie: `__Host-iam-session=${cookieValue(answer, '__Host-iam-session')}` } })).json()) as Record<string, unknown>;
    expect(me).toMatchObject({ userId: 'gina@example.test', identityId: 'oidc:gina-sub', identityDomain: linkOp.issuer });
  });

  it('a known account names its stored user: one whose claims name another user is refused, never moved', async () => {
    await linkAccounts(adminOnly, linkOp.issuer, [['hal-sub', 'u-bob']]);
    expect(await outcome(adminOnly, await attemptAt(adminOnly, 'hal'))).toEqual(refused('identity-of-another-user'));
    expect(await identityOwner('hal-sub')).toBe('u-bob');
  });

  it('link-by verified-email: links the first verified account of a user at this provider, never a second one', async () => {
    expect(await outcome(byEmail, await attemptAt(byEmail, 'carla'))).toEqual(signedIn);
    expect(await identityOwner('carla-sub')).toBe('carla@example.test');
    // Another account with the same verified address (reassigned, or duplicated at the provider): not a takeover.
    expect(await outcome(byEmail, await attemptAt(byEmail, 'carlaTwin'))).toEqual(refused('identity-not-linked'));
    expect(await identityOwner('carla-twin-sub')).toBeNull();
    // The first account keeps signing in.
    expect(await outcome(byEmail, await attemptAt(byEmail, 'carla'))).toEqual(signedIn);
  });

  it('link-by verified-email: email_verified false, or the string "true", links nothing; a new user is still created (jit)', async () => {
    expect(await outcome(byEmail, await attemptAt(byEmail, 'dan'))).toEqual(refused('identity-not-linked'));
    expect(await outcome(byEmail, await attemptAt(byEmail, 'erin'))).toEqual(refused('identity-not-linked'));
    expect([await identityOwner('dan-sub'), await identityOwner('erin-sub')]).toEqual([null, null]);
    expect(await outcome(byEmail, await attemptAt(byEmail, 'frank'))).toEqual(signedIn);
    expect(await identityOwner('frank-sub')).toBe('frank@example.test');
  });
});

/**
 * "Answered, not hung": a provider that accepts the connection and never answers must get a 504 instead of a request
 * that waits until the client gives up. Far above both the configured 1 s `iam.oidc.timeout` (10×) and the latency of
 * a machine kept busy by other work; how fast the 504 comes is not this test's business.
 */
const IDP_ANSWERED_NOT_HUNG_MS = 10_000;

describe('a provider that is down or slow', () => {
  let silent: Server;
  let silentUrl: string;
  const gateways: RunningGateway[] = [];

  beforeAll(async () => {
    // Accepts connections and never answers.
    silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    silent.closeAllConnections();
    await new Promise((resolve) => silent.close(resolve));
  });

  it('answers 502 IAM_IDP_UNAVAILABLE when nothing listens, 504 IAM_IDP_TIMEOUT within iam.oidc.timeout when it hangs', async () => {
    const closed = await freePort();
    const down = await startTestGateway(fixture.upstream.url, oidcSettings(`http://127.0.0.1:${closed}`, await freePort(), { IAM_OIDC_TIMEOUT: '1s' }));
    gateways.push(down);
    const refused = await send(`${down.url}/iam/auth/oidc/login`);
    expect([refused.status, await codeOf(refused)]).toEqual([502, 'IAM_IDP_UNAVAILABLE']);

    const slow = await startTestGateway(fixture.upstream.url, oidcSettings(silentUrl, await freePort(), { IAM_OIDC_TIMEOUT: '1s' }));
    gateways.push(slow);
    const started = Date.now();
    const hung = await send(`${slow.url}/iam/auth/oidc/login`, { headers: { accept: 'text/html' } });
    // The 504 and its page prove the timeout path; the bound only turns a hang into a failure.
    expect(hung.status).toBe(504);
    expect(Date.now() - started).toBeLessThan(IDP_ANSWERED_NOT_HUNG_MS);
    expect(await hung.text()).toContain('Identity provider timeout');
    // The gateway itself keeps serving.
    expect((await send(`${slow.url}/health`)).status).toBe(200);
  }, 2 * IDP_ANSWERED_NOT_HUNG_MS + 20_000);
});
