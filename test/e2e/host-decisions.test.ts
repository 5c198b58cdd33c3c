/**
 * Decisions for the host (docs/host-integration.md): `POST /iam/authorization/check` and `/plan` through a real
 * gateway — each credential kind (the user's bearer, the session cookie, the X-IAM-Assertion a host received, a
 * service naming a subject), each result status, the no-oracle rule, one resolver call per distinct resource within
 * a call, revocation taking effect at once, and the host library (`iam-gateway/host`) against the same gateway.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createHostAuthorization, HostAuthorizationError } from '../../src/host';
import { createTestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { recordedHeader, startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { answerScope, startResolverHost, type ResolverHost } from '../support/resolver-host';

let dir: string;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let resolver: ResolverHost;
/** The resolver host: task 5 is in project 1, task 6 in project 2, task 404 does not exist, task 502 fails. */
const resolved: string[] = [];

beforeAll(async () => {
  await (await createTestDatabase()).close();
  resolver = await startResolverHost((id, res, req) => {
    resolved.push(req.url ?? '');
    if (id === '404') res.writeHead(404).end();
    else if (id === '502') res.writeHead(500).end();
    else answerScope(res, 'PROJECT', id === '5' ? '1' : '2');
  });
  dir = mkdtempSync(join(tmpdir(), 'iam-host-decisions-'));
  mkdirSync(join(dir, 'policies'));
  writeFileSync(
    join(dir, 'policies', 'routes.yaml'),
    `version: 1
default: deny
resources:
  TASK:
    resolver: { url: "${resolver.origin}/tasks/{id}" }
routes:
  - { path: /api/projects, methods: [GET], permission: project:list }
  - { path: /api/projects/:projectId, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/projects/:projectId, methods: [PUT], permission: project:update, resource: { type: PROJECT, id: projectId, access: WRITE } }
  - { path: /api/tasks/:taskId, methods: [GET], permission: task:read, resource: { type: TASK, id: taskId, access: READ } }
  - path: /billing
    audience: billing
    routes:
      - { path: /projects, methods: [GET], permission: project:list }
      - { path: /projects/:projectId, methods: [PUT], permission: project:update, resource: { type: PROJECT, id: projectId, access: WRITE } }
`,
  );
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, {
    IAM_POLICIES_DIR: join(dir, 'policies'),
    IAM_FORWARD_ASSERTION_ENABLED: 'true',
    IAM_FORWARD_ASSERTION_AUDIENCE: 'example-host',
  });
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await resolver?.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  resolved.length = 0;
});

interface Results {
  subject: { userId: string; profileId: string | null; sessionId: string | null };
  results: Array<{ allowed: boolean; status: number; failedStep: string | null; decisionId: string }>;
}

const post = async (path: string, headers: Record<string, string>, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
  const answer = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
};
const check = (headers: Record<string, string>, checks: unknown[], subject?: unknown) => post('/iam/authorization/check', headers, { checks, ...(subject ? { subject } : {}) });
const plan = (headers: Record<string, string>, body: Record<string, unknown>) => post('/iam/authorization/plan', headers, body);
const project = (id: string, access: 'READ' | 'WRITE' = 'READ') => ({ permissionCode: access === 'READ' ? 'project:read' : 'project:update', resource: { type: 'PROJECT', id, access } });
const task = (id: string) => ({ permissionCode: 'task:read', resource: { type: 'TASK', id, access: 'READ' as const } });

/** The assertion the host receives with a request the gateway forwarded for `token`. */
async function assertionFor(token: string, path = '/api/projects'): Promise<string> {
  await upstream.clear();
  expect((await fetch(`${gateway.url}${path}`, { headers: bearer(token) })).status).toBe(200);
  const [received] = await upstream.requests();
  return recordedHeader(received!, 'x-iam-assertion')[0]!;
}

