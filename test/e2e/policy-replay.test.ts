/**
 * `iam-gateway policy replay NEW_DIR` (docs/policy-changes.md) against an access log a real gateway wrote in this
 * test and its audit trail: the recorded requests are decided again by a changed policy with the database's grants;
 * allow → deny and deny → allow are counted per route and user; no resolver is ever asked (the recorded outcome is
 * reused where the route checked the same resource); bad lines are counted and skipped; a database that cannot be
 * reached is exit 2.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import { createTestDatabase } from '../support/database';
import { testDatabaseUrl } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { runPolicy } from '../support/policy-cli';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const policy = (resolverUrl: string, changes: { admin?: string; list?: string } = {}): string => `version: 1
default: deny
resources:
  TASK:
    resolver: { url: "${resolverUrl}/tasks/{id}" }
routes:
  - { path: /api/projects, methods: [GET], permission: ${changes.list ?? 'project:list'} }
  - { path: /api/projects/:projectId, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/tasks/:taskId, methods: [GET], permission: task:read, resource: { type: TASK, id: taskId, access: READ } }
  - { path: /api/admin/**, methods: ["*"], permission: ${changes.admin ?? 'admin:write'} }
`;

let root: string;
let upstream: RecordingUpstream;
let resolver: Server;
let resolverCalls = 0;
let logFile: string;

beforeAll(async () => {
  await (await createTestDatabase()).close();
  root = mkdtempSync(join(tmpdir(), 'iam-replay-'));
  // Task 5 is in project 1 (alice's), task 6 in project 2.
  resolver = createServer((req, res) => {
    resolverCalls++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ scopes: [{ type: 'PROJECT', id: req.url?.endsWith('/5') ? '1' : '2' }] }));
  });
  await new Promise<void>((resolve) => resolver.listen(0, '127.0.0.1', resolve));
  const resolverUrl = `http://127.0.0.1:${(resolver.address() as AddressInfo).port}`;
  for (const [dir, text] of Object.entries({
    live: policy(resolverUrl),
    // The admin area opened to project readers (wider), the project list closed to admins (narrower).
    changed: policy(resolverUrl, { admin: 'project:read', list: 'admin:write' }),
    same: policy(resolverUrl),
  })) {
    const path = join(root, dir);
    mkdirSync(path);
    writeFileSync(join(path, 'routes.yaml'), text);
  }

  // Real traffic through a gateway serving the live policy, its access log captured.
  let text = '';
  const destination: DestinationStream = { write: (chunk: string) => void (text += chunk) };
  upstream = await startRecordingUpstream();
  const gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: join(root, 'live'), IAM_ACCESS_LOG: 'all' }, { accessLogDestination: destination });
  try {
    const alice = bearer((await login(gateway.url, 'alice')).accessToken); // p-alice-editor: project 1 (WRITE)
    const bob = bearer((await login(gateway.url, 'bob')).accessToken); // p-bob-editor: every project, no admin:write
    const statuses: number[] = [];
    for (const [path, headers] of [
      ['/api/projects', alice],
      ['/api/projects/1', alice],
      ['/api/projects/2', alice],
      ['/api/tasks/5', alice],
      ['/api/tasks/6', alice],
      ['/api/admin/stats', bob],
      ['/api/projects', {}],
      ['/nowhere', alice],
    ] as Array<[string, Record<string, string>]>) {
      statuses.push((await fetch(`${gateway.url}${path}`, { headers })).status);
    }
    expect(statuses).toEqual([200, 200, 403, 200, 403, 403, 401, 403]);
  } finally {
    await gateway.close(); // flushes the access log and the audit trail
  }
  logFile = join(root, 'access.log');
  // The log as an operator would have it: the access lines among other output, one line from another version,
  // one that is not JSON.
  writeFileSync(
    logFile,
    `${text}{"level":30,"msg":"iam-gateway started"}\nnot json at all\n{"msg":"access","method":"GET","path":"/api/projects","decision":"allow","userId":"u-alice","route":"/api/projects","step":null}\n`,
  );
}, 60_000);

afterAll(async () => {
  await upstream?.close();
  await new Promise((resolve) => resolver?.close(resolve));
  rmSync(root, { recursive: true, force: true });
});

const env = (): NodeJS.ProcessEnv => ({ DATABASE_URL: testDatabaseUrl(), IAM_POLICIES_DIR: join(root, 'live'), IAM_CONFIG: join(ROOT, 'config', 'default.yaml') });

interface Report {
  total: Record<string, number>;
  routes: Array<{ route: string; counts: Record<string, number>; examples: Array<{ path: string; userId: string | null; was: string; now: string }> }>;
  users: Array<{ userId: string; counts: Record<string, number> }>;
  skipped: Record<string, number>;
  reused: number;
}

describe('policy replay of a real access log', () => {
  it('the same policy: every decision unchanged, no resolver asked (the recorded outcome reused), exit 0', async () => {
    const before = resolverCalls;
    const answer = await runPolicy(['replay', 'same', '--access-log', logFile, '--json'], root, env());
    expect([answer.code, answer.stderr]).toEqual([0, '']);
    const report = JSON.parse(answer.stdout) as Report;
    expect(report.total).toEqual({ 'allow→deny': 0, 'deny→allow': 0, unchanged: 8, 'needs-resolver': 0 });
    expect(report.reused).toBe(2); // the two task requests
    expect(resolverCalls).toBe(before);
    // Lines of other loggers are ignored; what cannot be read or replayed is counted, never a crash.
    expect(report.skipped).toMatchObject({ unreadable: 1, unrecognized: 1, other: 1 });
  });

  it('a changed policy: deny→allow and allow→deny per route and user, with examples; --fail-on decides the exit', async () => {
    const answer = await runPolicy(['replay', 'changed', '--access-log', logFile, '--fail-on', 'wider'], root, env());
    expect(answer.code).toBe(1);
    expect(answer.stdout).toContain('replayed 8 decisions: 1 allow→deny, 1 deny→allow, 6 unchanged');
    expect(answer.stdout).toContain('route /api/admin/**: 0 allow→deny, 1 deny→allow, 0 unchanged');
    expect(answer.stdout).toMatch(/ {2}.*access\.log:\d+ GET \/api\/admin\/stats u-bob: deny \(PERMISSION_DENIED\) → allow/);
    expect(answer.stdout).toContain('route /api/projects: 1 allow→deny, 0 deny→allow, 1 unchanged');
    expect(answer.stdout).toContain('user u-bob: 0 allow→deny, 1 deny→allow, 0 unchanged');
    expect((await runPolicy(['replay', 'changed', '--access-log', logFile, '--fail-on', 'narrower'], root, env())).code).toBe(1);
    expect((await runPolicy(['replay', 'changed', '--access-log', logFile], root, env())).code).toBe(0);
    expect((await runPolicy(['replay', 'same', '--access-log', logFile, '--fail-on', 'any'], root, env())).code).toBe(0);
  });

  it('the audit trail\'s denials of the last DURATION are replayed too', async () => {
    const answer = await runPolicy(['replay', 'changed', '--since', '1h', '--json'], root, env());
    expect(answer.code).toBe(0);
    const report = JSON.parse(answer.stdout) as Report;
    // Denials only (allowed requests are not audited): bob's admin request is now allowed.
    expect(report.total['deny→allow']).toBe(1);
    expect(report.total.unchanged).toBeGreaterThanOrEqual(3);
  });

  it('standard input with -', async () => {
    const { Readable } = await import('node:stream');
    const { readFileSync } = await import('node:fs');
    const { runPolicyCommand } = await import('../../src/cli/policy-command');
    let stdout = '';
    const sink = new (await import('node:stream')).Writable({ write: (chunk: Buffer, _e, done) => ((stdout += chunk.toString()), done()) });
    const code = await runPolicyCommand(['replay', 'changed', '--access-log', '-'], { stdout: sink, stderr: sink, env: env(), cwd: root, stdin: Readable.from([readFileSync(logFile, 'utf8')]) });
    expect(code).toBe(0);
    expect(stdout).toContain('replayed 8 decisions: 1 allow→deny, 1 deny→allow, 6 unchanged');
  });

  it('a database that cannot be reached: exit 2, saying which (never its password)', async () => {
    const answer = await runPolicy(['replay', 'changed', '--access-log', logFile], root, { ...env(), DATABASE_URL: 'postgresql://replayer:s3cret-pw@127.0.0.1:1/iam' });
    expect(answer.code).toBe(2);
    expect(answer.stderr).toContain('cannot reach the database at 127.0.0.1:1/iam');
    expect(answer.stderr + answer.stdout).not.toContain('s3cret-pw');
  });

  it('usage: NEW_DIR and a source are required; a NEW_DIR that does not load is exit 2', async () => {
    expect((await runPolicy(['replay', 'changed'], root, env())).code).toBe(2);
    expect((await runPolicy(['replay', '--access-log', logFile], root, env())).code).toBe(2);
    expect((await runPolicy(['replay', 'changed', '--access-log', logFile, '--fail-on', 'sideways'], root, env())).code).toBe(2);
    writeFileSync(join(root, 'broken.yaml'), '');
    expect((await runPolicy(['replay', 'nowhere', '--access-log', logFile], root, env())).code).toBe(2);
  });
});
