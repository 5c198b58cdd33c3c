/**
 * Browser sessions (docs/http-contract.md): the session cookie carries the same token as a bearer; a bearer wins;
 * the host never sees the cookie; cookie-authenticated unsafe requests from another site are refused (403
 * IAM_CSRF_REJECTED) and never reach the host; logout clears the cookie.
 */
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { recordedHeader } from '../support/recording-upstream';

let fixture: GatewayWithUpstream;
let dev: RunningGateway;

beforeAll(async () => {
  // The secure default (__Host-iam-session) and a plain-http development gateway (iam-session).
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES, IAM_SESSION_COOKIE_TRUSTED_ORIGINS: '["https://app.example.test"]' });
  dev = await startTestGateway(fixture.upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_SESSION_COOKIE_SECURE: 'false' });
});
afterAll(async () => {
  await dev?.close();
  await fixture?.close();
});
beforeEach(() => fixture.upstream.clear());

const gw = (): string => fixture.gateway.url;
const token = async (user = 'alice', of = gw()): Promise<string> => (await login(of, user)).accessToken;
const send = (url: string, init: RequestInit = {}): Promise<Response> => fetch(url, { redirect: 'manual', ...init });

describe('the session cookie', () => {
  it('authenticates like a bearer; the host gets the identity headers and the other cookies, never the session cookie', async () => {
    const alice = await token();
    const answer = await send(`${gw()}/api/projects`, { headers: { cookie: `theme=dark; __Host-iam-session=${alice}; lang=en` } });
    expect(answer.status).toBe(200);
    const [seen] = await fixture.upstream.requests();
    expect(recordedHeader(seen!, 'x-iam-user-id')).toEqual(['u-alice']);
    expect(recordedHeader(seen!, 'cookie')).toEqual(['theme=dark; lang=en']);
  });

  it('is named iam-session only when iam.session-cookie.secure is false; the other name is not a session', async () => {
    const alice = await token('alice', dev.url);
    expect((await send(`${dev.url}/api/projects`, { headers: { cookie: `iam-session=${alice}` } })).status).toBe(200);
    expect((await send(`${dev.url}/api/projects`, { headers: { cookie: `__Host-iam-session=${alice}` } })).status).toBe(401);
    expect((await send(`${gw()}/api/projects`, { headers: { cookie: `iam-session=${alice}` } })).status).toBe(401);
    // Whichever name: the host never receives it.
    await send(`${gw()}/health`, { headers: { cookie: `iam-session=${alice}; __Host-iam-session=${alice}` } });
    const [seen] = await fixture.upstream.requests();
    expect(recordedHeader(seen!, 'cookie')).toEqual([]);
  });

  it('round 3: the inline proxy removes every gateway cookie (session and OpenID Connect state, any case, after a comma), whoever is authenticated', async () => {
    const alice = await token();
    const lines = [
      `theme=dark; __Host-iam-oidc=v1.sealed; Iam-Oidc=v1.sealed; IAM-SESSION=${alice}`,
      `lang=en, iam-oidc=v1.sealed; pref=a=b`,
      `__HOST-IAM-SESSION=${alice}; __Host-iam-session=${alice}`,
    ];
    for (const cookie of lines) {
      expect((await send(`${gw()}/health`, { headers: { cookie } })).status).toBe(200);
      expect((await send(`${gw()}/api/projects`, { headers: { ...bearer(alice), cookie } })).status).toBe(200);
    }
    const seen = await fixture.upstream.requests();
    expect(seen.map((request) => recordedHeader(request, 'cookie'))).toEqual([['theme=dark'], ['theme=dark'], ['pref=a=b'], ['pref=a=b'], [], []]);
  });

  it('loses to a bearer token in the same request', async () => {
    const [alice, bob] = [await token('alice'), await token('bob')];
    await send(`${gw()}/api/projects`, { headers: { ...bearer(bob), cookie: `__Host-iam-session=${alice}` } });
    const [seen] = await fixture.upstream.requests();
    expect(recordedHeader(seen!, 'x-iam-user-id')).toEqual(['u-bob']);
  });

  it('is not guessed between two cookies of the same name (cookie tossing), nor taken when malformed', async () => {
    const alice = await token();
    expect((await send(`${gw()}/api/projects`, { headers: { cookie: `__Host-iam-session=${alice}; __Host-iam-session=iamt_other` } })).status).toBe(401);
    expect((await send(`${gw()}/api/projects`, { headers: { cookie: '__Host-iam-session=not-a-token' } })).status).toBe(401);
  });
});

