/**
 * End to end: profiles, switch, scopes with host resolvers, diagnostics that explain denials,
 * decisions retrievable by id, and profile changes taking effect on live sessions — in front of the
 * bundled example host (examples/host), whose /internal/resources endpoints are the resolvers.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHost, type RunningHost } from '../../examples/host/server';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testRedisUrl, uniquePrefix, notRun } from '../support/env';
import { bearer, login, startTestGateway } from '../support/gateway';
import { until } from '../support/wait';

let host: RunningHost;
let gateway: RunningGateway;
let db: TestDatabase;
let policyDir: string;

function writePolicy(hostUrl: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'iam-authz-'));
  writeFileSync(
    join(dir, 'host.yaml'),
    `version: 1
default: deny
resources:
  PROJECT:
    resolver: { url: "${hostUrl}/internal/resources/projects/{id}" }
  TASK:
    resolver: { url: "${hostUrl}/internal/resources/tasks/{id}" }
  BROKEN:
    resolver: { url: "http://127.0.0.1:9/nothing/{id}", timeout: 500ms }
routes:
  - path: /api/projects
    permission: project:read
    routes:
      - { methods: [GET], path: "", permission: project:list }
      - { methods: [GET], path: /:projectId, resource: { type: PROJECT, id: projectId, access: READ } }
      - { methods: [PUT, PATCH], path: /:projectId, permission: project:update,
          resource: { type: PROJECT, id: projectId, access: WRITE, resolve: required } }
  - path: /api/tasks/:taskId
    methods: [DELETE]
    permission: task:delete
    resource: { type: TASK, id: taskId, access: WRITE, resolve: required }
  - path: /api/reports/:reportId
    methods: [GET]
    permission: project:read
    resource: { type: REPORT, id: reportId, access: READ, resolve: required }
  - path: /api/broken/:id
    methods: [GET]
    permission: project:read
    resource: { type: BROKEN, id: id, access: READ }
`,
  );
  return dir;
}

beforeAll(async () => {
  db = await createTestDatabase();
  host = await startHost(0);
  policyDir = writePolicy(host.url);
  gateway = await startTestGateway(host.url, { IAM_POLICIES_DIR: policyDir });
  // The permission form of diagnostics is an administrator's tool (#11.13): alice's editor template gets it
  // here so the explanations below can be asked for her own profile; her reader template does not.
  await db.orm.em.fork().execute(`insert into iam_template_permissions (version_id, permission_code) values ('editor-v1', 'iam.admin.diagnostics:read')`);
});

afterAll(async () => {
  await gateway?.close();
  await host?.close();
  await db?.close();
});

const call = (method: string, path: string, token: string, base = gateway.url, body?: unknown): Promise<Response> =>
  fetch(`${base}${path}`, {
    method,
    headers: { ...bearer(token), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function problemOf(response: Response): Promise<{ status: number; code: string; step?: string; decisionId?: string }> {
  const body = (await response.json()) as { code: string; step?: string; decisionId?: string };
  return { status: response.status, ...body };
}

describe('GET /iam/authorization/profiles', () => {
  it("lists the caller's enabled, non-revoked profiles with scopes", async () => {
    const alice = await login(gateway.url, 'alice');
    const response = await call('GET', '/iam/authorization/profiles', alice.accessToken);
    expect(response.status).toBe(200);
    const profiles = (await response.json()) as Array<{ profileId: string; scopes: unknown[]; userId: string }>;
    expect(profiles.map((p) => p.profileId).sort()).toEqual(['p-alice-editor', 'p-alice-reader']);
    expect(profiles.find((p) => p.profileId === 'p-alice-reader')).toMatchObject({
      userId: 'u-alice',
      templateVersionId: 'reader-v1',
      enabled: true,
      revoked: false,
      scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }],
    });
  });
});

describe('scopes and resolvers', () => {
  it.each([
    ['alice (editor, WRITE on project 1) reads project 1', 'alice', 'GET', '/api/projects/1', 200, undefined],
    ['alice reads project 2 outside her scope', 'alice', 'GET', '/api/projects/2', 403, 'SCOPE_DENIED'],
    ['alice updates project 1 (WRITE scope, resolver)', 'alice', 'PATCH', '/api/projects/1', 200, undefined],
    ['alice updates project 2', 'alice', 'PATCH', '/api/projects/2', 403, 'SCOPE_DENIED'],
    ['bob (unscoped) reads project 2', 'bob', 'GET', '/api/projects/2', 200, undefined],
    ['alice deletes task 11 of project 1 (task resolves to PROJECT 1)', 'alice', 'DELETE', '/api/tasks/11', 200, undefined],
    ['alice deletes task 20 of project 2', 'alice', 'DELETE', '/api/tasks/20', 403, 'SCOPE_DENIED'],
    ['a missing task is a 404, not a lack of rights', 'bob', 'DELETE', '/api/tasks/999', 404, 'RESOURCE_NOT_FOUND'],
    ['resolve: required without a resolver is a 500', 'bob', 'GET', '/api/reports/1', 500, 'RESOURCE_RESOLUTION_UNAVAILABLE'],
    ['a resolver that cannot be reached is a 502', 'bob', 'GET', '/api/broken/1', 502, 'RESOURCE_RESOLUTION_UNAVAILABLE'],
  ])('%s', async (_name, user, method, path, status, step) => {
    const session = await login(gateway.url, user);
    const response = await call(method, path, session.accessToken, gateway.url, method === 'PATCH' ? { name: 'renamed' } : undefined);
    expect(response.status).toBe(status);
    if (step) {
      const problem = await problemOf(response);
      expect(problem.step).toBe(step);
      expect(problem.code).toBe(
        { 403: 'IAM_ACCESS_DENIED', 404: 'IAM_RESOURCE_NOT_FOUND', 500: 'IAM_RESOURCE_RESOLUTION_UNAVAILABLE', 502: 'IAM_UPSTREAM_UNAVAILABLE' }[status as 403],
      );
    }
  });

  it('decides a missing permission before asking the resolver (no existence oracle)', async () => {
    const alice = await login(gateway.url, 'alice', 'alice-password', 'MOBILE'); // reader profile: no task:delete
    expect(alice.principal.activeProfileId).toBe('p-alice-reader');
    const missing = await problemOf(await call('DELETE', '/api/tasks/999', alice.accessToken));
    const existing = await problemOf(await call('DELETE', '/api/tasks/10', alice.accessToken));
    expect(missing).toMatchObject({ status: 403, step: 'PERMISSION_DENIED' });
    expect(existing).toMatchObject({ status: 403, step: 'PERMISSION_DENIED' });
  });
});

describe('profile switch', () => {
  it('issues a new token with the new profile; the original keeps its own', async () => {
    const editor = await login(gateway.url, 'alice');
    expect(editor.principal.activeProfileId).toBe('p-alice-editor');
    const response = await call('POST', '/iam/authorization/profiles/p-alice-reader/switch', editor.accessToken);
    expect(response.status).toBe(200);
    const reader = (await response.json()) as { accessToken: string; sessionId: string; expiresAt: string; principal: { activeProfileId: string } };
    expect(reader.accessToken).not.toBe(editor.accessToken);
    expect(reader.sessionId).not.toBe(editor.sessionId);
    expect(reader.principal.activeProfileId).toBe('p-alice-reader');

    expect((await call('PATCH', '/api/projects/1', reader.accessToken, gateway.url, { name: 'x' })).status).toBe(403);
    expect((await call('GET', '/api/projects/1', reader.accessToken)).status).toBe(200);
    expect((await call('PATCH', '/api/projects/1', editor.accessToken, gateway.url, { name: 'y' })).status).toBe(200);
    const me = (await (await call('GET', '/iam/auth/me', editor.accessToken)).json()) as { activeProfileId: string };
    expect(me.activeProfileId).toBe('p-alice-editor');
  });

  it.each([
    ['an unknown profile', 'p-nobody'],
    ["another user's profile", 'p-bob-editor'],
  ])('answers 404 IAM_PROFILE_NOT_FOUND for %s', async (_name, profileId) => {
    const alice = await login(gateway.url, 'alice');
    const problem = await problemOf(await call('POST', `/iam/authorization/profiles/${profileId}/switch`, alice.accessToken));
    expect(problem).toMatchObject({ status: 404, code: 'IAM_PROFILE_NOT_FOUND' });
  });

  it('answers 404 for a disabled or a revoked profile', async () => {
    await db.repository.applyProvisioning({
      users: [
        {
          userId: 'u-alice',
          profiles: [
            { profileId: 'p-alice-old', profileName: 'Old', templateVersionId: 'reader-v1', clientTypes: ['WEB'], enabled: false },
            { profileId: 'p-alice-gone', profileName: 'Gone', templateVersionId: 'reader-v1', clientTypes: ['WEB'], revoked: true },
          ],
        },
      ],
    });
    const alice = await login(gateway.url, 'alice');
    for (const profileId of ['p-alice-old', 'p-alice-gone']) {
      expect(await problemOf(await call('POST', `/iam/authorization/profiles/${profileId}/switch`, alice.accessToken))).toMatchObject({ status: 404, code: 'IAM_PROFILE_NOT_FOUND' });
    }
  });
});

describe('POST /iam/authorization/diagnostics', () => {
  it('explains a scope denial with the documented problem body', async () => {
    const alice = await login(gateway.url, 'alice');
    const response = await call('POST', '/iam/authorization/diagnostics', alice.accessToken, gateway.url, {
      permissionCode: 'project:update',
      resourceType: 'PROJECT',
      resourceId: '2',
      scopeAccess: 'WRITE',
    });
    expect(response.status).toBe(200);
    const decision = (await response.json()) as { allowed: boolean; permissionCode: string; profileId: string; steps: Array<{ code: string; passed: boolean; reason: string }> };
    expect(decision).toMatchObject({ allowed: false, permissionCode: 'project:update', profileId: 'p-alice-editor' });
    expect(decision.steps.map((s) => s.code)).toEqual(['AUTHENTICATED', 'PROFILE_ACTIVE', 'PERMISSION_GRANTED', 'RESOURCE_RESOLVED', 'SCOPE_DENIED']);
    expect(decision.steps.at(-1)).toMatchObject({ passed: false, reason: expect.stringContaining('PROJECT') });
  });

  it('tells PERMISSION_DENIED from SCOPE_DENIED exactly as enforcement does', async () => {
    const alice = await login(gateway.url, 'alice');
    for (const [path, step] of [
      ['/api/projects/2', 'SCOPE_DENIED'],
      ['/api/tasks/20', 'SCOPE_DENIED'],
    ] as const) {
      const method = path.startsWith('/api/tasks') ? 'DELETE' : 'GET';
      const enforced = await problemOf(await call(method, path, alice.accessToken));
      const explained = (await (await call('POST', '/iam/authorization/diagnostics', alice.accessToken, gateway.url, { method, path })).json()) as {
        allowed: boolean;
        failedStep: string;
        steps: Array<{ code: string }>;
        route: { file: string; line: number };
      };
      expect(enforced.step).toBe(step);
      expect(explained.allowed).toBe(false);
      expect(explained.steps.at(-1)!.code).toBe(step);
      expect(explained.route).toMatchObject({ file: 'host.yaml', line: expect.any(Number) });
    }
    const permission = (await (await call('POST', '/iam/authorization/diagnostics', alice.accessToken, gateway.url, { permissionCode: 'admin:write' })).json()) as { steps: Array<{ code: string }> };
    expect(permission.steps.at(-1)!.code).toBe('PERMISSION_DENIED');
  });

  it('checks domain and client type when asked', async () => {
    const alice = await login(gateway.url, 'alice');
    const domain = (await (await call('POST', '/iam/authorization/diagnostics', alice.accessToken, gateway.url, { permissionCode: 'project:read', domain: 'other.org' })).json()) as { steps: Array<{ code: string }> };
    expect(domain.steps.at(-1)!.code).toBe('DOMAIN_MISMATCH');
    const client = (await (await call('POST', '/iam/authorization/diagnostics', alice.accessToken, gateway.url, { permissionCode: 'project:read', clientType: 'DESKTOP' })).json()) as { steps: Array<{ code: string }> };
    expect(client.steps.at(-1)!.code).toBe('CLIENT_TYPE_MISMATCH');
  });

  it('rejects a body that is neither shape with 400 IAM_VALIDATION_FAILED', async () => {
    const alice = await login(gateway.url, 'alice');
    expect(await problemOf(await call('POST', '/iam/authorization/diagnostics', alice.accessToken, gateway.url, { method: 'GET' }))).toMatchObject({ status: 400, code: 'IAM_VALIDATION_FAILED' });
  });

  it.each([
    ['a request missing its path', { method: 'GET' }, [{ pointer: '/path', message: 'is required' }]],
    ['a permission check with a request member', { permissionCode: 'project:read', method: 'GET' }, [{ pointer: '/method', message: 'is not an allowed property' }]],
    ['a permission check naming a resource without its id', { permissionCode: 'project:read', resourceType: 'PROJECT' }, [{ pointer: '/', message: 'must have property resourceId when property resourceType is present' }]],
    ['neither form', {}, [{ pointer: '/', message: 'must be an object with method and path (a request to explain) or with permissionCode (a permission check)' }]],
    ['not an object', ['GET', '/x'], [{ pointer: '/', message: 'must be an object with method and path (a request to explain) or with permissionCode (a permission check)' }]],
  ])('answers %s with the errors of the form it used, nothing else', async (_name, body, errors) => {
    const alice = await login(gateway.url, 'alice');
    expect(await problemOf(await call('POST', '/iam/authorization/diagnostics', alice.accessToken, gateway.url, body))).toMatchObject({ status: 400, code: 'IAM_VALIDATION_FAILED', errors });
  });
});

describe('GET /iam/authorization/decisions/{decisionId}', () => {
  it('returns the decision behind a 403 to the user it concerns, and to nobody else', async () => {
    const alice = await login(gateway.url, 'alice');
    const denied = await problemOf(await call('GET', '/api/projects/3', alice.accessToken));
    expect(denied.decisionId).toEqual(expect.any(String));
    const response = await call('GET', `/iam/authorization/decisions/${denied.decisionId}`, alice.accessToken);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ decisionId: denied.decisionId, allowed: false, failedStep: 'SCOPE_DENIED' });
    const bob = await login(gateway.url, 'bob');
    expect(await problemOf(await call('GET', `/iam/authorization/decisions/${denied.decisionId}`, bob.accessToken))).toMatchObject({ status: 404, code: 'IAM_DECISION_NOT_FOUND' });
  });
});

describe('changes to profiles reach live sessions', () => {
  async function changeAliceEditorScopes(scopeRefId: string, publishThrough: RunningGateway): Promise<void> {
    const summary = await db.repository.applyProvisioning({
      users: [
        {
          userId: 'u-alice',
          profiles: [
            {
              profileId: 'p-alice-editor',
              profileName: 'Editor on project 1',
              templateVersionId: 'editor-v1',
              clientTypes: ['WEB', 'API'],
              scopes: [{ scopeType: 'PROJECT', scopeRefId, accessMode: 'WRITE' }],
            },
          ],
        },
      ],
    });
    for (const userId of summary.affectedUserIds) await publishThrough.services!.store.publish({ type: 'authorization-changed', userId });
  }

  it('a scope change takes effect on the next request of an existing session', async () => {
    const alice = await login(gateway.url, 'alice');
    expect((await call('GET', '/api/projects/2', alice.accessToken)).status).toBe(403);
    await changeAliceEditorScopes('2', gateway);
    await waitFor(async () => (await call('GET', '/api/projects/2', alice.accessToken)).status === 200);
    expect((await call('GET', '/api/projects/1', alice.accessToken)).status).toBe(403);
    await changeAliceEditorScopes('1', gateway);
    await waitFor(async () => (await call('GET', '/api/projects/1', alice.accessToken)).status === 200);
  });

  const redisUrl = testRedisUrl();
  if (!redisUrl) notRun('authorization: two-instance propagation test (REDIS_URL unset)');
  (redisUrl ? it : it.skip)('... on two instances sharing Redis', async () => {
    const shared = { IAM_POLICIES_DIR: policyDir, IAM_TOKEN_STORE_PREFIX: uniquePrefix('authz2'), REDIS_URL: redisUrl! };
    const a = await startTestGateway(host.url, shared);
    const b = await startTestGateway(host.url, shared);
    try {
      const alice = await login(a.url, 'alice');
      expect((await call('GET', '/api/projects/3', alice.accessToken, b.url)).status).toBe(403);
      expect((await call('GET', '/api/projects/1', alice.accessToken, b.url)).status).toBe(200);
      await changeAliceEditorScopes('3', a);
      // B learns of the change through the events channel, without a restart or a new login.
      await waitFor(async () => (await call('GET', '/api/projects/3', alice.accessToken, b.url)).status === 200, 2000);
      expect((await call('GET', '/api/projects/1', alice.accessToken, b.url)).status).toBe(403);
    } finally {
      await changeAliceEditorScopes('1', a);
      await a.close();
      await b.close();
    }
  });
});

/** The shared poller (test/support/wait.ts), with a generous bound whatever the call names. */
async function waitFor(condition: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  await until('the condition', condition, { within: Math.max(timeoutMs, 20_000), every: 50 });
}
