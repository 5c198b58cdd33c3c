/**
 * End to end: login through the gateway, then host requests through the policy, against a real
 * upstream process that records what it receives.
 */
import { request as httpRequest } from 'node:http';
import { hashToken } from '../../src/domain/token-hash';
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let alice: Awaited<ReturnType<typeof login>>;
let bob: Awaited<ReturnType<typeof login>>;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  ({ upstream, gateway } = fixture);
  alice = await login(gateway.url, 'alice');
  bob = await login(gateway.url, 'bob');
});

afterAll(() => fixture?.close());

beforeEach(() => upstream.clear());

/** Sends a raw request line, so tests control the exact request target and headers. */
function rawRequest(path: string, headers: Record<string, string | string[]> = {}, method = 'GET', body?: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: gateway.port, method, path, headers, agent: false }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe('login', () => {
  it('returns an AuthenticationResult with the first matching profile active', () => {
    expect(alice.accessToken).toMatch(/^iamt_[A-Za-z0-9_-]{43}$/);
    expect(typeof alice.sessionId).toBe('string');
    expect(new Date(alice.expiresAt).getTime()).toBeGreaterThan(Date.now());
    expect(alice.principal).toMatchObject({
      userId: 'u-alice',
      identityId: 'id-alice',
      identityDomain: 'example.com',
      activeProfileId: 'p-alice-editor',
      authorizationVersion: expect.any(Number),
    });
  });

  it.each([
    ['wrong password', { username: 'alice', password: 'nope', clientType: 'WEB' }],
    ['unknown user', { username: 'mallory', password: 'x', clientType: 'WEB' }],
    ['disabled user', { username: 'eve', password: 'eve-password', clientType: 'WEB' }],
  ])('refuses %s with 401 IAM_INVALID_CREDENTIALS', async (_name, body) => {
    const response = await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(response.status).toBe(401);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await response.json()).toMatchObject({ status: 401, code: 'IAM_INVALID_CREDENTIALS', requestId: expect.any(String) });
  });

  it.each([
    ['unknown clientType', { username: 'alice', password: 'alice-password', clientType: 'TOASTER' }, '/clientType'],
    ['missing password', { username: 'alice', clientType: 'WEB' }, '/password'],
    ['unknown property', { username: 'alice', password: 'alice-password', clientType: 'WEB', admin: true }, '/admin'],
  ])('refuses %s with 400 IAM_VALIDATION_FAILED naming the pointer', async (_name, body, pointer) => {
    const response = await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(response.status).toBe(400);
    const problem = (await response.json()) as { code: string; errors: Array<{ pointer: string }> };
    expect(problem.code).toBe('IAM_VALIDATION_FAILED');
    expect(problem.errors.map((e) => e.pointer)).toContain(pointer);
  });

  it('refuses malformed JSON with 400 IAM_VALIDATION_FAILED', async () => {
    const response = await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":' });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { code: string }).code).toBe('IAM_VALIDATION_FAILED');
  });

  it('keeps the token record under the hash of the token, never the token itself', async () => {
    const store = gateway.services!.store;
    const record = await store.getToken(hashToken(alice.accessToken));
    expect(record).toMatchObject({ sessionId: alice.sessionId, principal: { userId: 'u-alice' } });
    expect(await store.getToken(alice.accessToken)).toBeNull();
  });
});

describe('GET /iam/auth/me', () => {
  it('returns the principal for a valid token', async () => {
    const response = await fetch(`${gateway.url}/iam/auth/me`, { headers: bearer(alice.accessToken) });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ userId: 'u-alice', activeProfileId: 'p-alice-editor' });
  });

  it.each([
    ['no token', {}, false],
    ['unknown token', bearer('iamt_' + 'A'.repeat(43)), true],
    ['malformed token', { authorization: 'Bearer not a token' }, true],
  ])('answers 401 IAM_UNAUTHENTICATED with a Bearer challenge for %s', async (_name, headers, tokenSent) => {
    const response = await fetch(`${gateway.url}/iam/auth/me`, { headers });
    expect(response.status).toBe(401);
    expect(((await response.json()) as { code: string }).code).toBe('IAM_UNAUTHENTICATED');
    const challenge = response.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer /);
    expect(challenge.includes('invalid_token')).toBe(tokenSent);
  });

  it('#11.20: refuses a token in the query string (400 IAM_BAD_REQUEST): it is never read from there, nor forwarded', async () => {
    const response = await fetch(`${gateway.url}/iam/auth/me?access_token=${alice.accessToken}`);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { code: string }).code).toBe('IAM_BAD_REQUEST');
  });
});

