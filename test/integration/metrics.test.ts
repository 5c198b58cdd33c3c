/**
 * Every metric of the gateway's registry moves with the event its help text names (read through the management
 * port's /metrics, as Prometheus reads it). A metric no test can move is a metric nobody can alert on.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';

const SHADOW_ROUTE = 'version: 1\nroutes:\n  - path: /shadow/admin\n    methods: [GET]\n    permission: admin:write\n    mode: shadow\n';

let fixture: GatewayWithUpstream;
let gateway: RunningGateway;
let policies: string;
const extra: RunningGateway[] = [];

beforeAll(async () => {
  policies = mkdtempSync(join(tmpdir(), 'iam-metrics-policies-'));
  cpSync(E2E_POLICIES, policies, { recursive: true });
  writeFileSync(join(policies, 'shadow.yaml'), SHADOW_ROUTE);
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: policies, IAM_LOGIN_RATE_LIMIT_MAX_FAILURES: '2' });
  gateway = fixture.gateway;
});

afterAll(async () => {
  for (const other of extra) await other.close();
  await fixture?.close();
  rmSync(policies, { recursive: true, force: true });
});

/** The value of one series from /metrics (0 when the series does not exist yet). */
async function metric(name: string, labels: Record<string, string> = {}, of: RunningGateway = gateway): Promise<number> {
  const text = await (await fetch(`${of.managementUrl}/metrics`)).text();
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split('\n')) {
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = (match[2] ?? '').split(',').filter(Boolean);
    if (wanted.every((pair) => present.includes(pair))) return Number(match[3]);
  }
  return 0;
}

/** How much `event` moves the series. */
async function delta(name: string, labels: Record<string, string>, event: () => Promise<unknown>, of: RunningGateway = gateway): Promise<number> {
  const before = await metric(name, labels, of);
  await event();
  return (await metric(name, labels, of)) - before;
}

const get = (path: string, token?: string): Promise<Response> => fetch(`${gateway.url}${path}`, { headers: token ? bearer(token) : {} });
const forwardAuth = (headers: Record<string, string>): Promise<Response> => fetch(`${gateway.url}/iam/authorization/forward-auth`, { headers });

describe('iam_proxy_requests_total and iam_upstream_duration_seconds', () => {
  it('counts each outcome, and times every forwarded answer', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    expect(await delta('iam_proxy_requests_total', { outcome: 'forwarded' }, () => get('/health'))).toBe(1);
    expect(await delta('iam_upstream_duration_seconds_count', { status_class: '2xx' }, () => get('/api/projects', alice))).toBe(1);
    expect(await delta('iam_proxy_requests_total', { outcome: 'denied' }, () => get('/api/admin/stats', alice))).toBe(1);
    expect(await delta('iam_proxy_requests_total', { outcome: 'unauthenticated' }, () => get('/api/projects'))).toBe(1);
    expect(await delta('iam_proxy_requests_total', { outcome: 'refused' }, () => get('/api/%00'))).toBe(1);
    const down = await startTestGateway('http://127.0.0.1:9', { IAM_POLICIES_DIR: policies });
    extra.push(down);
    expect(await delta('iam_proxy_requests_total', { outcome: 'error' }, () => fetch(`${down.url}/health`), down)).toBe(1);
  });
});

describe('iam_decisions_total', () => {
  it('counts allow, deny (by step) and shadow_deny', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    expect(await delta('iam_decisions_total', { result: 'allow', step: 'none' }, () => get('/api/projects/1', alice))).toBe(1);
    expect(await delta('iam_decisions_total', { result: 'deny', step: 'PERMISSION_DENIED' }, () => get('/api/admin/stats', alice))).toBe(1);
    expect(await delta('iam_decisions_total', { result: 'shadow_deny', step: 'PERMISSION_DENIED' }, () => get('/shadow/admin', alice))).toBe(1);
    // A shadow route lets the request through, but its would-be denial is not an allow.
    expect(await delta('iam_decisions_total', { result: 'allow', step: 'none' }, () => get('/shadow/admin', alice))).toBe(0);
  });
});

