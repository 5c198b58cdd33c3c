/**
 * #11.13: diagnostics is no resolver oracle. The `{permissionCode, resourceType, resourceId}` form needs
 * `iam.admin.diagnostics:read` (it pairs any permission with any resource type); `{method, path}` stays open
 * to every session. Resource ids never change the structure of a resolver URL (`.`/`..`/`/`/`?`/`#`), on
 * the diagnostics path and on the proxy path.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

let dir: string;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let resolver: Server;
/** Every request target the resolver host received. */
const seen: string[] = [];

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  resolver = createServer((req, res) => {
    seen.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ scopes: [{ type: 'PROJECT', id: '1' }] }));
  });
  await new Promise<void>((resolve) => resolver.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(resolver.address() as AddressInfo).port}`;
  dir = await mkdtemp(join(tmpdir(), 'iam-diag-'));
  await writeFile(
    join(dir, 'routes.yaml'),
    `version: 1
default: deny
resources:
  TASK:
    resolver: { url: "${base}/internal/resources/tasks/{id}" }
routes:
  - path: /api/tasks/:taskId
    methods: [GET]
    permission: task:read
    resource: { type: TASK, id: taskId, access: READ }
`,
  );
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: dir });
});

afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await new Promise((resolve) => resolver?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  seen.length = 0;
});

const diagnose = (token: string, body: unknown): Promise<Response> =>
  fetch(`${gateway.url}/iam/authorization/diagnostics`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('#11.13 the permission form of diagnostics: the caller\'s own principal, resolved only as a route would', () => {
  it.each([
    ['a pair no route declares', { permissionCode: 'project:read', resourceType: 'TASK', resourceId: '20' }],
    ['another pair no route declares', { permissionCode: 'task:delete', resourceType: 'TASK', resourceId: '21' }],
  ])('#11.13: %s: 200 ROUTE_NOT_DECLARED and no resolver is asked', async (_name, body) => {
    const alice = await login(gateway.url, 'alice');
    const response = await diagnose(alice.accessToken, body);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ allowed: false, failedStep: 'ROUTE_NOT_DECLARED', userId: 'u-alice' });
    expect(seen).toEqual([]);
  });

  it('#11.13: a pair a route declares is decided for the caller as the proxy would, asking the resolver once', async () => {
    const alice = await login(gateway.url, 'alice');
    const response = await diagnose(alice.accessToken, { permissionCode: 'task:read', resourceType: 'TASK', resourceId: '20' });
    expect(response.status).toBe(200);
    const decision = (await response.json()) as { userId: string; steps: Array<{ code: string }>; resource?: { scopeRefs?: unknown } };
    expect(decision.userId).toBe('u-alice');
    expect(decision.steps.map((step) => step.code)).toContain('RESOURCE_RESOLVED');
    // The caller's view: the resolver's answer stays with auditors (docs/threat-model.md).
    expect(decision.resource?.scopeRefs).toBeUndefined();
    expect(seen).toEqual(['/internal/resources/tasks/20']);
    // Without a resource nothing is resolved.
    seen.length = 0;
    expect((await diagnose(alice.accessToken, { permissionCode: 'project:read' })).status).toBe(200);
    expect(seen).toEqual([]);
  });

  it('#11.13: explaining another user (userId) stays an administrator\'s question', async () => {
    const alice = await login(gateway.url, 'alice');
    const response = await diagnose(alice.accessToken, { method: 'GET', path: '/api/tasks/20', userId: 'u-bob' });
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ code: 'IAM_ACCESS_DENIED' });
    expect(seen).toEqual([]);
  });

  it('#11.13: the {method, path} form stays open to every session (and asks the resolver only as the proxy would)', async () => {
    const alice = await login(gateway.url, 'alice'); // task:read, scoped to project 1
    const response = await diagnose(alice.accessToken, { method: 'GET', path: '/api/tasks/20' });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ allowed: true, resource: { type: 'TASK', id: '20' } });
    expect(seen).toEqual(['/internal/resources/tasks/20']);
    // A route's own resource type only: the proxy pairs TASK with task:read, nothing else.
    seen.length = 0;
    const admin = await login(gateway.url, 'admin');
    // The operator profile holds no task:read: denied before any resolver call.
    const switched = await fetch(`${gateway.url}/iam/authorization/profiles/p-admin-operator/switch`, { method: 'POST', headers: bearer(admin.accessToken) });
    expect(switched.status).toBe(200);
    const operator = (await switched.json()) as { accessToken: string };
    expect(await (await diagnose(operator.accessToken, { method: 'GET', path: '/api/tasks/20' })).json()).toMatchObject({ allowed: false, failedStep: 'PERMISSION_DENIED' });
    expect(seen).toEqual([]);
  });

  it('#11.13: an administrator (iam.admin.diagnostics:read) may use it', async () => {
    const admin = await login(gateway.url, 'admin');
    const response = await diagnose(admin.accessToken, { permissionCode: 'admin:write', resourceType: 'TASK', resourceId: '20' });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ allowed: true, resource: { type: 'TASK', id: '20', scopeRefs: [{ type: 'PROJECT', id: '1' }] } });
    expect(seen).toEqual(['/internal/resources/tasks/20']);
  });
});

describe('#11.13 resource ids cannot change the resolver URL', () => {
  it.each(['..', '.', '%2e%2e', '%2E'])('#11.13: id %j is never sent (RESOURCE_NOT_FOUND)', async (resourceId) => {
    const admin = await login(gateway.url, 'admin');
    const response = await diagnose(admin.accessToken, { permissionCode: 'admin:write', resourceType: 'TASK', resourceId });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ allowed: false, failedStep: 'RESOURCE_NOT_FOUND' });
    expect(seen).toEqual([]);
  });

  it.each([
    ['../../admin', '/internal/resources/tasks/..%2F..%2Fadmin'],
    ['a/b', '/internal/resources/tasks/a%2Fb'],
    ['x?debug=1', '/internal/resources/tasks/x%3Fdebug%3D1'],
    ['x#frag', '/internal/resources/tasks/x%23frag'],
    ['%2F..%2Fsecret', '/internal/resources/tasks/%2F..%2Fsecret'],
    ['a\\b', '/internal/resources/tasks/a%5Cb'],
  ])('#11.13: id %j stays one encoded segment: %s', async (resourceId, target) => {
    const admin = await login(gateway.url, 'admin');
    expect((await diagnose(admin.accessToken, { permissionCode: 'admin:write', resourceType: 'TASK', resourceId })).status).toBe(200);
    expect(seen).toEqual([target]);
  });

  it.each([
    ['/api/tasks/x%3Fdebug=1', '/internal/resources/tasks/x%3Fdebug%3D1'],
    ['/api/tasks/x%23y', '/internal/resources/tasks/x%23y'],
    ['/api/tasks/a%20b', '/internal/resources/tasks/a%20b'],
  ])('#11.13: on the proxy path too: %s asks %s', async (path, target) => {
    const bob = await login(gateway.url, 'bob'); // task:read, unscoped
    await (await fetch(`${gateway.url}${path}`, { headers: bearer(bob.accessToken) })).arrayBuffer();
    expect(seen).toEqual([target]);
  });
});
