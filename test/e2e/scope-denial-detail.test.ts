/**
 * Round 3: a scope denial tells the caller what the caller holds, never what the resolver answered. A task's parent
 * project is the host's data: "no scope covering PROJECT 7" in a 403 told a user which project task 70 belongs to,
 * and so did their own decision lookup and diagnostics. The full trace (the resolver's answer) is for auditors
 * (`iam.admin.audit:read`) and diagnostics administrators (`iam.admin.diagnostics:read`).
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

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  // Task 70 is in project 7 (a secret of the host's); alice's profile is scoped to project 1.
  resolver = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ scopes: [{ type: 'PROJECT', id: '7' }] }));
  });
  await new Promise<void>((resolve) => resolver.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(resolver.address() as AddressInfo).port}`;
  dir = await mkdtemp(join(tmpdir(), 'iam-scope-detail-'));
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

interface Decision {
  decisionId: string;
  resource?: { type: string; id: string; scopeRefs?: unknown };
  steps: Array<{ code: string; reason: string; callerReason?: string }>;
}

const json = async <T>(answer: Response): Promise<T> => (await answer.json()) as T;
/** Everything the caller is shown, as one string, to look for the resolver's answer in. */
const shown = (value: unknown): string => JSON.stringify(value);

describe("a scope denial in the caller's view", () => {
  it('names the requested resource and the profile\'s own scopes, never the parent the resolver answered', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    const denied = await fetch(`${gateway.url}/api/tasks/70`, { headers: bearer(alice) });
    expect(denied.status).toBe(403);
    const problem = await json<{ code: string; step: string; detail: string; decisionId: string }>(denied);
    expect(problem).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'SCOPE_DENIED' });
    expect(problem.detail).toContain('TASK 70');
    expect(problem.detail).toContain('PROJECT 1 (WRITE)');
    expect(problem.detail).not.toContain('PROJECT 7');

    // Her own decision lookup: the same view.
    const own = await json<Decision>(await fetch(`${gateway.url}/iam/authorization/decisions/${problem.decisionId}`, { headers: bearer(alice) }));
    expect(own.steps.map((step) => step.code)).toEqual(['AUTHENTICATED', 'PROFILE_ACTIVE', 'PERMISSION_GRANTED', 'RESOURCE_RESOLVED', 'SCOPE_DENIED']);
    expect(shown(own)).not.toContain('PROJECT 7');
    expect(own.resource).toEqual({ type: 'TASK', id: '70', access: 'READ' });
    expect(own.steps.some((step) => 'callerReason' in step)).toBe(false);

    // Her own diagnostics of the request: the same view, and no other way around it.
    const explained = await json<Decision>(
      await fetch(`${gateway.url}/iam/authorization/diagnostics`, { method: 'POST', headers: { ...bearer(alice), 'content-type': 'application/json' }, body: JSON.stringify({ method: 'GET', path: '/api/tasks/70' }) }),
    );
    expect(explained.steps.at(-1)?.code).toBe('SCOPE_DENIED');
    expect(shown(explained)).not.toContain('PROJECT 7');

    // An auditor sees the full trace of the same decision: the resolver's answer is there.
    const admin = (await login(gateway.url, 'admin')).accessToken;
    const full = await json<Decision>(await fetch(`${gateway.url}/iam/authorization/decisions/${problem.decisionId}`, { headers: bearer(admin) }));
    expect(full.resource?.scopeRefs).toEqual([{ type: 'PROJECT', id: '7' }]);
    expect(full.steps.at(-1)?.reason).toContain('PROJECT 7');
    expect(full.steps.some((step) => 'callerReason' in step)).toBe(false);
    // A diagnostics administrator explaining alice's request sees it too.
    const asAlice = await json<Decision>(
      await fetch(`${gateway.url}/iam/authorization/diagnostics`, { method: 'POST', headers: { ...bearer(admin), 'content-type': 'application/json' }, body: JSON.stringify({ method: 'GET', path: '/api/tasks/70', userId: 'u-alice' }) }),
    );
    expect(shown(asAlice)).toContain('PROJECT 7');
  });
});
