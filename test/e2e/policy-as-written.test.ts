/**
 * #11.30 end to end: through the proxy, in front of a recording host, a policy is served as written — a
 * method a route does not list is refused rather than passed by a broader route that needs only a session,
 * and a route's own permission inside a public group is checked — and the refused requests never reach the host.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const POLICY = `version: 1
default: authenticated
routes:
  - { path: /api/**, methods: ["*"] }
  - { path: /api/projects/:projectId, methods: [GET], permission: project:read }
  - path: /pub
    public: true
    routes:
      - { path: /docs, methods: [GET] }
      - { path: /admin, methods: [GET], permission: admin:write }
`;

/** The demo users and profiles, passed explicitly (the shipped default configuration may load none). */
const DEMO = { IAM_AUTHENTICATOR_TYPE: 'users-file', IAM_AUTHENTICATOR_PATH: 'config/users.example.yaml', IAM_PROVISION_FILE: 'config/provision.example.yaml' };

let db: TestDatabase;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
  dir = mkdtempSync(join(tmpdir(), 'iam-as-written-e2e-'));
  writeFileSync(join(dir, 'routes.yaml'), POLICY);
  gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: dir, ...DEMO });
});

afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function send(method: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; code?: string; step?: string }> {
  const response = await fetch(`${gateway.url}${path}`, { method, headers });
  const text = await response.text();
  const body = response.headers.get('content-type')?.includes('json') && text ? JSON.parse(text) : {};
  return { status: response.status, code: body.code, step: body.step };
}

describe('#11.30 policies served as written, through the proxy', () => {
  it('a method the specific route does not list is refused, not passed by the session-only /api/**', async () => {
    const alice = await login(gateway.url, 'alice');
    await upstream.clear();
    for (const method of ['DELETE', 'PUT', 'POST', 'PROPFIND']) {
      expect({ method, ...(await send(method, '/api/projects/1', bearer(alice.accessToken))) }).toEqual({ method, status: 403, code: 'IAM_ACCESS_DENIED', step: 'ROUTE_NOT_DECLARED' });
    }
    expect(await upstream.requests()).toEqual([]);
    // What is declared still works, and the broader route still serves other paths.
    expect((await send('GET', '/api/projects/1', bearer(alice.accessToken))).status).toBe(200);
    expect((await send('DELETE', '/api/other/1', bearer(alice.accessToken))).status).toBe(200);
    expect((await upstream.requests()).map((request) => `${request.method} ${request.url}`)).toEqual(['GET /api/projects/1', 'DELETE /api/other/1']);
  });

  it('a route’s own permission inside a public group is checked; the group’s other routes stay public', async () => {
    await upstream.clear();
    expect(await send('GET', '/pub/admin')).toMatchObject({ status: 401, code: 'IAM_UNAUTHENTICATED' });
    const alice = await login(gateway.url, 'alice');
    expect(await send('GET', '/pub/admin', bearer(alice.accessToken))).toMatchObject({ status: 403, code: 'IAM_ACCESS_DENIED', step: 'PERMISSION_DENIED' });
    expect(await upstream.requests()).toEqual([]);
    expect((await send('GET', '/pub/docs')).status).toBe(200);
  });
});
