/**
 * #11.5 end to end: the bundled example host (@koa/router, case-insensitive like Express and ASP.NET)
 * serves `/api/ADMIN/stats` with its `/api/admin/stats` handler. Behind the gateway, a differently-cased
 * path must be decided by the admin route, not by a weaker `:param` route or `default: authenticated`;
 * and the host still receives the path with the case the client sent.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHost, type RunningHost } from '../../examples/host/server';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

/** Weaker rules a differently-cased admin path could fall to: a public `:area` route, `default: authenticated`. */
const POLICY = `version: 1
default: authenticated
routes:
  - { path: /health, methods: [GET], public: true }
  - { path: /api/admin/**, methods: ["*"], permission: admin:write }
  - { path: /api/:area/stats, methods: [GET], public: true }
  - { path: /docs/**, methods: [GET], public: true }
`;

/** The demo users and profiles, passed explicitly (the shipped default configuration may load none). */
const DEMO = { IAM_AUTHENTICATOR_TYPE: 'users-file', IAM_AUTHENTICATOR_PATH: 'config/users.example.yaml', IAM_PROVISION_FILE: 'config/provision.example.yaml' };

let db: TestDatabase;
let host: RunningHost;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let recordingGateway: RunningGateway;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase();
  host = await startHost(0);
  upstream = await startRecordingUpstream();
  dir = mkdtempSync(join(tmpdir(), 'iam-policy-case-'));
  writeFileSync(join(dir, 'routes.yaml'), POLICY);
  gateway = await startTestGateway(host.url, { IAM_POLICIES_DIR: dir, ...DEMO });
  recordingGateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: dir, ...DEMO });
});

afterAll(async () => {
  await recordingGateway?.close();
  await gateway?.close();
  await upstream?.close();
  await host?.close();
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function status(base: string, method: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; code?: string; body: any }> {
  const response = await fetch(`${base}${path}`, { method, headers });
  const text = await response.text();
  const body = text.startsWith('{') ? JSON.parse(text) : text;
  return { status: response.status, code: typeof body === 'object' ? body.code : undefined, body };
}

describe('#11.5 case-insensitive hosts behind the gateway', () => {
  it('the example host itself routes case-insensitively (the premise of the bypass)', async () => {
    expect((await status(host.url, 'GET', '/api/ADMIN/stats')).body).toMatchObject({ projects: 3 });
    expect((await status(host.url, 'GET', '/Api/Admin/Stats')).status).toBe(200);
  });

  it.each(['/api/admin/stats', '/api/ADMIN/stats', '/API/Admin/STATS', '/api/aDmIn/stats/'])('anonymous GET %s needs a session (401), not the public :area route', async (path) => {
    expect(await status(gateway.url, 'GET', path)).toMatchObject({ status: 401, code: 'IAM_UNAUTHENTICATED' });
  });

  it('a user without admin:write is denied every spelling, and the host never reindexes', async () => {
    const alice = await login(gateway.url, 'alice');
    for (const [method, path] of [['GET', '/api/ADMIN/stats'], ['GET', '/api/Admin/Stats'], ['POST', '/API/ADMIN/REINDEX'], ['POST', '/api/admin/Reindex']]) {
      expect({ method, path, ...(await status(gateway.url, method, path, bearer(alice.accessToken))) }).toMatchObject({ method, path, status: 403, code: 'IAM_ACCESS_DENIED' });
    }
    expect((await status(host.url, 'GET', '/api/admin/stats')).body.reindexCount).toBe(0);
    // Other areas keep their public stats page.
    expect((await status(gateway.url, 'GET', '/api/projects/stats')).status).not.toBe(401);
  });

  it('forwards the path with the case the client sent (matching folds, forwarding does not)', async () => {
    await upstream.clear();
    expect((await status(recordingGateway.url, 'GET', '/DOCS/Intro/ReadMe.md')).status).toBe(200);
    expect((await upstream.requests()).map((request) => request.url)).toEqual(['/DOCS/Intro/ReadMe.md']);
  });
});