describe('host requests through the policy', () => {
  it('forwards a public route without a token', async () => {
    const response = await rawRequest('/health');
    expect(response.status).toBe(200);
    const [received] = await upstream.requests();
    expect(received).toMatchObject({ method: 'GET', url: '/health' });
  });

  it('answers 401 on a protected route without a token, and the host sees nothing', async () => {
    const response = await rawRequest('/api/projects');
    expect(response.status).toBe(401);
    expect(JSON.parse(response.body)).toMatchObject({ code: 'IAM_UNAUTHENTICATED', status: 401 });
    expect(response.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('forwards an allowed request with the identity headers of docs/http-contract.md', async () => {
    const response = await rawRequest('/api/projects?sort=name', bearer(alice.accessToken));
    expect(response.status).toBe(200);
    const [received] = await upstream.requests();
    expect(received!.url).toBe('/api/projects?sort=name');
    const headers = headerMap(received!.rawHeaders);
    expect(headers['x-iam-user-id']).toEqual(['u-alice']);
    expect(headers['x-iam-identity-id']).toEqual(['id-alice']);
    expect(headers['x-iam-identity-domain']).toEqual(['example.com']);
    expect(headers['x-iam-profile-id']).toEqual(['p-alice-editor']);
    expect(headers['x-iam-session-id']).toEqual([alice.sessionId]);
    expect(headers['x-iam-permission']).toEqual(['project:list']);
    expect(headers['x-request-id']).toHaveLength(1);
    expect(headers['x-forwarded-for']).toEqual(['127.0.0.1']);
    expect(headers.authorization).toBeUndefined();
  });

  it('removes every client-sent X-IAM-* header, whatever its spelling', async () => {
    await rawRequest('/api/projects', {
      ...bearer(alice.accessToken),
      'X-IAM-User-Id': 'u-admin',
      'x-iam-profile-id': 'p-admin',
      'X-Iam-Permission': '*:*',
      'X-IAM-Assertion': 'forged',
      'X-Request-Id': 'client-chosen',
      'X-Forwarded-For': '10.9.9.9',
    });
    const [received] = await upstream.requests();
    const headers = headerMap(received!.rawHeaders);
    expect(headers['x-iam-user-id']).toEqual(['u-alice']);
    expect(headers['x-iam-profile-id']).toEqual(['p-alice-editor']);
    expect(headers['x-iam-permission']).toEqual(['project:list']);
    expect(headers['x-iam-assertion']).toBeUndefined();
    expect(headers['x-request-id']).not.toContain('client-chosen');
    expect(headers['x-forwarded-for']).toEqual(['127.0.0.1']);
  });

  it('denies a request the active profile lacks the permission for with 403 IAM_ACCESS_DENIED', async () => {
    const response = await rawRequest('/api/admin/stats', bearer(alice.accessToken));
    expect(response.status).toBe(403);
    const problem = JSON.parse(response.body) as Record<string, unknown>;
    expect(problem).toMatchObject({ code: 'IAM_ACCESS_DENIED', status: 403, decisionId: expect.any(String), step: 'PERMISSION_DENIED' });
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('applies the route permission over the group permission (method level wins)', async () => {
    // bob's editor profile has project:create; the group default project:read alone would not do.
    expect((await rawRequest('/api/projects', { ...bearer(bob.accessToken), 'content-type': 'application/json' }, 'POST', '{"name":"x"}')).status).toBe(200);
    const [received] = await upstream.requests();
    expect(received).toMatchObject({ method: 'POST', bodyText: '{"name":"x"}' });
    expect(headerMap(received!.rawHeaders)['x-iam-permission']).toEqual(['project:create']);
  });

  it('denies an undeclared route by default with 403 and step ROUTE_NOT_DECLARED', async () => {
    const response = await rawRequest('/api/unknown', bearer(alice.accessToken));
    expect(response.status).toBe(403);
    expect(JSON.parse(response.body)).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'ROUTE_NOT_DECLARED' });
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('lets GET routes answer HEAD', async () => {
    const response = await rawRequest('/api/projects', bearer(alice.accessToken), 'HEAD');
    expect(response.status).toBe(200);
    const [received] = await upstream.requests();
    expect(received).toMatchObject({ method: 'HEAD', url: '/api/projects' });
  });

  it('lets a route without permission through for any authenticated user', async () => {
    expect((await rawRequest('/api/whoami', bearer(alice.accessToken))).status).toBe(200);
    expect((await rawRequest('/api/whoami')).status).toBe(401);
  });
});

describe('upstream failures', () => {
  it('answers 502 IAM_UPSTREAM_UNAVAILABLE as problem+json when the host is down', async () => {
    const down = await startTestGateway('http://127.0.0.1:9', { IAM_POLICIES_DIR: E2E_POLICIES });
    try {
      const response = await fetch(`${down.url}/health`);
      expect(response.status).toBe(502);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(((await response.json()) as { code: string }).code).toBe('IAM_UPSTREAM_UNAVAILABLE');
    } finally {
      await down.close();
    }
  });
});

describe('management port', () => {
  it('serves liveness, readiness with details, and metrics', async () => {
    expect((await fetch(`${gateway.managementUrl}/health/live`)).status).toBe(200);
    const ready = await fetch(`${gateway.managementUrl}/health/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', checks: { database: { ok: true }, tokenStore: { ok: true }, policy: { ok: true } } });
    const metrics = await (await fetch(`${gateway.managementUrl}/metrics`)).text();
    expect(metrics).toContain('iam_proxy_requests_total');
  });

  it('counts forwarded requests and times them by the status class of the host answer', async () => {
    const read = async (): Promise<{ forwarded: number; timed2xx: number }> => {
      const text = await (await fetch(`${gateway.managementUrl}/metrics`)).text();
      const value = (pattern: RegExp): number => Number(pattern.exec(text)?.[1] ?? 0);
      return {
        forwarded: value(/^iam_proxy_requests_total\{outcome="forwarded"\} (\d+)$/m),
        timed2xx: value(/^iam_upstream_duration_seconds_count\{status_class="2xx"\} (\d+)$/m),
      };
    };
    const before = await read();
    for (let i = 0; i < 3; i++) expect((await rawRequest('/health')).status).toBe(200);
    const after = await read();
    expect(after.forwarded - before.forwarded).toBe(3);
    expect(after.timed2xx - before.timed2xx).toBe(3);
  });

  it('does not serve the management endpoints on the proxy port', async () => {
    const response = await rawRequest('/metrics');
    expect(response.status).toBe(403);
  });
});

function headerMap(raw: string[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (let i = 0; i < raw.length; i += 2) (out[raw[i]!.toLowerCase()] ??= []).push(raw[i + 1]!);
  return out;
}

describe('a browser that is denied', () => {
  const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

  it('gets a 403 HTML page with the step and decisionId; the decision behind it is the one an API client gets', async () => {
    const page = await fetch(`${gateway.url}/api/admin/stats`, { headers: { ...bearer(alice.accessToken), accept: BROWSER } });
    expect(page.status).toBe(403);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await page.text();
    const decisionId = /<dt>Decision id<\/dt><dd><code>([0-9a-f-]{36})<\/code>/.exec(html)?.[1];
    expect(decisionId).toEqual(expect.any(String));
    expect(html).toContain('<code>PERMISSION_DENIED</code>');
    const decision = await fetch(`${gateway.url}/iam/authorization/decisions/${decisionId}`, { headers: bearer(alice.accessToken) });
    expect(((await decision.json()) as { failedStep: string }).failedStep).toBe('PERMISSION_DENIED');
    expect(await upstream.requests()).toEqual([]);
  });

  it('API clients (curl, fetch, JSON) keep the problem+json answer; a browser without a session is sent to the login', async () => {
    for (const accept of ['*/*', 'application/json', 'application/json, text/html;q=0.5']) {
      const answer = await fetch(`${gateway.url}/api/admin/stats`, { headers: { ...bearer(alice.accessToken), accept } });
      expect([accept, answer.status, answer.headers.get('content-type')]).toEqual([accept, 403, 'application/problem+json']);
    }
    const anonymous = await fetch(`${gateway.url}/api/admin/stats`, { headers: { accept: BROWSER }, redirect: 'manual' });
    expect([anonymous.status, anonymous.headers.get('location')]).toEqual([302, '/iam/login?returnTo=%2Fapi%2Fadmin%2Fstats']);
    // A browser that sent a bearer (a script, not a navigation) keeps the 401 problem.
    const scripted = await fetch(`${gateway.url}/api/admin/stats`, { headers: { accept: BROWSER, authorization: 'Bearer iamt_not-a-live-token-at-all-xxxxxxxxxxxxxxxxxxxx' }, redirect: 'manual' });
    expect([scripted.status, scripted.headers.get('content-type')]).toEqual([401, 'application/problem+json']);
  });
});
