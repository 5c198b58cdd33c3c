/**
 * docs/http-contract.md: forward-auth for deployments that keep nginx (auth_request), Traefik (ForwardAuth),
 * Caddy (forward_auth) or Envoy in front — same engine, same policy, identity headers on 200.
 */
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let token: string;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  ({ upstream, gateway } = fixture);
  token = (await login(gateway.url, 'alice')).accessToken;
});
afterAll(() => fixture?.close());

const check = (headers: Record<string, string>): Promise<Response> => fetch(`${gateway.url}/iam/authorization/forward-auth`, { headers });

it('answers 200 with the identity headers for an allowed request (Traefik/Caddy headers)', async () => {
  const response = await check({ ...bearer(token), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects?x=1' });
  expect(response.status).toBe(200);
  expect(response.headers.get('x-iam-user-id')).toBe('u-alice');
  expect(response.headers.get('x-iam-profile-id')).toBe('p-alice-editor');
  expect(response.headers.get('x-iam-permission')).toBe('project:list');
  expect(await upstream.requests()).toHaveLength(0);
});

it('reads nginx auth_request headers (X-Original-Method / X-Original-URI)', async () => {
  const response = await check({ ...bearer(token), 'X-Original-Method': 'POST', 'X-Original-URI': '/api/projects' });
  expect(response.status).toBe(200);
  expect(response.headers.get('x-iam-permission')).toBe('project:create');
});

it('answers 401 with a Bearer challenge without a token, 403 with the decision for a denied one', async () => {
  const anonymous = await check({ 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects' });
  expect(anonymous.status).toBe(401);
  expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
  const denied = await check({ ...bearer(token), 'X-Forwarded-Method': 'DELETE', 'X-Forwarded-Uri': '/api/admin/users' });
  expect(denied.status).toBe(403);
  expect(await denied.json()).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'PERMISSION_DENIED', decisionId: expect.any(String) });
});

it('names the original request in problem answers (instance), not the forward-auth endpoint', async () => {
  const anonymous = await check({ 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects?page=2' });
  expect(await anonymous.json()).toMatchObject({ status: 401, instance: '/api/projects' });
  const denied = await check({ ...bearer(token), 'X-Forwarded-Method': 'DELETE', 'X-Forwarded-Uri': '/api/admin/users' });
  expect(await denied.json()).toMatchObject({ status: 403, instance: '/api/admin/users' });
  // Before the original request is known, the problem is about the forward-auth request itself.
  const incomplete = await check({ ...bearer(token), 'X-Forwarded-Method': 'GET' });
  expect(await incomplete.json()).toMatchObject({ status: 400, instance: '/iam/authorization/forward-auth' });
});

it('#11.6: refuses a URI the proxy would refuse or rewrite (the host would see another path)', async () => {
  for (const uri of ['/health/../api/admin/stats', '/health/%2e%2e/api/admin/stats', '/api%2fadmin', '/api//admin/stats', '/api/projects/./1', 'http://other/api/projects', 'api/projects']) {
    for (const headers of [bearer(token), {}]) {
      const refused = await check({ ...headers, 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': uri });
      expect([uri, refused.status]).toEqual([uri, 400]);
      expect(((await refused.json()) as { code: string }).code).toBe('IAM_BAD_REQUEST');
    }
  }
  const tooLong = await check({ ...bearer(token), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects?' + 'a'.repeat(9000) });
  expect(tooLong.status).toBe(414);
});

describe('#11.6 forward-auth never guesses the original request', () => {
  it.each([
    ['no method header', { 'X-Forwarded-Uri': '/api/projects' }],
    ['no method header (nginx spelling)', { 'X-Original-URI': '/api/projects' }],
    ['an empty method', { 'X-Forwarded-Method': '', 'X-Forwarded-Uri': '/api/projects' }],
    ['an unknown method', { 'X-Forwarded-Method': 'FROB', 'X-Forwarded-Uri': '/api/projects' }],
    ['a lower-case method', { 'X-Forwarded-Method': 'post', 'X-Forwarded-Uri': '/api/projects' }],
    ['CONNECT', { 'X-Forwarded-Method': 'CONNECT', 'X-Forwarded-Uri': '/api/projects' }],
    ['two methods that disagree', { 'X-Forwarded-Method': 'GET', 'X-Original-Method': 'POST', 'X-Forwarded-Uri': '/api/projects' }],
    ['no URI header', { 'X-Forwarded-Method': 'GET' }],
    ['two URIs that disagree', { 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/health', 'X-Original-URI': '/api/admin/stats' }],
    ['a client X-IAM-* header', { 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/health', 'X-IAM-User-Id': 'u-admin' }],
  ])('#11.6: 400 IAM_BAD_REQUEST for %s, with or without a token', async (_name, headers: Record<string, string>) => {
    for (const auth of [bearer(token), {}]) {
      const answer = await check({ ...auth, ...headers });
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { code: string }).code).toBe('IAM_BAD_REQUEST');
    }
  });

  it('#11.6: both spellings with the same value are accepted; a non-GET endpoint method is not', async () => {
    const same = await check({ ...bearer(token), 'X-Forwarded-Method': 'POST', 'X-Original-Method': 'POST', 'X-Forwarded-Uri': '/api/projects' });
    expect(same.status).toBe(200);
    expect(same.headers.get('x-iam-permission')).toBe('project:create');
    const posted = await fetch(`${gateway.url}/iam/authorization/forward-auth`, { method: 'POST', headers: { ...bearer(token), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects' } });
    expect(posted.status).toBe(405);
  });
});

it('passes public routes without a token', async () => {
  expect((await check({ 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/health' })).status).toBe(200);
});

describe('round 3: the cookies the host may see, and the origin the CSRF check compares with', () => {
  const post = { 'X-Forwarded-Method': 'POST', 'X-Forwarded-Uri': '/api/projects' };

  it('answers the client\'s cookies without the gateway\'s in Cookie; none when nothing else is left', async () => {
    const allowed = await check({ ...post, cookie: `theme=dark; __Host-iam-session=${token}; iam-oidc=v1.x; pref=a=b` });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('x-iam-user-id')).toBe('u-alice');
    expect(allowed.headers.get('cookie')).toBe('theme=dark; pref=a=b');
    const only = await check({ ...post, cookie: `__Host-iam-session=${token}` });
    expect([only.status, only.headers.get('cookie')]).toEqual([200, null]);
  });

  it('takes X-Forwarded-Host as its own origin from a trusted proxy only; from any other peer the Host counts', async () => {
    const cookie = `__Host-iam-session=${token}`;
    const proxied = { ...post, cookie, 'x-forwarded-host': 'app.example.test' };
    // This test's loopback client is no trusted proxy of the shared gateway (none configured).
    const forged = await check({ ...proxied, origin: 'https://app.example.test' });
    expect(forged.status).toBe(403);
    expect(((await forged.json()) as { code: string }).code).toBe('IAM_CSRF_REJECTED');
    expect((await check({ ...proxied, origin: `http://${new URL(gateway.url).host}` })).status).toBe(200);
    // A gateway that trusts loopback as its proxy: the proxy's X-Forwarded-Host is the origin, its own Host is not.
    const trusting = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_FORWARD_TRUSTED_PROXIES: '["127.0.0.1", "::1"]' });
    try {
      const trustedCookie = `__Host-iam-session=${(await login(trusting.url, 'alice')).accessToken}`;
      const at = (headers: Record<string, string>): Promise<Response> => fetch(`${trusting.url}/iam/authorization/forward-auth`, { headers: { ...proxied, cookie: trustedCookie, ...headers } });
      expect((await at({ origin: 'https://app.example.test' })).status).toBe(200);
      const other = await at({ origin: `http://${new URL(trusting.url).host}` });
      expect(other.status).toBe(403);
      expect(((await other.json()) as { code: string }).code).toBe('IAM_CSRF_REJECTED');
    } finally {
      await trusting.close();
    }
    expect(await upstream.requests()).toHaveLength(0);
  });
});
