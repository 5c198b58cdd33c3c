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
import { metricDelta, metricValue } from '../support/scrape';
import { until } from '../support/wait';

const SHADOW_ROUTE = 'version: 1\nroutes:\n  - path: /shadow/admin\n    methods: [GET]\n    permission: admin:write\n    mode: shadow\n';
/** Resolvers on the recording upstream (paths resolve against upstream.url): /status/<code> answers that code, /hang never. */
const RESOLVED_ROUTES = `version: 1
resources:
  METRICS_DOC:
    resolver: { url: "/status/{id}" }
  METRICS_SLOW:
    resolver: { url: "/hang/{id}", timeout: 200ms }
routes:
  - path: /metrics-doc/:code
    methods: [GET]
    permission: project:read
    resource: { type: METRICS_DOC, id: code, access: READ }
  - path: /metrics-slow/:id
    methods: [GET]
    permission: project:read
    resource: { type: METRICS_SLOW, id: id, access: READ }
`;

let fixture: GatewayWithUpstream;
let gateway: RunningGateway;
let policies: string;
const extra: RunningGateway[] = [];

beforeAll(async () => {
  policies = mkdtempSync(join(tmpdir(), 'iam-metrics-policies-'));
  cpSync(E2E_POLICIES, policies, { recursive: true });
  writeFileSync(join(policies, 'shadow.yaml'), SHADOW_ROUTE);
  writeFileSync(join(policies, 'resolved.yaml'), RESOLVED_ROUTES);
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: policies, IAM_LOGIN_RATE_LIMIT_MAX_FAILURES: '2', IAM_AUDIT_ANONYMOUS_DENIALS_PER_MINUTE: '1' });
  gateway = fixture.gateway;
});

afterAll(async () => {
  for (const other of extra) await other.close();
  await fixture?.close();
  rmSync(policies, { recursive: true, force: true });
});

/** The value of one series from /metrics (0 when the series does not exist yet). */
const metric = (name: string, labels: Record<string, string> = {}, of: RunningGateway = gateway): Promise<number> => metricValue(of.managementUrl, name, labels);

/** How much `event` moves the series. */
const delta = (name: string, labels: Record<string, string>, event: () => Promise<unknown>, of: RunningGateway = gateway): Promise<number> =>
  metricDelta(of.managementUrl, name, labels, event);

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

describe('iam_host_checks_total', () => {
  it('counts each check of POST /iam/authorization/check by result', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    const check = (permissionCode: string): Promise<Response> =>
      fetch(`${gateway.url}/iam/authorization/check`, { method: 'POST', headers: { ...bearer(alice), 'content-type': 'application/json' }, body: JSON.stringify({ checks: [{ permissionCode }] }) });
    expect(await delta('iam_host_checks_total', { result: 'allowed' }, () => check('project:read'))).toBe(1);
    expect(await delta('iam_host_checks_total', { result: 'denied' }, () => check('admin:write'))).toBe(1);
  });
});