describe('POST /iam/authorization/check', () => {
  it('the user\'s own bearer: every answer is the proxy\'s decision for such a route, in order, each with its decisionId', async () => {
    const alice = await login(gateway.url, 'alice'); // p-alice-editor: PROJECT 1 WRITE
    const answer = await check(bearer(alice.accessToken), [project('1'), project('2'), project('1', 'WRITE'), task('5'), task('6'), task('404'), task('502'), { permissionCode: 'admin:write' }]);
    expect(answer.status).toBe(200);
    const body = answer.body as unknown as Results;
    expect(body.subject).toEqual({ userId: 'u-alice', profileId: 'p-alice-editor', sessionId: alice.sessionId });
    expect(body.results.map((result) => [result.allowed, result.status, result.failedStep])).toEqual([
      [true, 200, null],
      [false, 403, 'SCOPE_DENIED'],
      [true, 200, null],
      [true, 200, null],
      [false, 403, 'SCOPE_DENIED'],
      [false, 404, 'RESOURCE_NOT_FOUND'],
      // A resolver down is that result's 502; the others still answer.
      [false, 502, 'RESOURCE_RESOLUTION_UNAVAILABLE'],
      [false, 403, 'PERMISSION_DENIED'],
    ]);
    // Every decision is recorded: its id resolves for the user it concerns, allowed ones included.
    for (const result of [body.results[0]!, body.results[1]!]) {
      const decision = await fetch(`${gateway.url}/iam/authorization/decisions/${result.decisionId}`, { headers: bearer(alice.accessToken) });
      expect(decision.status).toBe(200);
      expect(await decision.json()).toMatchObject({ decisionId: result.decisionId, allowed: result.allowed });
    }
  });

  it('resolves a resource at most once per call', async () => {
    const alice = await login(gateway.url, 'alice');
    const answer = await check(bearer(alice.accessToken), [task('5'), task('5'), task('6'), task('5')]);
    expect((answer.body as unknown as Results).results.map((result) => result.allowed)).toEqual([true, true, false, true]);
    expect(resolved.sort()).toEqual(['/tasks/5', '/tasks/6']);
  });

  it('no oracle: with the caller\'s own credential, a (permission, resource type) pair no route declares is ROUTE_NOT_DECLARED, no resolver asked', async () => {
    const alice = await login(gateway.url, 'alice');
    const answer = await check(bearer(alice.accessToken), [{ permissionCode: 'project:read', resource: { type: 'TASK', id: '6', access: 'READ' } }, { permissionCode: 'task:read', resource: { type: 'PROJECT', id: '2', access: 'READ' } }]);
    expect((answer.body as unknown as Results).results.map((result) => [result.allowed, result.failedStep])).toEqual([
      [false, 'ROUTE_NOT_DECLARED'],
      [false, 'ROUTE_NOT_DECLARED'],
    ]);
    expect(resolved).toEqual([]);
  });

  it('the session cookie: the same answers; cross-site it is refused (403 IAM_CSRF_REJECTED)', async () => {
    const alice = await login(gateway.url, 'alice');
    const cookie = { cookie: `__Host-iam-session=${alice.accessToken}` };
    const answer = await check(cookie, [project('1')]);
    expect([answer.status, (answer.body as unknown as Results).results[0]!.allowed]).toEqual([200, true]);
    const crossSite = await check({ ...cookie, 'sec-fetch-site': 'cross-site', origin: 'https://evil.test' }, [project('1')]);
    expect([crossSite.status, crossSite.body.code]).toEqual([403, 'IAM_CSRF_REJECTED']);
  });

  it('the X-IAM-Assertion a host received, sent back as the bearer: decides for its session; tampered or foreign is 401; a logout refuses it at once', async () => {
    const alice = await login(gateway.url, 'alice');
    const assertion = await assertionFor(alice.accessToken);
    const answer = await check(bearer(assertion), [project('1'), project('2')]);
    expect(answer.status).toBe(200);
    expect((answer.body as unknown as Results).subject).toEqual({ userId: 'u-alice', profileId: 'p-alice-editor', sessionId: alice.sessionId });
    expect((answer.body as unknown as Results).results.map((result) => result.allowed)).toEqual([true, false]);
    const [header, payload, signature] = assertion.split('.') as [string, string, string];
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), sub: 'u-admin' })).toString('base64url');
    for (const token of [`${header}.${forged}.${signature}`, `${header}.${payload}.${signature.slice(0, -3)}AAA`, 'eyJhbGciOiJFZERTQSJ9.e30.c2ln']) {
      const refused = await check(bearer(token), [project('1')]);
      expect([refused.status, refused.body.code]).toEqual([401, 'IAM_UNAUTHENTICATED']);
    }
    expect((await fetch(`${gateway.url}/iam/auth/logout`, { method: 'POST', headers: bearer(alice.accessToken) })).status).toBe(204);
    const afterLogout = await check(bearer(assertion), [project('1')]);
    expect([afterLogout.status, afterLogout.body.code]).toEqual([401, 'IAM_UNAUTHENTICATED']);
    expect((await plan(bearer(assertion), { permissionCode: 'project:read', resourceType: 'PROJECT', access: 'READ' })).status).toBe(401);
  });

  it('a service naming a subject needs iam.authorization.decisions:check; then decides for that session or user', async () => {
    const bob = await login(gateway.url, 'bob');
    const refused = await check(bearer(bob.accessToken), [project('1')], { userId: 'u-alice' });
    expect([refused.status, refused.body.code]).toEqual([403, 'IAM_ACCESS_DENIED']);
    const admin = await login(gateway.url, 'admin'); // *:* covers iam.authorization.decisions:check
    const alice = await login(gateway.url, 'alice');
    const bySession = await check(bearer(admin.accessToken), [project('1'), project('2')], { sessionId: alice.sessionId });
    expect((bySession.body as unknown as Results).subject).toMatchObject({ userId: 'u-alice', sessionId: alice.sessionId });
    expect((bySession.body as unknown as Results).results.map((result) => result.allowed)).toEqual([true, false]);
    const byUser = await check(bearer(admin.accessToken), [project('2')], { userId: 'u-alice' });
    expect((byUser.body as unknown as Results).results[0]!.allowed).toBe(false);
    // A service may pair anything: its own permission is the gate (no ROUTE_NOT_DECLARED for it).
    const unusual = await check(bearer(admin.accessToken), [{ permissionCode: 'project:read', resource: { type: 'TASK', id: '5', access: 'READ' } }], { userId: 'u-alice' });
    expect((unusual.body as unknown as Results).results[0]!.failedStep).not.toBe('ROUTE_NOT_DECLARED');
    const ended = await check(bearer(admin.accessToken), [project('1')], { sessionId: 's-no-such-session' });
    expect([ended.status, ended.body.code]).toEqual([404, 'IAM_SESSION_NOT_FOUND']);
  });

  it('revocation takes effect on check and plan at once', async () => {
    const alice = await login(gateway.url, 'alice');
    expect((await check(bearer(alice.accessToken), [project('1')])).status).toBe(200);
    expect((await fetch(`${gateway.url}/iam/sessions/revoke-others`, { method: 'POST', headers: bearer((await login(gateway.url, 'alice')).accessToken) })).status).toBe(204);
    expect((await check(bearer(alice.accessToken), [project('1')])).status).toBe(401);
    expect((await plan(bearer(alice.accessToken), { permissionCode: 'project:read', resourceType: 'PROJECT', access: 'READ' })).status).toBe(401);
  });

  it('bad input: every error listed (400); a body over the /iam limit is 413', async () => {
    const alice = await login(gateway.url, 'alice');
    const bad = await check(bearer(alice.accessToken), [{ permissionCode: 'nope' }, { permissionCode: 'a:b', resource: { type: 'X', id: '1', access: 'EXECUTE' } }]);
    expect(bad.status).toBe(400);
    expect((bad.body.errors as Array<{ pointer: string }>).map((error) => error.pointer).sort()).toEqual(['/checks/0/permissionCode', '/checks/1/resource/access']);
    // Over the 64 kB /iam body limit (server.iam-body-limit): 413 before anything is parsed.
    const huge = await check(bearer(alice.accessToken), Array.from({ length: 100 }, (_, i) => ({ permissionCode: 'project:read', resource: { type: 'PROJECT', id: `${i}-${'x'.repeat(1000)}`, access: 'READ' } })));
    expect([huge.status, huge.body.code]).toEqual([413, 'IAM_PAYLOAD_TOO_LARGE']);
    const many = await check(bearer(alice.accessToken), Array.from({ length: 101 }, () => ({ permissionCode: 'project:list' })));
    expect([many.status, (many.body.errors as Array<{ pointer: string }>)[0]!.pointer]).toEqual([400, '/checks']);
  });
});

