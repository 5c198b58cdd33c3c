/**
 * The OpenID Provider harness (test/support/oidc-op.ts, oidc-op/server.mjs, browser.ts) on its own, without
 * the gateway: the authorization code flow with PKCE through its login form (by fetch and in Chromium), the
 * ID token, RP-initiated logout sending a back-channel logout token to a loopback receiver, and JWT access
 * tokens for a resource indicator.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';
import { chromiumAvailable, launchBrowser } from '../support/browser';
import { notRun } from '../support/env';
import { CookieJar, startTestOp, type TestOp } from '../support/oidc-op';

const CALLBACK = 'http://127.0.0.1:1/cb';
const LOGGED_OUT = 'http://127.0.0.1:1/logged-out';
const API = 'https://api.example.test';

const browserRunnable = chromiumAvailable();
if (!browserRunnable) notRun('oidc-op-harness: login in Chromium (no /usr/bin/chromium; CI always has it)');
const testInBrowser = browserRunnable ? test : test.skip;

/** A server that answers 200 to every request and keeps the form bodies of the POSTs. */
function startBackchannelReceiver(): Promise<{ server: Server; url: string; posts: Array<{ path: string; form: URLSearchParams }> }> {
  const posts: Array<{ path: string; form: URLSearchParams }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (req.method === 'POST') posts.push({ path: req.url ?? '', form: new URLSearchParams(body) });
      res.end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/backchannel`, posts })),
  );
}

describe('the OIDC test OP (no gateway)', () => {
  let op: TestOp;
  let receiver: Awaited<ReturnType<typeof startBackchannelReceiver>>;
  let discovery: Record<string, any>;

  beforeAll(async () => {
    receiver = await startBackchannelReceiver();
    op = await startTestOp({
      clients: [
        {
          client_id: 'rp',
          client_secret: 'rp-secret',
          redirect_uris: [CALLBACK],
          post_logout_redirect_uris: [LOGGED_OUT],
          backchannel_logout_uri: receiver.url,
          backchannel_logout_session_required: true,
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
        { client_id: 'service', client_secret: 'service-secret', grant_types: ['client_credentials'], response_types: [], redirect_uris: [] },
      ],
      resourceAudience: API,
    });
    discovery = (await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json()) as Record<string, any>;
  });

  afterAll(async () => {
    await op?.close();
    await new Promise((resolve) => receiver?.server.close(resolve));
  });

  /** An authorization URL as an RP builds it (code, PKCE S256, state, nonce) and what it must remember. */
  function authorization(extra: Record<string, string> = {}): { url: string; verifier: string; state: string; nonce: string } {
    const verifier = randomBytes(32).toString('base64url');
    const state = randomBytes(16).toString('base64url');
    const nonce = randomBytes(16).toString('base64url');
    const url = new URL(discovery.authorization_endpoint);
    url.search = new URLSearchParams({
      client_id: 'rp',
      response_type: 'code',
      redirect_uri: CALLBACK,
      scope: 'openid',
      state,
      nonce,
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      ...extra,
    }).toString();
    return { url: url.href, verifier, state, nonce };
  }

  /** Redeems the code of `callbackUrl` at the token endpoint (client_secret_basic). */
  async function redeem(callbackUrl: string, verifier: string): Promise<Record<string, any>> {
    const code = new URL(callbackUrl).searchParams.get('code');
    expect(code).toBeTruthy();
    const response = await fetch(discovery.token_endpoint, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from('rp:rp-secret').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: code!, redirect_uri: CALLBACK, code_verifier: verifier }),
    });
    const body = (await response.json()) as Record<string, any>;
    expect({ status: response.status, body }).toMatchObject({ status: 200 });
    return body;
  }

  const verifyWithOp = async (jwt: string, audience: string) =>
    (await jwtVerify(jwt, createRemoteJWKSet(new URL(discovery.jwks_uri)), { issuer: op.issuer, audience })).payload;

  test('discovery announces end_session, back-channel logout with sid, and the jwks_uri', () => {
    expect(discovery).toMatchObject({
      issuer: op.issuer,
      end_session_endpoint: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\//),
      backchannel_logout_supported: true,
      backchannel_logout_session_supported: true,
      jwks_uri: `${op.issuer}/jwks`,
      code_challenge_methods_supported: ['S256'],
    });
  });

  test('a login through the form yields a code whose ID token has the nonce, sid and sub', async () => {
    const { url, verifier, state, nonce } = authorization({ scope: 'openid email profile groups' });
    const callback = await op.loginThrough(url, 'alice', 'alice-password', CALLBACK);
    expect(new URL(callback).searchParams.get('state')).toBe(state);
    const tokens = await redeem(callback, verifier);
    const claims = await verifyWithOp(tokens.id_token, 'rp');
    expect(claims).toMatchObject({ sub: 'alice', nonce, sid: expect.any(String), email: 'alice@example.test', name: 'Alice', groups: ['editors'] });
  });

  test('PKCE is required: an authorization without code_challenge is refused', async () => {
    const { url } = authorization();
    const withoutPkce = new URL(url);
    withoutPkce.searchParams.delete('code_challenge');
    withoutPkce.searchParams.delete('code_challenge_method');
    const callback = await op.loginThrough(withoutPkce.href, 'alice', 'alice-password', CALLBACK);
    expect(new URL(callback).searchParams.get('error')).toBe('invalid_request');
  });

  test('a wrong password shows the form again, and loginThrough says so', async () => {
    await expect(op.loginThrough(authorization().url, 'alice', 'wrong', CALLBACK)).rejects.toThrow(/refused the login of "alice".*Invalid login or password/);
  });

  test('RP-initiated logout sends a back-channel logout token with events and sid', async () => {
    const jar = new CookieJar();
    const { url, verifier } = authorization();
    const tokens = await redeem(await op.loginThrough(url, 'bob', 'bob-password', CALLBACK, jar), verifier);
    const sid = decodeJwt(tokens.id_token).sid;
    receiver.posts.length = 0;

    const endSession = new URL(discovery.end_session_endpoint);
    endSession.search = new URLSearchParams({ id_token_hint: tokens.id_token, post_logout_redirect_uri: LOGGED_OUT, state: 'bye' }).toString();
    expect(await op.logoutThrough(endSession.href, jar)).toBe(`${LOGGED_OUT}?state=bye`);

    expect(receiver.posts).toHaveLength(1);
    const logoutToken = receiver.posts[0]!.form.get('logout_token')!;
    expect(await verifyWithOp(logoutToken, 'rp')).toMatchObject({
      sub: 'bob',
      sid,
      events: { 'http://schemas.openid.net/event/backchannel-logout': {} },
      jti: expect.any(String),
    });
    expect(decodeJwt(logoutToken).nonce).toBeUndefined();
    // The OP session is gone: the next authorization asks for the login again.
    await expect(op.loginThrough(authorization().url, 'bob', 'wrong', CALLBACK, jar)).rejects.toThrow(/refused the login/);
  });

  test('an authorization for the resource yields a JWT access token for it', async () => {
    const { url, verifier } = authorization({ scope: 'openid api:read', resource: API });
    const tokens = await redeem(await op.loginThrough(url, 'alice', 'alice-password', CALLBACK), verifier);
    expect(await verifyWithOp(tokens.access_token, API)).toMatchObject({ sub: 'alice', client_id: 'rp', scope: 'api:read' });
  });

  test('client_credentials yields a JWT access token whose aud is the resource', async () => {
    const token = await op.clientCredentialsToken('service', 'service-secret', API, 'api:read');
    expect(await verifyWithOp(token, API)).toMatchObject({ client_id: 'service', scope: 'api:read', exp: expect.any(Number) });
  });

  test('sign() makes tokens that verify with the OP keys, or with a given key and header', async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = await op.sign({ iss: op.issuer, aud: 'rp', iat: now, exp: now + 60, sub: 'x' }, { typ: 'logout+jwt' });
    expect(await verifyWithOp(token, 'rp')).toMatchObject({ sub: 'x' });
    const { kid } = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString());
    expect(kid).toBe(op.jwks.keys[0]!.kid);
  });

  testInBrowser('the login page works in Chromium', async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      let reached!: (url: string) => void;
      const callback = new Promise<string>((resolve) => (reached = resolve));
      await page.route('http://127.0.0.1:1/**', async (route) => {
        reached(route.request().url());
        await route.fulfill({ status: 200, contentType: 'text/plain', body: 'callback' });
      });
      const { url, state } = authorization();
      await page.goto(url);
      await page.fill('input[name=login]', 'alice');
      await page.fill('input[name=password]', 'alice-password');
      await page.click('button[type=submit]');
      const landed = new URL(await callback);
      expect(landed.origin + landed.pathname).toBe(CALLBACK);
      expect(landed.searchParams.get('state')).toBe(state);
      expect(landed.searchParams.get('code')).toBeTruthy();
    } finally {
      await browser.close();
    }
  });
});