describe('iam_caller_resolutions_refused_total', () => {
  it('counts the resolutions a check asks beyond its call\'s bound (iam.authz.caller-resolutions.per-call, 20); such a check is an error of iam_host_checks_total', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    const checks = Array.from({ length: 21 }, (_, i) => ({ permissionCode: 'project:read', resource: { type: 'METRICS_DOC', id: `${200 + i}`, access: 'READ' } }));
    const call = (): Promise<Response> =>
      fetch(`${gateway.url}/iam/authorization/check`, { method: 'POST', headers: { ...bearer(alice), 'content-type': 'application/json' }, body: JSON.stringify({ checks }) });
    expect(await delta('iam_caller_resolutions_refused_total', { reason: 'per_call' }, call)).toBe(1);
    let results: Array<{ status: number; failedStep: string | null }> = [];
    const errors = await delta('iam_host_checks_total', { result: 'error' }, async () => (results = ((await (await call()).json()) as { results: typeof results }).results));
    expect(results[20]).toMatchObject({ status: 429, failedStep: 'RESOLUTION_BUDGET_EXCEEDED' });
    expect(errors).toBe(results.filter((result) => result.status >= 500 || result.status === 429).length);
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
  it('iam_policy_reloads_total, iam_policy_routes and iam_policy_reload_failing follow loads and reloads', async () => {
    const routes = gateway.services!.policy.current.routes.length;
    expect(await metric('iam_policy_routes')).toBe(routes);
    const loadedAtStart = await metric('iam_policy_loaded_timestamp_seconds');
    expect(loadedAtStart).toBeGreaterThan(Date.now() / 1000 - 600);
    expect(loadedAtStart).toBeLessThanOrEqual(Date.now() / 1000);
    expect(await metric('iam_policy_reload_failing')).toBe(0);
    writeFileSync(join(policies, 'broken.yaml'), 'version: 1\nroutes:\n  - path: /x\n    methods: [NOPE]\n');
    expect(await delta('iam_policy_reloads_total', { result: 'failure' }, () => gateway.services!.policyReloader.reload('test'))).toBe(1);
    // A failed reload changes nothing that serves: the loaded policy keeps its age.
    expect(await metric('iam_policy_loaded_timestamp_seconds')).toBe(loadedAtStart);
    expect(await metric('iam_policy_reload_failing')).toBe(1);
    // Whatever the counter did (a broken directory is counted once per change), the gauge the alert reads stays 1.
    await gateway.services!.policyReloader.reload('test');
    expect(await metric('iam_policy_reload_failing')).toBe(1);
    // Reverted to what serves: nothing is failing any more.
    rmSync(join(policies, 'broken.yaml'));
    await gateway.services!.policyReloader.reload('test');
    expect(await metric('iam_policy_reload_failing')).toBe(0);
    writeFileSync(join(policies, 'broken.yaml'), 'version: 1\nroutes:\n  - path: /x\n    methods: [NOPE]\n');
    await gateway.services!.policyReloader.reload('test');
    expect(await metric('iam_policy_reload_failing')).toBe(1);
    rmSync(join(policies, 'broken.yaml'));
    writeFileSync(join(policies, 'more.yaml'), 'version: 1\nroutes:\n  - path: /more\n    methods: [GET]\n    public: true\n');
    const beforeReload = Date.now() / 1000;
    expect(await delta('iam_policy_reloads_total', { result: 'success' }, () => gateway.services!.policyReloader.reload('test'))).toBe(1);
    expect(await metric('iam_policy_routes')).toBe(routes + 1);
    expect(await metric('iam_policy_reload_failing')).toBe(0);
    const reloadedAt = await metric('iam_policy_loaded_timestamp_seconds');
    expect(reloadedAt).toBeGreaterThan(loadedAtStart);
    expect(reloadedAt).toBeGreaterThanOrEqual(Math.floor(beforeReload * 1000) / 1000);
    expect(reloadedAt).toBeLessThanOrEqual(Date.now() / 1000);
  });

  it('iam_session_cache_entries counts the cached sessions; iam_store_events_connected is 1 while subscribed', async () => {
    const carol = (await login(gateway.url, 'bob')).accessToken;
    expect(await delta('iam_session_cache_entries', {}, () => get('/api/projects', carol))).toBeGreaterThanOrEqual(1);
    expect(await metric('iam_store_events_connected')).toBe(1);
  });

  it('every iam_ metric of the registry is one of those in this file (a new metric needs its test here)', async () => {
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
        // #16
        'iam_resolver_requests_total',
        'iam_resolver_duration_seconds',
        'iam_store_operations_total',
        'iam_revocation_events_total',
        'iam_revocation_propagation_seconds',
        'iam_policy_loaded_timestamp_seconds',
        'iam_policy_reload_failing',
        'iam_audit_queue_depth',
        'iam_audit_events_dropped_total',
        'iam_audit_events_written_total',
        'iam_audit_events_spooled_total',
        // iam_audit_spool_bytes moving with a full buffer: audit-outage.test.ts
        'iam_audit_spool_bytes',
        'iam_audit_spool_limit_bytes',
        'iam_password_verifications_starved_total',
        'iam_host_checks_total',
        'iam_caller_resolutions_refused_total',
        // The eviction gauges of a Redis token store: revocation-durable.test.ts
        'iam_token_store_evicted_keys',
        'iam_token_store_eviction_policy',
        // The candidate policy's metrics (a gateway with iam.policy.candidate-dir): e2e/policy-candidate.test.ts
        'iam_policy_candidate_divergences_total',
        'iam_policy_candidate_reloads_total',
        'iam_policy_candidate_routes',
        'iam_policy_candidate_loaded_timestamp_seconds',
      ].sort(),
    );
  });
});

describe('#16 iam_resolver_requests_total and iam_resolver_duration_seconds', () => {
  it('count each resolver call of a proxied request by resource type and result, and time each one', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    const doc = { type: 'METRICS_DOC' };
    expect(await delta('iam_resolver_requests_total', { ...doc, result: 'ok' }, () => get('/metrics-doc/200', alice))).toBe(1);
    expect(await delta('iam_resolver_requests_total', { ...doc, result: 'not_found' }, () => get('/metrics-doc/404', alice))).toBe(1);
    expect(await delta('iam_resolver_requests_total', { ...doc, result: 'error' }, () => get('/metrics-doc/503', alice))).toBe(1);
    expect(await delta('iam_resolver_requests_total', { type: 'METRICS_SLOW', result: 'timeout' }, () => get('/metrics-slow/1', alice))).toBe(1);
    expect(await delta('iam_resolver_duration_seconds_count', doc, () => get('/metrics-doc/200', alice))).toBe(1);
    expect(await metric('iam_resolver_duration_seconds_sum', { type: 'METRICS_SLOW' })).toBeGreaterThanOrEqual(0.2);
    // No session, no resolver call (refused before it): nothing counted.
    const anonymous = await delta('iam_resolver_requests_total', { ...doc, result: 'ok' }, async () => expect((await get('/metrics-doc/200')).status).toBe(401));
    expect(anonymous).toBe(0);
  });
});