describe('iam_forward_auth_requests_total', () => {
  it('counts each outcome of a forward-auth check; its decisions count in iam_decisions_total too', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    const allowed = { ...bearer(alice), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects/1' };
    expect(await delta('iam_forward_auth_requests_total', { outcome: 'allowed' }, () => forwardAuth(allowed))).toBe(1);
    expect(await delta('iam_decisions_total', { result: 'allow', step: 'none' }, () => forwardAuth(allowed))).toBe(1);
    expect(await delta('iam_forward_auth_requests_total', { outcome: 'denied' }, () => forwardAuth({ ...allowed, 'X-Forwarded-Uri': '/api/admin/stats' }))).toBe(1);
    expect(await delta('iam_forward_auth_requests_total', { outcome: 'unauthenticated' }, () => forwardAuth({ 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects' }))).toBe(1);
    expect(await delta('iam_forward_auth_requests_total', { outcome: 'refused' }, () => forwardAuth({ ...bearer(alice), 'X-Forwarded-Method': 'GET' }))).toBe(1);
    // Forward-auth checks are not proxied requests.
    expect(await delta('iam_proxy_requests_total', { outcome: 'forwarded' }, () => forwardAuth(allowed))).toBe(0);
  });
});

describe('iam_logins_total', () => {
  const attempt = (username: string, password: string, of: RunningGateway = gateway): Promise<Response> =>
    fetch(`${of.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password, clientType: 'WEB' }) });

  it('counts success, failure and rate_limited', async () => {
    expect(await delta('iam_logins_total', { result: 'success' }, () => attempt('bob', 'bob-password'))).toBe(1);
    expect(await delta('iam_logins_total', { result: 'failure' }, () => attempt('metrics-nobody', 'wrong'))).toBe(1);
    await attempt('metrics-nobody', 'wrong');
    expect(await delta('iam_logins_total', { result: 'rate_limited' }, () => attempt('metrics-nobody', 'wrong'))).toBe(1);
  });

  it('counts not_configured (no authenticator) and error (the authenticator cannot be reached)', async () => {
    const off = await startTestGateway(fixture.upstream.url, { IAM_POLICIES_DIR: policies, IAM_AUTHENTICATOR_TYPE: 'none' });
    extra.push(off);
    expect(await delta('iam_logins_total', { result: 'not_configured' }, () => attempt('bob', 'bob-password', off), off)).toBe(1);
    const broken = await startTestGateway(fixture.upstream.url, { IAM_POLICIES_DIR: policies, IAM_AUTHENTICATOR_TYPE: 'http', IAM_AUTHENTICATOR_URL: 'http://127.0.0.1:9/login' });
    extra.push(broken);
    expect(await delta('iam_logins_total', { result: 'error' }, () => attempt('bob', 'bob-password', broken), broken)).toBe(1);
  });
});

describe('policy, cache and channel gauges', () => {
  it('iam_policy_reloads_total and iam_policy_routes follow loads and reloads', async () => {
    const routes = gateway.services!.policy.current.routes.length;
    expect(await metric('iam_policy_routes')).toBe(routes);
    writeFileSync(join(policies, 'broken.yaml'), 'version: 1\nroutes:\n  - path: /x\n    methods: [NOPE]\n');
    expect(await delta('iam_policy_reloads_total', { result: 'failure' }, () => gateway.services!.policyReloader.reload('test'))).toBe(1);
    rmSync(join(policies, 'broken.yaml'));
    writeFileSync(join(policies, 'more.yaml'), 'version: 1\nroutes:\n  - path: /more\n    methods: [GET]\n    public: true\n');
    expect(await delta('iam_policy_reloads_total', { result: 'success' }, () => gateway.services!.policyReloader.reload('test'))).toBe(1);
    expect(await metric('iam_policy_routes')).toBe(routes + 1);
  });

  it('iam_session_cache_entries counts the cached sessions; iam_store_events_connected is 1 while subscribed', async () => {
    const carol = (await login(gateway.url, 'bob')).accessToken;
    expect(await delta('iam_session_cache_entries', {}, () => get('/api/projects', carol))).toBeGreaterThanOrEqual(1);
    expect(await metric('iam_store_events_connected')).toBe(1);
  });

  it('every iam_ metric of the registry is one of those above (a new metric needs its test here)', async () => {
    const names = (await gateway.metrics.registry.getMetricsAsJSON()).map((m) => m.name).filter((name) => name.startsWith('iam_') && !/^iam_(process|nodejs)_/.test(name));
    expect(names.sort()).toEqual(
      [
        // iam_http_requests_total, iam_http_request_duration_seconds, iam_decision_duration_seconds: request-metrics.test.ts
        'iam_decision_duration_seconds',
        'iam_decisions_total',
        'iam_forward_auth_requests_total',
        'iam_http_request_duration_seconds',
        'iam_http_requests_total',
        'iam_logins_total',
        'iam_policy_reloads_total',
        'iam_policy_routes',
        'iam_proxy_requests_total',
        'iam_session_cache_entries',
        'iam_store_events_connected',
        'iam_upstream_duration_seconds',
      ].sort(),
    );
  });
});