describe('CSRF', () => {
  const post = (alice: string, headers: Record<string, string>): Promise<Response> =>
    send(`${gw()}/api/projects`, { method: 'POST', headers: { cookie: `__Host-iam-session=${alice}`, 'content-type': 'application/json', ...headers }, body: '{"name":"x"}' });

  it('refuses a cookie-authenticated unsafe request from another site: 403 IAM_CSRF_REJECTED, never forwarded', async () => {
    const alice = await token();
    const attempts: Array<Record<string, string>> = [{ origin: 'https://evil.test' }, { 'sec-fetch-site': 'cross-site' }, { origin: 'null' }, { origin: `http://${new URL(gw()).host}.evil.test` }];
    for (const headers of attempts) {
      const refused = await post(alice, headers);
      expect([headers, refused.status, ((await refused.json()) as { code: string }).code]).toEqual([headers, 403, 'IAM_CSRF_REJECTED']);
    }
    expect(await fixture.upstream.requests()).toEqual([]);
  });

  it("accepts the gateway's own origin, a trusted origin, no browser headers, a safe method, and any bearer request", async () => {
    const alice = await token();
    const accepted: Array<Record<string, string>> = [{ origin: gw(), 'sec-fetch-site': 'same-origin' }, { origin: 'https://app.example.test', 'sec-fetch-site': 'same-site' }, {}];
    for (const headers of accepted) {
      expect([headers, (await post(alice, headers)).status]).toEqual([headers, 200]);
    }
    expect((await send(`${gw()}/api/projects`, { headers: { cookie: `__Host-iam-session=${alice}`, origin: 'https://evil.test', 'sec-fetch-site': 'cross-site' } })).status).toBe(200);
    const withBearer = await send(`${gw()}/api/projects`, { method: 'POST', headers: { ...bearer(alice), origin: 'https://evil.test', 'content-type': 'application/json' }, body: '{}' });
    expect(withBearer.status).toBe(200);
  });
});

describe('/iam with the cookie', () => {
  it('serves /iam/auth/me; logout refuses another site, then ends the session and clears the cookie', async () => {
    const alice = await token();
    const cookie = { cookie: `__Host-iam-session=${alice}` };
    const me = await send(`${gw()}/iam/auth/me`, { headers: cookie });
    expect(((await me.json()) as { userId: string }).userId).toBe('u-alice');
    const crossSite = await send(`${gw()}/iam/auth/logout`, { method: 'POST', headers: { ...cookie, origin: 'https://evil.test' } });
    expect(crossSite.status).toBe(403);
    expect((await send(`${gw()}/iam/auth/me`, { headers: cookie })).status).toBe(200);
    const out = await send(`${gw()}/iam/auth/logout`, { method: 'POST', headers: { ...cookie, origin: gw() } });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toBe('__Host-iam-session=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax; Secure');
    expect((await send(`${gw()}/iam/auth/me`, { headers: cookie })).status).toBe(401);
    expect((await send(`${gw()}/api/projects`, { headers: cookie })).status).toBe(401);
  });
});