describe('#16 iam_store_operations_total', () => {
  it('counts the token store round trips of a login and of an unknown token, as ok', async () => {
    expect(await delta('iam_store_operations_total', { operation: 'put', result: 'ok' }, () => login(gateway.url, 'alice'))).toBeGreaterThanOrEqual(1);
    expect(await delta('iam_store_operations_total', { operation: 'rate_limit', result: 'ok' }, () => login(gateway.url, 'alice'))).toBeGreaterThanOrEqual(1);
    // A token no cache knows: one store read, which answers (nothing), so ok.
    expect(await delta('iam_store_operations_total', { operation: 'get', result: 'ok' }, () => get('/api/projects', `iamt_${'x'.repeat(43)}`))).toBe(1);
    expect(await metric('iam_store_operations_total', { operation: 'get', result: 'error' })).toBe(0);
  });

  it('counts a round trip the store cannot answer as error (the request fails closed)', async () => {
    const broken = await startTestGateway(fixture.upstream.url, { IAM_POLICIES_DIR: policies });
    extra.push(broken);
    await broken.services!.store.close(); // the adapter itself: every later call rejects
    const failed = await delta(
      'iam_store_operations_total',
      { operation: 'get', result: 'error' },
      async () => expect((await fetch(`${broken.url}/api/projects`, { headers: bearer(`iamt_${'y'.repeat(43)}`) })).status).toBe(503),
      broken,
    );
    expect(failed).toBe(1);
  });
});

describe('#16 iam_revocation_events_total and iam_revocation_propagation_seconds', () => {
  it('a logout is published (sent) and heard on the channel (received, timed from its sentAt)', async () => {
    const session = await login(gateway.url, 'alice');
    const labels = (direction: string) => ({ direction, type: 'session-ended' });
    const sent = await metric('iam_revocation_events_total', labels('sent'));
    const received = await metric('iam_revocation_events_total', labels('received'));
    const timed = await metric('iam_revocation_propagation_seconds_count');
    const logout = await fetch(`${gateway.url}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) });
    expect(logout.status).toBeLessThan(300);
    await until('the end of the session is heard', async () => (await metric('iam_revocation_events_total', labels('received'))) > received);
    // The session service publishes it, and the change feed may deliver its durable record again.
    expect((await metric('iam_revocation_events_total', labels('sent'))) - sent).toBeGreaterThanOrEqual(1);
    expect((await metric('iam_revocation_propagation_seconds_count')) - timed).toBeGreaterThanOrEqual(1);
    expect(await metric('iam_revocation_propagation_seconds_bucket', { le: '1' })).toBe(await metric('iam_revocation_propagation_seconds_count'));
  });
});

describe('#16 audit metrics', () => {
  it('iam_audit_events_written_total moves when a login is audited; iam_audit_queue_depth is back to 0 once written', async () => {
    const before = await metric('iam_audit_events_written_total');
    await login(gateway.url, 'alice');
    await until('the login is written', async () => (await metric('iam_audit_events_written_total')) > before);
    await until('the queue is empty', async () => (await metric('iam_audit_queue_depth')) === 0);
  });

  it('anonymous denials of undeclared routes beyond the per-minute budget count as dropped (rate_limited)', async () => {
    const dropped = await delta('iam_audit_events_dropped_total', { reason: 'rate_limited' }, async () => {
      for (let i = 0; i < 4; i++) expect((await get(`/metrics-undeclared/${i}`)).status).toBeGreaterThanOrEqual(400);
    });
    // Budget 1 a minute: at most 2 admitted (should the minute turn meanwhile).
    expect(dropped).toBeGreaterThanOrEqual(2);
    expect(await metric('iam_audit_events_dropped_total', { reason: 'buffer_full' })).toBe(0);
  });

  it('iam_audit_spool_limit_bytes is iam.audit.spool-max-bytes; with the database answering nothing is spooled', async () => {
    expect(await metric('iam_audit_spool_limit_bytes')).toBe(1024 ** 3);
    expect(await metric('iam_audit_spool_bytes')).toBe(0);
    expect(await metric('iam_audit_events_spooled_total', { reason: 'buffer_full' })).toBe(0);
  });
});