describe('POST /iam/authorization/plan', () => {
  it('ALL for an unscoped profile, SOME with the covering ids for a scoped one (WRITE covers READ), NONE without the permission', async () => {
    const alice = await login(gateway.url, 'alice'); // PROJECT 1 WRITE
    const bob = await login(gateway.url, 'bob'); // unscoped editor
    const read = { permissionCode: 'project:read', resourceType: 'PROJECT', access: 'READ' };
    expect((await plan(bearer(alice.accessToken), read)).body).toMatchObject({ kind: 'SOME', ids: ['1'], subject: { userId: 'u-alice' } });
    expect((await plan(bearer(alice.accessToken), { ...read, access: 'WRITE', permissionCode: 'project:update' })).body).toMatchObject({ kind: 'SOME', ids: ['1'] });
    expect((await plan(bearer(bob.accessToken), read)).body).toMatchObject({ kind: 'ALL' });
    expect((await plan(bearer(alice.accessToken), { ...read, permissionCode: 'admin:write' })).body).toMatchObject({ kind: 'NONE' });
    expect(resolved).toEqual([]);
  });
});

describe('iam-gateway/host against the gateway', () => {
  it('verifies the assertion against the gateway\'s JWKS, checks in one call, plans, and require() carries the decisionId', async () => {
    const alice = await login(gateway.url, 'alice');
    const assertion = await assertionFor(alice.accessToken);
    const host = createHostAuthorization({ gatewayUrl: gateway.url, issuer: 'iam-gateway', audience: 'example-host' });
    // The host received it with GET /api/projects (assertionFor): it counts on that request.
    const received = { method: 'GET', url: '/api/projects', headers: { 'x-iam-assertion': assertion } };
    const iam = host.forRequest(received);
    expect(await iam.principal()).toMatchObject({ userId: 'u-alice', sessionId: alice.sessionId, profileId: 'p-alice-editor' });
    const [one, two] = await Promise.all([iam.check(project('1')), iam.check(project('2'))]);
    expect([one.allowed, two.allowed]).toEqual([true, false]);
    expect(await iam.plan('project:read', 'PROJECT')).toMatchObject({ kind: 'SOME', ids: ['1'] });
    const refused = (await iam.require(project('2')).catch((error: unknown) => error)) as HostAuthorizationError;
    expect(refused).toBeInstanceOf(HostAuthorizationError);
    expect(refused.problem).toMatchObject({ status: 403, code: 'IAM_ACCESS_DENIED', decisionId: expect.any(String) });
    // Another audience than the gateway's: no principal.
    expect(await createHostAuthorization({ gatewayUrl: gateway.url, issuer: 'iam-gateway', audience: 'another-host' }).principal(received)).toBeNull();
  });

  it('an assertion counts only on its own request and at its own host (a route group\'s audience); the gateway accepts back every audience it issues', async () => {
    const alice = await login(gateway.url, 'alice');
    const forBilling = await assertionFor(alice.accessToken, '/billing/projects');
    const billing = createHostAuthorization({ gatewayUrl: gateway.url, issuer: 'iam-gateway', audience: 'billing' });
    const received = { method: 'GET', url: '/billing/projects', headers: { 'x-iam-assertion': forBilling } };
    expect(await billing.principal(received)).toMatchObject({ userId: 'u-alice', permission: 'project:list' });
    expect(await billing.forRequest(received).plan('project:read', 'PROJECT')).toMatchObject({ kind: 'SOME', ids: ['1'] });
    // The gateway's own check and plan take it as the bearer: an audience it issues.
    expect((await check(bearer(forBilling), [project('1')])).status).toBe(200);
    // Replayed on another request of the same host: refused, the gateway not asked.
    const replayed = billing.forRequest({ method: 'PUT', url: '/billing/projects/1', headers: { 'x-iam-assertion': forBilling } });
    expect(await replayed.principal()).toBeNull();
    const refused = (await replayed.require(project('1', 'WRITE')).catch((error: unknown) => error)) as HostAuthorizationError;
    expect(refused).toBeInstanceOf(HostAuthorizationError);
    expect(refused.problem).toMatchObject({ status: 401, code: 'IAM_UNAUTHENTICATED' });
    // At the other host (the gateway's configured audience), on the very request it names: refused too.
    const exampleHost = createHostAuthorization({ gatewayUrl: gateway.url, issuer: 'iam-gateway', audience: 'example-host' });
    expect(await exampleHost.principal(received)).toBeNull();
    // And the other host's assertions are not valid at billing.
    const forExampleHost = await assertionFor(alice.accessToken);
    expect(await billing.principal({ method: 'GET', url: '/api/projects', headers: { 'x-iam-assertion': forExampleHost } })).toBeNull();
  });
});
