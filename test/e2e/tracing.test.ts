/**
 * OpenTelemetry tracing (docs/observability.md), switched on by the standard OTEL_* variables, exported by the real
 * OTLP/HTTP exporter to a real receiver (a loopback server decoding the JSON payload): the span tree of an allowed
 * proxied request continuing the client's trace (the host receives a traceparent whose parent is the forward span),
 * a denial (its decision id on the span, its trace id on the decision), a resolver call, a login, a forward-auth check
 * (its server span, its denial's trace, a resolver call under it); and the protobuf protocol. Tracing is process-wide (the OpenTelemetry API is global): this file sets the variables for itself.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { startHost, type RunningHost } from '../../examples/host/server';
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { OtlpReceiver, traceToReceiver, type ExportedSpan } from '../support/otlp-receiver';
import { recordedHeader } from '../support/recording-upstream';
import { until } from '../support/wait';
import type { DestinationStream } from 'pino';

const receiver = new OtlpReceiver();
let tracing: Awaited<ReturnType<typeof traceToReceiver>>;
let fixture: GatewayWithUpstream;
let host: RunningHost;
let example: RunningGateway;

beforeAll(async () => {
  tracing = await traceToReceiver(receiver, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'iam-gateway-test' });
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  host = await startHost(0);
  example = await startTestGateway(host.url, { IAM_POLICIES_DIR: join(ROOT, 'policies') });
}, 60_000);
afterAll(async () => {
  await example?.close();
  await host?.close();
  await fixture?.close();
  await tracing?.restore();
});

const byId = (spans: ExportedSpan[], spanId: string | undefined): ExportedSpan | undefined => spans.find((span) => span.spanId === spanId);

describe('a traced proxied request', () => {
  it('continues the client trace; authorize and forward are children of the server span; the host gets the forward span as parent', async () => {
    const { accessToken } = await login(fixture.gateway.url, 'alice');
    await fixture.upstream.clear();
    const traceId = randomBytes(16).toString('hex');
    const clientParent = randomBytes(8).toString('hex');
    const answer = await fetch(`${fixture.gateway.url}/api/projects`, { headers: { ...bearer(accessToken), traceparent: `00-${traceId}-${clientParent}-01`, tracestate: 'vendor=abc' } });
    expect(answer.status).toBe(200);
    const spans = await receiver.waitFor((all) => ['forward', 'authorize', 'GET /api/projects'].every((name) => all.some((span) => span.traceId === traceId && span.name === name)), 'the request spans');
    const trace = spans.filter((span) => span.traceId === traceId);
    const server = trace.find((span) => span.kind === 2)!; // SERVER
    expect(server).toMatchObject({ parentSpanId: clientParent, name: 'GET /api/projects', attributes: { 'http.route': '/api/projects', 'http.request.method': 'GET' } });
    const authorize = trace.find((span) => span.name === 'authorize')!;
    const forward = trace.find((span) => span.name === 'forward')!;
    expect([authorize.parentSpanId, forward.parentSpanId]).toEqual([server.spanId, server.spanId]);
    expect(authorize.attributes).toMatchObject({ 'iam.decision': 'allow', 'iam.permission': 'project:list', 'enduser.id': 'u-alice', 'iam.decision_id': expect.any(String) });
    expect(forward.kind).toBe(3); // CLIENT
    // The host continues the same trace under the forward span.
    const [seen] = await fixture.upstream.requests();
    expect(recordedHeader(seen!, 'traceparent')).toEqual([`00-${traceId}-${forward.spanId}-01`]);
    expect(recordedHeader(seen!, 'tracestate')).toEqual(['vendor=abc']);
    // Never the token in a span.
    expect(JSON.stringify(trace)).not.toContain(accessToken);
  });

  it('a denial: the decision id is on the authorize span, and the decision names its trace', async () => {
    const { accessToken } = await login(fixture.gateway.url, 'alice');
    const answer = await fetch(`${fixture.gateway.url}/api/admin/stats`, { headers: bearer(accessToken) });
    const { decisionId } = (await answer.json()) as { decisionId: string };
    const spans = await receiver.waitFor((all) => all.some((span) => span.attributes['iam.decision_id'] === decisionId), 'denied authorize span');
    const authorize = spans.find((span) => span.attributes['iam.decision_id'] === decisionId)!;
    expect(authorize.attributes).toMatchObject({ 'iam.decision': 'deny', 'iam.step': 'PERMISSION_DENIED', 'http.route': '/api/admin/**' });
    const decision = (await (await fetch(`${fixture.gateway.url}/iam/authorization/decisions/${decisionId}`, { headers: bearer(accessToken) })).json()) as { traceId: string };
    expect(decision.traceId).toBe(authorize.traceId);
  });

  it("a resolver call is a child span of the request's authorize span", async () => {
    const { accessToken } = await login(example.url, 'alice');
    const answer = await fetch(`${example.url}/api/projects/1`, { headers: bearer(accessToken) });
    expect(answer.status).toBe(200);
    // Spans end at different times and may arrive in different exports: wait for the whole chain.
    const isResolve = (span: ExportedSpan): boolean => span.name === 'resolve' && span.attributes['iam.resource.type'] === 'PROJECT';
    const spans = await receiver.waitFor((all) => all.some((span) => isResolve(span) && byId(all, byId(all, span.parentSpanId)?.parentSpanId) !== undefined), 'resolve span and its parents');
    const resolve = spans.find(isResolve)!;
    expect(resolve.attributes['iam.resolver.result']).toBe('found');
    const authorize = byId(spans, resolve.parentSpanId);
    expect(authorize).toMatchObject({ name: 'authorize', attributes: { 'http.route': '/api/projects/:projectId', 'iam.decision': 'allow' } });
    expect(byId(spans, authorize!.parentSpanId)?.kind).toBe(2); // the request's server span
  });

  it('an admin write is a span with the permission it needed, under its request', async () => {
    const { accessToken } = await login(fixture.gateway.url, 'admin');
    const answer = await fetch(`${fixture.gateway.url}/iam/admin/users/u-traced`, { method: 'PUT', headers: { ...bearer(accessToken), 'content-type': 'application/json' }, body: JSON.stringify({ enabled: true }) });
    expect(answer.status).toBe(201);
    const spans = await receiver.waitFor(
      (all) => all.some((span) => span.name === 'admin write' && span.attributes['iam.permission'] === 'iam.admin.users:write' && byId(all, span.parentSpanId) !== undefined),
      'admin write span and its request',
    );
    const write = spans.find((span) => span.name === 'admin write')!;
    expect(write.attributes).toMatchObject({ 'http.request.method': 'PUT', 'enduser.id': 'u-admin' });
    // Named after the route pattern, not the path with the user id in it.
    expect(byId(spans, write.parentSpanId)).toMatchObject({ name: 'PUT /iam/admin/users/:userId', attributes: { 'http.route': '/iam/admin/users/:userId' } });
  });

  it('a login is a span with its authenticator and result, never the username or password', async () => {
    await login(fixture.gateway.url, 'bob');
    const spans = await receiver.waitFor((all) => all.some((span) => span.name === 'login' && span.attributes['enduser.id'] === 'u-bob' && byId(all, span.parentSpanId) !== undefined), 'login span and its request');
    const span = spans.find((candidate) => candidate.name === 'login' && candidate.attributes['enduser.id'] === 'u-bob')!;
    expect(span.attributes).toMatchObject({ 'iam.authenticator': 'users-file', 'iam.login.result': 'success', 'iam.client_type': 'WEB' });
    const server = byId(spans, span.parentSpanId);
    expect(server?.name).toBe('POST /iam/auth/login');
    expect(JSON.stringify(spans)).not.toContain('bob-password');
  });
});

describe('a traced forward-auth check (answered by the front door, not the /iam app)', () => {
  const check = (url: string, headers: Record<string, string>): Promise<Response> => fetch(`${url}/iam/authorization/forward-auth`, { headers });

  it("continues the client trace as a server span with the answer's status; a denial's decision names that trace only from a trusted proxy", async () => {
    const { accessToken } = await login(fixture.gateway.url, 'alice');
    const traceId = randomBytes(16).toString('hex');
    const clientParent = randomBytes(8).toString('hex');
    const answer = await check(fixture.gateway.url, { ...bearer(accessToken), 'x-forwarded-method': 'DELETE', 'x-forwarded-uri': '/api/admin/users', traceparent: `00-${traceId}-${clientParent}-01` });
    expect(answer.status).toBe(403);
    const { decisionId } = (await answer.json()) as { decisionId: string };
    const spans = await receiver.waitFor((all) => all.some((span) => span.traceId === traceId && span.kind === 2), 'the forward-auth server span');
    const server = spans.find((span) => span.traceId === traceId && span.kind === 2)!;
    expect(server).toMatchObject({ parentSpanId: clientParent, name: 'GET /iam/authorization/forward-auth', attributes: { 'http.request.method': 'GET', 'http.response.status_code': 403 } });
    // 127.0.0.1 is no trusted proxy of this gateway: the trace id it chose is not recorded (see "what is recorded").
    const decision = (await (await fetch(`${fixture.gateway.url}/iam/authorization/decisions/${decisionId}`, { headers: bearer(accessToken) })).json()) as { traceId?: string };
    expect(decision.traceId).toBeUndefined();
    expect(JSON.stringify(spans.filter((span) => span.traceId === traceId))).not.toContain(accessToken);
  });

  it("a resolver call while deciding is a child of the check's server span", async () => {
    const { accessToken } = await login(example.url, 'alice');
    const traceId = randomBytes(16).toString('hex');
    const answer = await check(example.url, { ...bearer(accessToken), 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/api/projects/1', traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` });
    expect(answer.status).toBe(200);
    const isResolve = (span: ExportedSpan): boolean => span.traceId === traceId && span.name === 'resolve';
    const spans = await receiver.waitFor((all) => all.some((span) => isResolve(span) && byId(all, span.parentSpanId) !== undefined), 'resolve span under the check');
    const resolve = spans.find(isResolve)!;
    expect(resolve.attributes['iam.resolver.result']).toBe('found');
    expect(byId(spans, resolve.parentSpanId)).toMatchObject({ kind: 2, name: 'GET /iam/authorization/forward-auth', attributes: { 'http.response.status_code': 200 } });
  });
});

const traceparent = (traceId: string): string => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
const newTraceId = (): string => randomBytes(16).toString('hex');
const serverSpanOf = (traceId: string): Promise<ExportedSpan> =>
  receiver.waitFor((all) => all.some((span) => span.traceId === traceId && span.kind === 2), `the server span of trace ${traceId}`).then((all) => all.find((span) => span.traceId === traceId && span.kind === 2)!);

describe('/iam spans are named after route patterns, never after the path the client sent', () => {
  it('the ids in the path (a decision, a session) are in no span name; the route pattern is', async () => {
    const alice = await login(fixture.gateway.url, 'alice');
    const other = await login(fixture.gateway.url, 'alice');
    const denied = await fetch(`${fixture.gateway.url}/api/admin/stats`, { headers: bearer(alice.accessToken) });
    const { decisionId } = (await denied.json()) as { decisionId: string };
    const asked = [
      { method: 'GET', path: `/iam/authorization/decisions/${decisionId}`, route: '/iam/authorization/decisions/:decisionId', status: 200 },
      { method: 'POST', path: `/iam/sessions/${other.sessionId}/revoke`, route: '/iam/sessions/:sessionId/revoke', status: 204 },
      // The forward-auth path matches in any case and with a trailing slash; the span names the endpoint.
      { method: 'GET', path: '/iam/Authorization/Forward-Auth/', route: '/iam/authorization/forward-auth', status: 400 },
    ];
    for (const { method, path, route, status } of asked) {
      const traceId = newTraceId();
      const answer = await fetch(`${fixture.gateway.url}${path}`, { method, headers: { ...bearer(alice.accessToken), traceparent: traceparent(traceId) } });
      expect(answer.status).toBe(status);
      const server = await serverSpanOf(traceId);
      expect(server.name).toBe(`${method} ${route}`);
      if (!route.endsWith('forward-auth')) expect(server.attributes['http.route']).toBe(route);
    }
    const names = receiver.spans.map((span) => span.name).join('\n');
    for (const id of [decisionId, other.sessionId, 'Forward-Auth']) expect(names).not.toContain(id);
  });

  it('an unknown /iam path keeps `METHOD /iam/*`; a body refused before routing and a method the route does not take name the route', async () => {
    const chosen = `client-chosen-${randomBytes(6).toString('hex')}`;
    const cases: Array<{ method: string; path: string; headers: Record<string, string>; body?: string; status: number; name: string }> = [
      { method: 'GET', path: `/iam/${chosen}/x`, headers: {}, status: 404, name: 'GET /iam/*' },
      { method: 'POST', path: '/iam/auth/login', headers: { 'content-type': 'text/plain' }, body: 'x', status: 415, name: 'POST /iam/auth/login' },
      { method: 'DELETE', path: '/iam/auth/login', headers: {}, status: 405, name: 'DELETE /iam/auth/login' },
    ];
    for (const { method, path, headers, body, status, name } of cases) {
      const traceId = newTraceId();
      const answer = await fetch(`${fixture.gateway.url}${path}`, { method, headers: { ...headers, traceparent: traceparent(traceId) }, body });
      expect(answer.status).toBe(status);
      expect((await serverSpanOf(traceId)).name).toBe(name);
    }
    expect(receiver.spans.map((span) => span.name).join('\n')).not.toContain(chosen);
  });
});

/** A pino destination keeping every line written. */
function capture(): { destination: DestinationStream; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  return {
    destination: { write: (chunk: string) => void (text += chunk) },
    lines: () =>
      text
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

describe("what is recorded of a trace (audit rows, decisions, access-log lines): never a trace id an untrusted client chose", () => {
  const started: RunningGateway[] = [];
  let untrusting: { gateway: RunningGateway; log: ReturnType<typeof capture> };
  let trusting: { gateway: RunningGateway; log: ReturnType<typeof capture> };

  beforeAll(async () => {
    const start = async (extra: Record<string, string>): Promise<{ gateway: RunningGateway; log: ReturnType<typeof capture> }> => {
      const log = capture();
      const gateway = await startTestGateway(fixture.upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_ACCESS_LOG: 'denied', ...extra }, { accessLogDestination: log.destination });
      started.push(gateway);
      return { gateway, log };
    };
    untrusting = await start({});
    // The test talks to it from loopback: here that is the proxy in front.
    trusting = await start({ IAM_FORWARD_TRUSTED_PROXIES: '["127.0.0.1", "::1"]' });
  }, 60_000);
  afterAll(() => Promise.all(started.map((gateway) => gateway.close())));

  /** A denied proxied request and a denied forward-auth check, each with `traceId` as the client's when given. */
  async function deny(url: string, token: string, traceId: string | null): Promise<Array<{ decisionId: string; requestId: string }>> {
    const context: Record<string, string> = traceId === null ? {} : { traceparent: traceparent(traceId) };
    const proxied = await fetch(`${url}/api/admin/stats`, { headers: { ...bearer(token), ...context } });
    const checked = await fetch(`${url}/iam/authorization/forward-auth`, { headers: { ...bearer(token), ...context, 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/api/admin/stats' } });
    expect([proxied.status, checked.status]).toEqual([403, 403]);
    return Promise.all([proxied, checked].map(async (answer) => ({ decisionId: ((await answer.json()) as { decisionId: string }).decisionId, requestId: answer.headers.get('x-request-id')! })));
  }

  /** The trace id the decision answers, the one its audit row holds, and the access-log line's (proxied requests). */
  async function recorded(target: { gateway: RunningGateway; log: ReturnType<typeof capture> }, token: string, adminToken: string, denial: { decisionId: string; requestId: string }, proxied: boolean): Promise<unknown[]> {
    const decision = (await (await fetch(`${target.gateway.url}/iam/authorization/decisions/${denial.decisionId}`, { headers: bearer(token) })).json()) as { traceId?: string };
    const row = await until('the audit row', async () => {
      const page = (await (await fetch(`${target.gateway.url}/iam/admin/audit?action=authz.deny&userId=u-alice&limit=100`, { headers: bearer(adminToken) })).json()) as { items: Array<{ decisionId: string | null; details: { traceId?: string } | null }> };
      return page.items.find((item) => item.decisionId === denial.decisionId);
    });
    const line = proxied ? await until('the access-log line', () => target.log.lines().find((entry) => entry.requestId === denial.requestId)) : null;
    return [decision.traceId, row.details?.traceId, ...(proxied ? [line!.traceId] : [])];
  }

  it("an untrusted client's traceparent: the spans continue its trace, but nothing records its trace id", async () => {
    const alice = await login(untrusting.gateway.url, 'alice');
    const admin = await login(untrusting.gateway.url, 'admin');
    const traceId = newTraceId();
    const [proxied, checked] = await deny(untrusting.gateway.url, alice.accessToken, traceId);
    // The host-facing rule stays: the gateway's spans are in the client's trace.
    await receiver.waitFor((all) => all.filter((span) => span.traceId === traceId && span.kind === 2).length === 2, 'both server spans in the client trace');
    expect(await recorded(untrusting, alice.accessToken, admin.accessToken, proxied!, true)).toEqual([undefined, undefined, null]);
    expect(await recorded(untrusting, alice.accessToken, admin.accessToken, checked!, false)).toEqual([undefined, undefined]);
  });

  it('without a traceparent: the trace the gateway started is recorded', async () => {
    const alice = await login(untrusting.gateway.url, 'alice');
    const admin = await login(untrusting.gateway.url, 'admin');
    const [proxied, checked] = await deny(untrusting.gateway.url, alice.accessToken, null);
    const spans = await receiver.waitFor((all) => all.some((span) => span.attributes['iam.decision_id'] === proxied!.decisionId), 'the authorize span of the denial');
    const own = spans.find((span) => span.attributes['iam.decision_id'] === proxied!.decisionId)!.traceId;
    expect(await recorded(untrusting, alice.accessToken, admin.accessToken, proxied!, true)).toEqual([own, own, own]);
    const [fromDecision, fromRow] = (await recorded(untrusting, alice.accessToken, admin.accessToken, checked!, false)) as [string, string];
    expect(fromRow).toBe(fromDecision);
    await receiver.waitFor((all) => all.some((span) => span.traceId === fromDecision && span.name === 'GET /iam/authorization/forward-auth'), "the check's own trace");
  });

  it('from a trusted proxy: the trace it continues is recorded', async () => {
    const alice = await login(trusting.gateway.url, 'alice');
    const admin = await login(trusting.gateway.url, 'admin');
    const traceId = newTraceId();
    const [proxied, checked] = await deny(trusting.gateway.url, alice.accessToken, traceId);
    expect(await recorded(trusting, alice.accessToken, admin.accessToken, proxied!, true)).toEqual([traceId, traceId, traceId]);
    expect(await recorded(trusting, alice.accessToken, admin.accessToken, checked!, false)).toEqual([traceId, traceId]);
  });
});
