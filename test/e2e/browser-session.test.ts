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
