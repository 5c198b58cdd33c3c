/**
 * One request's durable writes are bounded (docs/threat-model.md): `POST /iam/authorization/check` with 100 checks
 * is one audit row holding the 100 decisions, not 100 rows, and every `decisionId` it answered still resolves at
 * `GET /iam/authorization/decisions/{id}` (for the user it concerns and for an auditor, never for anyone else) —
 * denials, allowed decisions, a resource that does not exist and a resolver that is down alike. A call that is
 * refused before anything is decided writes nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { answerScope, startResolverHost, type ResolverHost } from '../support/resolver-host';

let dir: string;
let db: TestDatabase;
let upstream: RecordingUpstream;
let resolver: ResolverHost;
let gateway: RunningGateway;

beforeAll(async () => {
  db = await createTestDatabase();
  // Task 5 is in project 1, task 404 does not exist, task 502 fails.
  resolver = await startResolverHost((id, res) => {
    if (id === '404') res.writeHead(404).end();
    else if (id === '502') res.writeHead(500).end();
    else answerScope(res, 'PROJECT', '1');
  });
  dir = mkdtempSync(join(tmpdir(), 'iam-check-audit-'));
  writeFileSync(
    join(dir, 'routes.yaml'),
    `version: 1
default: deny
resources:
  TASK:
    resolver: { url: "${resolver.origin}/tasks/{id}" }
routes:
  - { path: /api/projects/:projectId, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/tasks/:taskId, methods: [GET], permission: task:read, resource: { type: TASK, id: taskId, access: READ } }
  - { path: /api/admin, methods: [GET], permission: "admin:write" }
`,
  );
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: dir, IAM_AUDIT_FLUSH_INTERVAL: '1h' });
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await resolver?.close();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(async () => {
  await gateway.services!.audit.flush();
  await db.orm.em.fork().execute('truncate table iam_audit_events');
});

interface CheckResult {
  allowed: boolean;
  status: number;
  failedStep: string | null;
  decisionId: string;
}

async function check(token: string, checks: unknown[]): Promise<{ status: number; body: { results?: CheckResult[]; code?: string } }> {
  const answer = await fetch(`${gateway.url}/iam/authorization/check`, { method: 'POST', headers: { 'content-type': 'application/json', ...bearer(token) }, body: JSON.stringify({ checks }) });
  return { status: answer.status, body: (await answer.json()) as { results?: CheckResult[]; code?: string } };
}

async function decision(token: string, id: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const answer = await fetch(`${gateway.url}/iam/authorization/decisions/${id}`, { headers: bearer(token) });
  return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
}

/** Rows of the trail besides logins (each login is its own `auth.login` row). */
async function rows(where = "action <> 'auth.login'"): Promise<number> {
  await gateway.services!.audit.flush();
  const found = await db.orm.em.fork().execute<Array<{ n: number }>>(`select count(*)::int as n from iam_audit_events where ${where}`);
  return found[0]!.n;
}

const task = (id: string) => ({ permissionCode: 'task:read', resource: { type: 'TASK', id, access: 'READ' } });

describe('POST /iam/authorization/check writes one audit row per call', () => {
  it('100 checks of a permission the caller lacks: one row; each of the 100 decisionIds resolves for the caller and an auditor, for nobody else', async () => {
    const bob = await login(gateway.url, 'bob');
    const answer = await check(bob.accessToken, Array.from({ length: 100 }, () => ({ permissionCode: 'admin:write' })));
    expect(answer.status).toBe(200);
    const results = answer.body.results!;
    expect(results).toHaveLength(100);
    expect(new Set(results.map((result) => result.failedStep))).toEqual(new Set(['PERMISSION_DENIED']));
    expect(new Set(results.map((result) => result.decisionId)).size).toBe(100);

    expect(await rows()).toBe(1);
    expect(await rows("action = 'authz.check' and actor_user_id = 'u-bob' and outcome = 'denied'")).toBe(1);

    const admin = await login(gateway.url, 'admin');
    const alice = await login(gateway.url, 'alice');
    for (const result of results) {
      const own = await decision(bob.accessToken, result.decisionId);
      expect(own.status).toBe(200);
      expect(own.body).toMatchObject({ decisionId: result.decisionId, allowed: false, failedStep: 'PERMISSION_DENIED', permissionCode: 'admin:write' });
      expect((await decision(admin.accessToken, result.decisionId)).body).toMatchObject({ decisionId: result.decisionId });
    }
    const foreign = await decision(alice.accessToken, results[0]!.decisionId);
    expect([foreign.status, foreign.body.code]).toEqual([404, 'IAM_DECISION_NOT_FOUND']);
    // Looking the decisions up writes nothing either.
    expect(await rows()).toBe(1);
  }, 60_000);

  it('a call mixing allowed, denied, not found and a resolver that is down: one row; each decisionId resolves to its own result', async () => {
    const alice = await login(gateway.url, 'alice'); // p-alice-editor: PROJECT 1 WRITE
    const checks = [
      { permissionCode: 'project:read', resource: { type: 'PROJECT', id: '1', access: 'READ' } },
      { permissionCode: 'project:read', resource: { type: 'PROJECT', id: '2', access: 'READ' } },
      task('5'),
      task('404'),
      task('502'),
      { permissionCode: 'admin:write' },
    ];
    const answer = await check(alice.accessToken, checks);
    expect(answer.status).toBe(200);
    const results = answer.body.results!;
    expect(results.map((result) => [result.allowed, result.status, result.failedStep])).toEqual([
      [true, 200, null],
      [false, 403, 'SCOPE_DENIED'],
      [true, 200, null],
      [false, 404, 'RESOURCE_NOT_FOUND'],
      [false, 502, 'RESOURCE_RESOLUTION_UNAVAILABLE'],
      [false, 403, 'PERMISSION_DENIED'],
    ]);
    expect(await rows()).toBe(1);
    for (const result of results) {
      const found = await decision(alice.accessToken, result.decisionId);
      expect(found.status).toBe(200);
      expect(found.body).toMatchObject({ decisionId: result.decisionId, allowed: result.allowed, status: result.status, failedStep: result.failedStep });
    }
  });

  it('a call refused before anything is decided writes no row, and an id nobody answered does not resolve', async () => {
    const bob = await login(gateway.url, 'bob');
    const tooMany = await check(bob.accessToken, Array.from({ length: 101 }, () => ({ permissionCode: 'admin:write' })));
    expect([tooMany.status, tooMany.body.code]).toEqual([400, 'IAM_VALIDATION_FAILED']);
    const anonymous = await fetch(`${gateway.url}/iam/authorization/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ checks: [{ permissionCode: 'admin:write' }] }) });
    expect(anonymous.status).toBe(401);
    expect(await rows()).toBe(0);
    const unknown = await decision(bob.accessToken, '00000000-0000-4000-8000-000000000000');
    expect([unknown.status, unknown.body.code]).toEqual([404, 'IAM_DECISION_NOT_FOUND']);
  });
});