describe('the login page', () => {
  const form = (fields: Record<string, string>, headers: Record<string, string> = {}, of = gw()): Promise<Response> =>
    send(`${of}/iam/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html', origin: of, 'sec-fetch-site': 'same-origin', ...headers },
      body: new URLSearchParams(fields).toString(),
    });
  const cookieOf = (answer: Response): string => /^__Host-iam-session=(iamt_[^;]+);/.exec(answer.headers.get('set-cookie') ?? '')?.[1] ?? '';

  it('serves an accessible form without script, with a strict CSP, carrying returnTo', async () => {
    const page = await send(`${gw()}/iam/login?returnTo=${encodeURIComponent('/api/projects?x=1')}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe("default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('cache-control')).toBe('no-store');
    const html = await page.text();
    expect(html).toContain('<form method="post" action="/iam/login">');
    expect(html).toContain('<label for="username">');
    expect(html).toContain('<label for="password">');
    expect(html).toContain('name="returnTo" value="/api/projects?x=1"');
    expect(html).not.toMatch(/<script|<style| style=| on[a-z]+=/i);
  });

  it('logs in: 303 to returnTo with the session cookie, which then works like a bearer', async () => {
    const answer = await form({ username: 'alice', password: 'alice-password', returnTo: '/api/projects?page=2' });
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('/api/projects?page=2');
    expect(answer.headers.get('set-cookie')).toMatch(/^__Host-iam-session=iamt_[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Lax; Secure$/);
    const cookie = `__Host-iam-session=${cookieOf(answer)}`;
    const me = (await (await send(`${gw()}/iam/auth/me`, { headers: { cookie } })).json()) as { userId: string };
    expect(me.userId).toBe('u-alice');
    const sessions = (await (await send(`${gw()}/iam/sessions`, { headers: { cookie } })).json()) as Array<{ clientType: string; current?: boolean }>;
    expect(sessions[0]!.clientType).toBe('WEB');
  });

  it('uses the plain iam-session cookie without Secure when iam.session-cookie.secure is false', async () => {
    const answer = await form({ username: 'alice', password: 'alice-password' }, {}, dev.url);
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('/');
    expect(answer.headers.get('set-cookie')).toMatch(/^iam-session=iamt_[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Lax$/);
  });

  it('never redirects off the gateway: absolute, scheme-relative and backslash returnTo values become /', async () => {
    const hostile = ['//evil.test', 'https://evil.test/x', '/\\evil.test', '\\\\evil.test', 'javascript:alert(1)', '/%0d%0aSet-Cookie:x=1', ' /x', 'evil.test', ''];
    // Round 3: values that pass a check of the raw string but resolve to `//evil.test/x` (dot-segment removal).
    hostile.push('/.//evil.test/x', '/a/..//evil.test/x', '/%2e//evil.test/x', '/%2E%2E//evil.test/x');
    for (const returnTo of hostile) {
      const answer = await form({ username: 'alice', password: 'alice-password', returnTo });
      const location = answer.headers.get('location');
      expect([returnTo, answer.status, location]).toEqual([returnTo, 303, expect.stringMatching(/^\/(?![/\\])/)]);
      expect(new URL(location!, 'https://gateway.test').origin).toBe('https://gateway.test');
    }
    // A control character is refused with the form (the body cannot be stored or logged safely), never followed.
    const control = await form({ username: 'alice', password: 'alice-password', returnTo: '/x\ty' });
    expect([control.status, control.headers.get('location')]).toEqual([400, null]);
    const page = await (await send(`${gw()}/iam/login?returnTo=${encodeURIComponent('//evil.test')}`)).text();
    expect(page).toContain('name="returnTo" value="/"');
  });

  it('shows the form again with the error for wrong credentials (401), keeping the username, never the password', async () => {
    const answer = await form({ username: 'alice', password: 'wrong-password', returnTo: '/api/projects' });
    expect(answer.status).toBe(401);
    expect(answer.headers.get('set-cookie')).toBeNull();
    const html = await answer.text();
    expect(html).toContain('role="alert"');
    expect(html).toContain('The username or password is wrong.');
    expect(html).toContain('value="alice"');
    expect(html).not.toContain('wrong-password');
    expect(html).toContain('name="returnTo" value="/api/projects"');
  });

  it('escapes what the user typed', async () => {
    const answer = await form({ username: '"><script>alert(1)</script>', password: 'x' });
    expect(answer.status).toBe(401);
    const html = await answer.text();
    expect(html).not.toContain('<script>');
    expect(html).toContain('&quot;&gt;&lt;script&gt;');
  });

  it('refuses a login posted from another site (login CSRF), and empty or malformed forms', async () => {
    const crossSite: Array<Record<string, string>> = [{ origin: 'https://evil.test' }, { 'sec-fetch-site': 'cross-site' }, { origin: 'null' }];
    for (const headers of crossSite) {
      const refused = await form({ username: 'alice', password: 'alice-password' }, headers);
      expect([headers, refused.status, ((await refused.json()) as { code: string }).code]).toEqual([headers, 403, 'IAM_CSRF_REJECTED']);
      expect(refused.headers.get('set-cookie')).toBeNull();
    }
    const empty = await form({ username: '', password: '' });
    expect(empty.status).toBe(400);
    expect(await empty.text()).toContain('Enter a username and a password.');
    const api = await form({ username: 'alice' }, { accept: 'application/json' });
    expect([api.status, ((await api.json()) as { code: string }).code]).toEqual([400, 'IAM_VALIDATION_FAILED']);
    const nested = await send(`${gw()}/iam/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'username[a]=1&password=x' });
    expect(nested.status).toBe(400);
    const json = await send(`${gw()}/iam/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":"alice","password":"alice-password"}' });
    expect([json.status, ((await json.json()) as { code: string }).code]).toEqual([415, 'IAM_UNSUPPORTED_MEDIA_TYPE']);
    // ...and the JSON login refuses a form in turn.
    const formToApi = await send(`${gw()}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'username=alice&password=alice-password&clientType=WEB' });
    expect(formToApi.status).toBe(415);
  });
});

describe('a browser without a session', () => {
  const page = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };

  it('navigating to a protected page is sent to the login with returnTo; API clients keep the 401 problem', async () => {
    const answer = await send(`${gw()}/api/projects?sort=name`, { headers: page });
    expect(answer.status).toBe(302);
    expect(answer.headers.get('location')).toBe(`/iam/login?returnTo=${encodeURIComponent('/api/projects?sort=name')}`);
    expect(answer.headers.get('set-cookie')).toBeNull();
    expect((await send(`${gw()}/api/projects`, { method: 'HEAD', headers: page })).status).toBe(302);
    const apiClients: Array<Record<string, string>> = [{}, { accept: 'application/json' }, { accept: '*/*' }];
    for (const headers of apiClients) {
      const api = await send(`${gw()}/api/projects`, { headers });
      expect([headers, api.status, api.headers.get('content-type')]).toEqual([headers, 401, 'application/problem+json']);
    }
    // Not a navigation: an unsafe method, or a request that sent a (bad) bearer.
    expect((await send(`${gw()}/api/projects`, { method: 'POST', headers: { ...page, 'content-type': 'application/json' }, body: '{}' })).status).toBe(401);
    expect((await send(`${gw()}/api/projects`, { headers: { ...page, authorization: 'Bearer iamt_expired' } })).status).toBe(401);
    expect(await fixture.upstream.requests()).toEqual([]);
  });

  it('with a cookie that no longer works is sent to the login, and the cookie is cleared', async () => {
    const alice = await token();
    await send(`${gw()}/iam/auth/logout`, { method: 'POST', headers: bearer(alice) });
    const answer = await send(`${gw()}/api/projects`, { headers: { ...page, cookie: `__Host-iam-session=${alice}` } });
    expect(answer.status).toBe(302);
    expect(answer.headers.get('set-cookie')).toBe('__Host-iam-session=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax; Secure');
  });

  it('signs in through the form and lands on the page it asked for', async () => {
    const first = await send(`${gw()}/api/projects`, { headers: page });
    const loginUrl = new URL(first.headers.get('location')!, gw());
    const returnTo = loginUrl.searchParams.get('returnTo')!;
    const signedIn = await send(`${gw()}/iam/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gw(), ...page },
      body: new URLSearchParams({ username: 'alice', password: 'alice-password', returnTo }).toString(),
    });
    expect(signedIn.headers.get('location')).toBe('/api/projects');
    const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
    const landed = await send(`${gw()}${signedIn.headers.get('location')!}`, { headers: { ...page, cookie } });
    expect(landed.status).toBe(200);
  });
});
