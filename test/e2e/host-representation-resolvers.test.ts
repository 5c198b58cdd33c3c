/**
 * Resolvers that read the host's own representation (docs/policy-format.md, "Resolvers"), against a host nobody
 * changed: json-server (test/support/json-server-host.ts) is the gateway's upstream and its own resolver.
 * `GET /projects/{id}` is a project (`self: true`), `GET /tasks/{id}` a task whose `projectId` names its project
 * (`scopes: [{type: PROJECT, id: /projectId}]`). A user scoped to PROJECT 1 sees project 1 and its tasks only; an
 * unscoped user sees everything; a task json-server does not know is 404; an answer the mapping cannot read is 502.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import type { ScopeRecord } from '../../src/domain/records';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { SAMPLE_DATA, startJsonServer, type JsonServerHost } from '../support/json-server-host';

const POLICY = `version: 1
default: deny
resources:
  PROJECT:
    resolver: { url: "/projects/{id}", self: true }
  TASK:
    resolver: { url: "/tasks/{id}", scopes: [{ type: PROJECT, id: /projectId }] }
  NOTE:
    resolver: { url: "/notes/{id}", scopes: [{ type: PROJECT, id: /projectId }] }
routes:
  - { path: /projects/:id, methods: [GET], permission: "project:read", resource: { type: PROJECT, id: id, access: READ } }
  - { path: /tasks/:id, methods: [GET], permission: "task:read", resource: { type: TASK, id: id, access: READ } }
  - { path: /notes/:id, methods: [GET], permission: "task:read", resource: { type: NOTE, id: id, access: READ } }
`;

/** The sample data, plus notes whose `projectId` the mapping cannot read (null, an object) and one it can. */
const DATA = {
  ...SAMPLE_DATA,
  notes: [
    { id: 1, projectId: 1, text: 'readable' },
    { id: 2, projectId: null, text: 'no project' },
    { id: 3, projectId: { id: 1 }, text: 'an object' },
  ],
};

let dir: string;
let host: JsonServerHost;
let db: TestDatabase;
let gateway: RunningGateway;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iam-host-representation-'));
  writeFileSync(join(dir, 'routes.yaml'), POLICY);
  db = await createTestDatabase();
  host = await startJsonServer(DATA);
  gateway = await startTestGateway(host.origin, { IAM_POLICIES_DIR: dir });
});

afterAll(async () => {
  await gateway?.close();
  await host?.close();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Gives `user` (a users-file login) one profile reading projects and tasks with `scopes` (none: unscoped); its token. */
async function tokenFor(username: string, userId: string, profileId: string, scopes: ScopeRecord[]): Promise<string> {
  await db.repository.applyProvisioning({
    templates: [{ versionId: 't-host-reader', name: 'host reader', permissions: ['project:read', 'task:read'] }],
    users: [{ userId, profiles: [{ profileId, profileName: profileId, templateVersionId: 't-host-reader', clientTypes: ['WEB'], scopes }] }],
  });
  const session = (await login(gateway.url, username)).accessToken;
  const switched = await fetch(`${gateway.url}/iam/authorization/profiles/${profileId}/switch`, { method: 'POST', headers: bearer(session) });
  expect(switched.status).toBe(200);
  return ((await switched.json()) as { accessToken: string }).accessToken;
}

async function get(path: string, token: string): Promise<{ status: number; body: Record<string, unknown>; type: string | null }> {
  const response = await fetch(`${gateway.url}${path}`, { headers: bearer(token) });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, type: response.headers.get('content-type') };
}

describe("resolvers reading json-server's own representation", () => {
  it('a profile scoped to PROJECT 1 gets project 1 and its tasks, and 403 on project 2 and its task', async () => {
    const token = await tokenFor('alice', 'u-alice', 'p-host-alice', [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }]);
    const project1 = await get('/projects/1', token);
    expect(project1).toMatchObject({ status: 200, body: { id: 1, name: 'Apollo' } });
    // Task 1's projectId is the number 1; the profile's scope is the string "1": the same id.
    expect(await get('/tasks/1', token)).toMatchObject({ status: 200, body: { id: 1, projectId: 1, title: 'Launch' } });
    expect((await get('/tasks/2', token)).status).toBe(200);
    for (const path of ['/projects/2', '/tasks/3', '/tasks/4']) {
      const denied = await get(path, token);
      expect(denied).toMatchObject({ status: 403, body: { code: 'IAM_ACCESS_DENIED', step: 'SCOPE_DENIED' } });
      expect(denied.type).toMatch(/^application\/problem\+json/);
    }
  });

  it('a task json-server does not know is 404 IAM_RESOURCE_NOT_FOUND, for a scoped and an unscoped profile', async () => {
    const scoped = await tokenFor('alice', 'u-alice', 'p-host-alice', [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }]);
    const unscoped = await tokenFor('bob', 'u-bob', 'p-host-bob', []);
    for (const token of [scoped, unscoped]) {
      const missing = await get('/tasks/99', token);
      expect(missing).toMatchObject({ status: 404, body: { code: 'IAM_RESOURCE_NOT_FOUND' } });
      expect(missing.type).toMatch(/^application\/problem\+json/);
      expect((await get('/projects/99', token)).status).toBe(404);
    }
  });

  it('an unscoped profile sees every project and task', async () => {
    const token = await tokenFor('bob', 'u-bob', 'p-host-bob', []);
    for (const { id } of SAMPLE_DATA.projects) expect((await get(`/projects/${id}`, token)).status).toBe(200);
    for (const { id } of SAMPLE_DATA.tasks) expect(await get(`/tasks/${id}`, token)).toMatchObject({ status: 200, body: { id } });
  });

  it('an answer the mapping cannot read (projectId null, an object) is 502 IAM_UPSTREAM_UNAVAILABLE, even unscoped: fail closed', async () => {
    const unscoped = await tokenFor('bob', 'u-bob', 'p-host-bob', []);
    const scoped = await tokenFor('alice', 'u-alice', 'p-host-alice', [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }]);
    expect((await get('/notes/1', scoped)).status).toBe(200);
    for (const token of [unscoped, scoped]) {
      for (const path of ['/notes/2', '/notes/3']) {
        const failed = await get(path, token);
        expect(failed).toMatchObject({ status: 502, body: { code: 'IAM_UPSTREAM_UNAVAILABLE', step: 'RESOURCE_RESOLUTION_UNAVAILABLE' } });
        expect(failed.type).toMatch(/^application\/problem\+json/);
        // The host's answer never reaches the caller.
        expect(JSON.stringify(failed.body)).not.toMatch(/no project|an object/);
      }
    }
  });
});
