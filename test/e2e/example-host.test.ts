/**
 * The example host and its demo data (examples/host, policies/example.yaml, config/*.example.yaml) and the
 * recording upstream the gateway's end-to-end tests run against.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { verify } from '@node-rs/argon2';
import { WebSocket } from 'undici';
import { parse } from 'yaml';
import { startHost, type RunningHost } from '../../examples/host/server';
import { ADMIN_PERMISSIONS } from '../../src/api/admin-routes';
import type { ProvisioningDocument } from '../../src/domain/records';
import { recordedHeader, startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const ROOT = join(__dirname, '..', '..');
const readYaml = (relativePath: string): any => parse(readFileSync(join(ROOT, relativePath), 'utf8'));

interface JsonAnswer {
  status: number;
  headers: Headers;
  body: any;
}

async function call(base: string, method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}): Promise<JsonAnswer> {
  const response = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...init.headers },
    body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
}

/** A request through node:http: the request-target is sent exactly as written (fetch would normalize it). */
function rawRequest(
  port: number,
  options: { method: string; path: string; headers?: Record<string, string>; body?: Buffer | string },
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: options.method, path: options.path, headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('example host', () => {
  let host: RunningHost;
  beforeEach(async () => {
    host = await startHost(0); // port 0: the OS picks a free port, so test files never collide
  });
  afterEach(async () => {
    await host.close();
  });

  it('answers health and a welcome naming its endpoints, without any identity', async () => {
    const health = await call(host.url, 'GET', '/health');
    expect(health).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(health.headers.get('x-host-received-user')).toBe('-');
    const welcome = await call(host.url, 'GET', '/');
    expect(welcome.status).toBe(200);
    expect(welcome.body.endpoints).toEqual(expect.arrayContaining(['GET /api/projects', 'DELETE /api/tasks/:taskId']));
    expect(host.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(host.url).not.toBe('http://127.0.0.1:0');
  });

  it('shows the identity headers it received, on every answer including errors', async () => {
    const identity = { 'X-IAM-User-Id': 'u-alice', 'X-IAM-Profile-Id': 'p-alice-reader', 'X-IAM-Permission': 'project:list' };
    const list = await call(host.url, 'GET', '/api/projects', { headers: identity });
    expect(list.headers.get('x-host-received-user')).toBe('u-alice');
    expect(list.body.receivedIdentity).toMatchObject({ userId: 'u-alice', profileId: 'p-alice-reader', permission: 'project:list', sessionId: null });
    const missing = await call(host.url, 'GET', '/api/projects/99', { headers: identity });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-host-received-user')).toBe('u-alice');
    const badBody = await call(host.url, 'POST', '/api/projects', { headers: identity, body: '{not json' });
    expect(badBody.status).toBe(400);
    expect(badBody.headers.get('x-host-received-user')).toBe('u-alice');
    const unknownRoute = await call(host.url, 'GET', '/nowhere');
    expect(unknownRoute).toMatchObject({ status: 404, body: { error: 'not_found' } });
    expect(unknownRoute.headers.get('x-host-received-user')).toBe('-');
  });

  it('lists, reads, creates and renames projects', async () => {
    const list = await call(host.url, 'GET', '/api/projects');
    expect(list.body.projects.map((p: { id: string; name: string }) => `${p.id}:${p.name}`)).toEqual(['1:Apollo', '2:Gemini', '3:Mercury']);
    expect((await call(host.url, 'GET', '/api/projects/2')).body.project).toMatchObject({ id: '2', name: 'Gemini' });
    expect((await call(host.url, 'GET', '/api/projects/99')).status).toBe(404);

    const created = await call(host.url, 'POST', '/api/projects', { body: { name: 'Artemis' }, headers: { 'X-IAM-User-Id': 'u-bob' } });
    expect(created.status).toBe(201);
    expect(created.body.project).toEqual({ id: '4', name: 'Artemis', createdBy: 'u-bob' });
    expect(created.headers.get('location')).toBe('/api/projects/4');
    expect((await call(host.url, 'GET', '/api/projects/4')).status).toBe(200);

    expect((await call(host.url, 'PUT', '/api/projects/1', { body: { name: 'Apollo 11' } })).body.project.name).toBe('Apollo 11');
    expect((await call(host.url, 'PATCH', '/api/projects/1', { body: { name: 'Apollo 13' } })).body.project.name).toBe('Apollo 13');
    expect((await call(host.url, 'GET', '/api/projects/1')).body.project.name).toBe('Apollo 13');
    expect((await call(host.url, 'PUT', '/api/projects/99', { body: { name: 'x' } })).status).toBe(404);
    expect((await call(host.url, 'PATCH', '/api/projects/1', { body: { name: '' } })).status).toBe(400);
    expect((await call(host.url, 'POST', '/api/projects', { body: [1] })).status).toBe(400);
    const notAllowed = await call(host.url, 'DELETE', '/api/projects/1');
    expect(notAllowed).toMatchObject({ status: 405, body: { error: 'method_not_allowed' } });
    expect(notAllowed.headers.get('allow')).toContain('PATCH');
  });

  it('lists, reads and deletes tasks', async () => {
    const tasksOf1 = await call(host.url, 'GET', '/api/projects/1/tasks');
    expect(tasksOf1.body.tasks.map((t: { id: string }) => t.id)).toEqual(['10', '11']);
    expect((await call(host.url, 'GET', '/api/projects/3/tasks')).body.tasks).toEqual([]);
    expect((await call(host.url, 'GET', '/api/projects/99/tasks')).status).toBe(404);
    expect((await call(host.url, 'GET', '/api/tasks/20')).body.task).toMatchObject({ id: '20', projectId: '2' });

    const deleted = await call(host.url, 'DELETE', '/api/tasks/11');
    expect(deleted).toMatchObject({ status: 200, body: { deleted: { id: '11', projectId: '1' } } });
    expect((await call(host.url, 'GET', '/api/tasks/11')).status).toBe(404);
    expect((await call(host.url, 'DELETE', '/api/tasks/11')).status).toBe(404);
    expect((await call(host.url, 'GET', '/api/projects/1/tasks')).body.tasks.map((t: { id: string }) => t.id)).toEqual(['10']);
  });

  it('keeps its data per instance (no module-level state)', async () => {
    const other = await startHost(0);
    try {
      await call(host.url, 'DELETE', '/api/tasks/10');
      expect((await call(other.url, 'GET', '/api/tasks/10')).status).toBe(200);
    } finally {
      await other.close();
    }
  });

  it('has an admin area and a whoami that echoes every X-IAM-* header', async () => {
    expect((await call(host.url, 'GET', '/api/admin/stats')).body).toMatchObject({ projects: 3, tasks: 3, reindexCount: 0 });
    expect((await call(host.url, 'POST', '/api/admin/reindex')).body).toMatchObject({ reindexed: true, reindexCount: 1 });
    expect((await call(host.url, 'GET', '/api/admin/stats')).body.reindexCount).toBe(1);

    const whoami = await call(host.url, 'GET', '/api/whoami', {
      headers: { 'X-IAM-User-Id': 'u-carol', 'X-IAM-Session-Id': 's-1', 'X-IAM-Extra': 'x', 'X-Request-Id': 'r-1', 'X-Other': 'no' },
    });
    expect(whoami.body.identity).toMatchObject({ userId: 'u-carol', sessionId: 's-1', requestId: 'r-1', profileId: null });
    expect(whoami.body.headers).toEqual({ 'x-iam-user-id': 'u-carol', 'x-iam-session-id': 's-1', 'x-iam-extra': 'x', 'x-request-id': 'r-1' });
  });

  it('resolves project and task scopes for the gateway, 404 for unknown ids', async () => {
    expect(await call(host.url, 'GET', '/internal/resources/projects/2')).toMatchObject({ status: 200, body: { scopes: [{ type: 'PROJECT', id: '2' }] } });
    expect((await call(host.url, 'GET', '/internal/resources/projects/99')).status).toBe(404);
    expect(await call(host.url, 'GET', '/internal/resources/tasks/20')).toMatchObject({ status: 200, body: { scopes: [{ type: 'PROJECT', id: '2' }] } });
    expect((await call(host.url, 'GET', '/internal/resources/tasks/10')).body).toEqual({ scopes: [{ type: 'PROJECT', id: '1' }] });
    expect((await call(host.url, 'GET', '/internal/resources/tasks/99')).status).toBe(404);
  });

  it('checks credentials for the http authenticator: 200 principal, 401 rejected, 403 disabled', async () => {
    const login = (username: unknown, password: unknown) => call(host.url, 'POST', '/internal/login', { body: { username, password, clientType: 'WEB' } });
    expect(await login('carol', 'carol-password')).toMatchObject({
      status: 200,
      body: { userId: 'u-carol', identityId: 'id-carol', identityDomain: 'example.com', displayName: 'Carol' },
    });
    expect((await login('carol', 'wrong')).status).toBe(401);
    expect((await login('mallory', 'carol-password')).status).toBe(401);
    expect(await login('dave', 'dave-password')).toMatchObject({ status: 403, body: { error: 'disabled' } });
    expect((await login('dave', 'wrong')).status).toBe(401);
    expect((await login(1, 'carol-password')).status).toBe(400);
  });
});

describe('the example host asks the gateway (iam-gateway/host)', () => {
  it('lists only the projects the gateway\'s plan allows, and moves a task only with WRITE on both projects', async () => {
    const { createTestDatabase } = await import('../support/database');
    const { login, startTestGateway } = await import('../support/gateway');
    await (await createTestDatabase()).close();
    const host = await startHost(0);
    const gateway = await startTestGateway(host.url, { IAM_POLICIES_DIR: join(ROOT, 'policies'), IAM_FORWARD_ASSERTION_ENABLED: 'true' }).catch(async (error: unknown) => {
      await host.close();
      throw error;
    });
    try {
      host.connect({ gatewayUrl: gateway.url, issuer: 'iam-gateway' });
      const as = async (user: string) => ({ authorization: `Bearer ${(await login(gateway.url, user)).accessToken}` });
      const [alice, bob, admin] = [await as('alice'), await as('bob'), await as('admin')];
      const names = async (headers: Record<string, string>) => ((await call(gateway.url, 'GET', '/api/projects', { headers })).body.projects as Array<{ id: string }>).map((project) => project.id);
      expect(await names(alice)).toEqual(['1']); // scoped to project 1
      expect(await names(admin)).toEqual(['1', '2', '3']); // unscoped (*:*)
      expect(await names(bob)).toEqual(['1', '2', '3']); // unscoped
      // Alice may write project 1 only: the move to project 2 is refused with the gateway's problem and decisionId.
      const refused = await call(gateway.url, 'POST', '/api/tasks/10/move', { headers: alice, body: { projectId: '2' } });
      expect(refused.status).toBe(403);
      expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(refused.body).toMatchObject({ code: 'IAM_ACCESS_DENIED', decisionId: expect.any(String) });
      expect((await call(gateway.url, 'GET', '/api/tasks/10', { headers: bob })).body.task.projectId).toBe('1');
      // Bob's assertion for GET /api/whoami (the host echoes it), replayed straight at the host on a task move: refused
      // before the gateway is asked, although bob may move the task.
      const whoami = await call(gateway.url, 'GET', '/api/whoami', { headers: bob });
      const replayed = await call(host.url, 'POST', '/api/tasks/10/move', { headers: { 'x-iam-assertion': whoami.body.headers['x-iam-assertion'] }, body: { projectId: '2' } });
      expect(replayed.status).toBe(401);
      expect(replayed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(replayed.body.code).toBe('IAM_UNAUTHENTICATED');
      expect((await call(gateway.url, 'GET', '/api/tasks/10', { headers: bob })).body.task.projectId).toBe('1');
      // Bob (every project) moves it; then it is in project 2.
      expect((await call(gateway.url, 'POST', '/api/tasks/10/move', { headers: bob, body: { projectId: '2' } })).status).toBe(200);
      expect((await call(gateway.url, 'GET', '/api/tasks/10', { headers: bob })).body.task.projectId).toBe('2');
    } finally {
      await gateway.close();
      await host.close();
    }
  });
});

describe('example YAML files', () => {
  const policy = readYaml('policies/example.yaml');
  const users = readYaml('config/users.example.yaml');
  const provision = readYaml('config/provision.example.yaml') as ProvisioningDocument;

  /** Leaf routes with their group's path and defaults applied (docs/policy-format.md). */
  const leafRoutes = (): Array<{ path: string; methods: string[]; permission?: string; public?: boolean; resource?: { type: string } }> =>
    policy.routes.flatMap((entry: any) =>
      entry.routes
        ? entry.routes.map((child: any) => ({ permission: entry.permission, ...child, path: entry.path + child.path }))
        : [entry],
    );

  it('policy: version 1, deny by default, resolvers at the host, no /internal route', () => {
    expect(policy.version).toBe(1);
    expect(policy.default).toBe('deny');
    // Paths on the host behind the gateway (upstream.url), so the example runs on any port.
    expect(policy.resources.PROJECT.resolver.url).toBe('/internal/resources/projects/{id}');
    expect(policy.resources.TASK.resolver.url).toBe('/internal/resources/tasks/{id}');
    const routes = leafRoutes();
    expect(routes.some((route) => route.path.startsWith('/internal'))).toBe(false);
    expect(routes.find((route) => route.path === '/health')).toMatchObject({ methods: ['GET'], public: true });
    expect(routes.find((route) => route.path === '/api/whoami')).toEqual({ path: '/api/whoami', methods: ['GET'] });
    expect(routes.find((route) => route.path === '/api/projects/:projectId' && route.methods.includes('PUT'))).toMatchObject({
      permission: 'project:update',
      resource: { type: 'PROJECT', id: 'projectId', access: 'WRITE', resolve: 'required' },
    });
    for (const route of routes) {
      if (route.resource) expect(Object.keys(policy.resources)).toContain(route.resource.type);
    }
  });

  it('policy: every permission it asks for is granted by a provisioned template', () => {
    const granted = (provision.templates ?? []).flatMap((template) => template.permissions);
    const grants = (code: string): boolean =>
      granted.some((g) => g === code || g === '*:*' || (g.endsWith(':*') && code.startsWith(g.slice(0, -1))));
    const asked = leafRoutes().flatMap((route) => (route.permission ? [route.permission] : []));
    expect(asked.length).toBeGreaterThan(5);
    for (const code of asked) expect({ code, granted: grants(code) }).toEqual({ code, granted: true });
  });

  it('policy: every route it declares exists in the host, and the resolvers answer there', async () => {
    const host = await startHost(0);
    try {
      const concrete = (path: string): string =>
        path.replace(':projectId', '2').replace(':taskId', '20').replace('/**', '/stats');
      for (const route of leafRoutes()) {
        for (const method of route.methods) {
          const realMethod = method === '*' ? 'GET' : method;
          const body = ['POST', 'PUT', 'PATCH'].includes(realMethod) ? { name: 'Checked', projectId: '2' } : undefined;
          const answer = await call(host.url, realMethod, concrete(route.path), { body });
          expect({ route: `${method} ${route.path}`, ok: answer.status < 400 }).toEqual({ route: `${method} ${route.path}`, ok: true });
        }
      }
      for (const type of ['PROJECT', 'TASK']) {
        const url = `${host.url}${policy.resources[type].resolver.url}`.replace('{id}', type === 'PROJECT' ? '1' : '10');
        const answer = await fetch(url);
        expect(await answer.json()).toEqual({ scopes: [{ type: 'PROJECT', id: '1' }] });
      }
    } finally {
      await host.close();
    }
  });

  it('users file: the demo users, argon2id hashes that verify, eve disabled', async () => {
    const byName = new Map<string, any>(users.users.map((user: any) => [user.username, user]));
    expect([...byName.keys()]).toEqual(['alice', 'bob', 'admin', 'eve']);
    expect(byName.get('alice')).toMatchObject({ userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com', displayName: 'Alice', enabled: true });
    expect(byName.get('admin')).toMatchObject({ userId: 'u-admin', displayName: 'Administrator' });
    expect(byName.get('eve').enabled).toBe(false);
    for (const [name, user] of byName) {
      expect(user.passwordHash).toMatch(/^\$argon2id\$v=19\$/);
      expect(await verify(user.passwordHash, `${name}-password`)).toBe(true);
    }
    expect(await verify(byName.get('alice').passwordHash, 'bob-password')).toBe(false);
  });

  it('provisioning file: templates, profiles and scopes the demo needs', () => {
    const templates = new Map((provision.templates ?? []).map((t) => [t.versionId, t.permissions]));
    expect([...templates.keys()]).toEqual(['reader-v1', 'editor-v1', 'operator-v1', 'iam-admin-v1']);
    expect(templates.get('reader-v1')).toEqual(['project:list', 'project:read', 'task:read']);
    expect(templates.get('operator-v1')).toEqual(['admin:write', 'project:*']);
    // Every admin permission of the gateway (diagnostics included, #11.13), the host's admin area, and `*:*`
    // (an admin grants only what they hold, #11.4).
    expect(new Set(templates.get('iam-admin-v1'))).toEqual(new Set(['*:*', ...Object.values(ADMIN_PERMISSIONS), 'admin:write']));
    expect(templates.get('iam-admin-v1')).toContain('iam.admin.sessions:revoke');

    const usersById = new Map((provision.users ?? []).map((u) => [u.userId, u]));
    expect([...usersById.keys()]).toEqual(['u-alice', 'u-bob', 'u-admin', 'u-carol']);
    for (const user of usersById.values()) {
      expect(user.identities).toEqual([{ identityId: user.userId.replace('u-', 'id-'), identityDomain: 'example.com' }]);
      for (const profile of user.profiles ?? []) expect(templates.has(profile.templateVersionId)).toBe(true);
    }
    const profile = (userId: string, profileId: string) => usersById.get(userId)?.profiles?.find((p) => p.profileId === profileId);
    expect(profile('u-alice', 'p-alice-reader')).toMatchObject({
      templateVersionId: 'reader-v1',
      clientTypes: ['WEB', 'API', 'MOBILE'],
      scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }],
    });
    expect(profile('u-alice', 'p-alice-editor')?.scopes).toEqual([{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' }]);
    expect(profile('u-bob', 'p-bob-editor')?.scopes ?? []).toEqual([]);
    expect(profile('u-admin', 'p-admin')?.templateVersionId).toBe('iam-admin-v1');
    expect(profile('u-admin', 'p-admin-operator')?.templateVersionId).toBe('operator-v1');
    expect(profile('u-carol', 'p-carol-reader')?.scopes).toEqual([{ scopeType: 'PROJECT', scopeRefId: '*', accessMode: 'READ' }]);
  });
});

describe('recording upstream', () => {
  let upstream: RecordingUpstream;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });
  beforeEach(async () => {
    await upstream.clear();
  });

  it('runs in its own process on an OS-assigned port', () => {
    expect(upstream.pid).toBeGreaterThan(0);
    expect(upstream.pid).not.toBe(process.pid);
    expect(upstream.url).toBe(`http://127.0.0.1:${upstream.port}`);
  });

  it('records method, raw target, raw headers and body, and echoes them', async () => {
    const body = 'x'.repeat(5000) + 'é';
    const answer = await rawRequest(upstream.port, {
      method: 'POST',
      path: '/a/../b//c%2F?q=%41&q=2',
      headers: { 'X-Custom-Header': 'One', 'Content-Type': 'text/plain; charset=utf-8' },
      body,
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ ok: true, method: 'POST', url: '/a/../b//c%2F?q=%41&q=2', headers: { 'x-custom-header': 'One' } });

    const [recorded, ...rest] = await upstream.requests();
    expect(rest).toEqual([]);
    expect(recorded).toMatchObject({ kind: 'http', method: 'POST', url: '/a/../b//c%2F?q=%41&q=2', httpVersion: '1.1', bodyComplete: true });
    expect(recordedHeader(recorded, 'x-custom-header')).toEqual(['One']);
    expect(recorded.rawHeaders).toContain('X-Custom-Header'); // original case kept
    const bytes = Buffer.from(body, 'utf8');
    expect(recorded.bodyLength).toBe(bytes.length);
    expect(recorded.bodySha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(recorded.bodyText).toBe('x'.repeat(4096));

    await upstream.clear();
    expect(await upstream.requests()).toEqual([]);
  });

  it('answers /status/<code>, /slow/<ms> and /stream/<n>', async () => {
    const unavailable = await fetch(`${upstream.url}/status/503`);
    expect(unavailable.status).toBe(503);
    expect(await unavailable.json()).toMatchObject({ ok: false, status: 503 });
    expect((await fetch(`${upstream.url}/status/204`)).status).toBe(204);

    const started = Date.now();
    const slow = await fetch(`${upstream.url}/slow/50`);
    expect(slow.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);

    const stream = await rawRequest(upstream.port, { method: 'GET', path: '/stream/3' });
    expect(stream.headers['transfer-encoding']).toBe('chunked');
    expect(stream.body.trim().split('\n').map((line) => JSON.parse(line))).toEqual([{ chunk: 0 }, { chunk: 1 }, { chunk: 2 }]);

    expect((await upstream.requests()).map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /status/503', 'GET /status/204', 'GET /slow/50', 'GET /stream/3',
    ]);
  });

  it('never answers /hang, records it, and still closes', async () => {
    const own = await startRecordingUpstream();
    const hanging = fetch(`${own.url}/hang`).then(() => 'answered', () => 'connection closed');
    const early = await Promise.race([hanging, new Promise((resolve) => setTimeout(() => resolve('still waiting'), 150))]);
    expect(early).toBe('still waiting');
    expect((await own.requests()).map((r) => r.url)).toEqual(['/hang']);
    await own.close();
    expect(await hanging).toBe('connection closed');
  });

  it('accepts a WebSocket upgrade on /ws and echoes messages', async () => {
    const socket = new WebSocket(`${upstream.url.replace('http:', 'ws:')}/ws`);
    const echoed = await new Promise<string>((resolve, reject) => {
      socket.addEventListener('open', () => socket.send('hello upstream'));
      socket.addEventListener('message', (event) => resolve(String(event.data)));
      socket.addEventListener('error', () => reject(new Error('websocket error')));
    });
    expect(echoed).toBe('hello upstream');
    await new Promise<void>((resolve) => {
      socket.addEventListener('close', () => resolve());
      socket.close();
    });
    const [upgrade] = await upstream.requests();
    expect(upgrade).toMatchObject({ kind: 'upgrade', method: 'GET', url: '/ws', wsMessages: [{ binary: false, text: 'hello upstream' }] });
    expect(recordedHeader(upgrade, 'upgrade')).toEqual(['websocket']);
  });
});
