/**
 * `policy replay NEW_DIR --since 1h` on the embedded database (no DATABASE_URL), as a newcomer runs it: a real
 * `serve` process records denials in its audit trail; while it runs, replay is refused by the data directory's lock
 * (naming the gateway's pid, the directory untouched); once it stopped, replay opens the same directory and reports.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bearer, login, ROOT } from '../support/gateway';
import { ensureBuilt, startGatewayProcess, type GatewayProcess } from '../support/gateway-process';
import { runPolicy } from '../support/policy-cli';

let root: string;
let gateway: GatewayProcess | null = null;

beforeAll(() => {
  ensureBuilt();
  root = mkdtempSync(join(tmpdir(), 'iam-replay-embedded-'));
}, 180_000);
afterAll(async () => {
  await gateway?.kill();
  rmSync(root, { recursive: true, force: true, maxRetries: 50, retryDelay: 100 });
});

it('refused while the gateway runs (its pid named), then replays the audit trail once it stopped', async () => {
  const dataDir = join(root, 'data');
  // The new policy opens the admin area to project readers: alice's denial there becomes an allow.
  const changed = join(root, 'changed');
  mkdirSync(changed);
  writeFileSync(join(changed, 'example.yaml'), readFileSync(join(ROOT, 'policies', 'example.yaml'), 'utf8').replace('permission: admin:write', 'permission: project:read'));
  const embedded = { DATABASE_URL: '', DATABASE_EMBEDDED_DIR: dataDir, REDIS_URL: '', DATABASE_POOL_SIZE: '1' };

  gateway = await startGatewayProcess('http://127.0.0.1:9', embedded);
  const alice = bearer((await login(gateway.url, 'alice')).accessToken);
  expect((await fetch(`${gateway.url}/api/admin/stats`, { headers: alice })).status).toBe(403);

  // The replay's configuration: the environment of the shell it runs in (the same embedded directory).
  const env = { ...embedded, IAM_CONFIG: join(ROOT, 'config', 'default.yaml'), IAM_POLICIES_DIR: join(ROOT, 'policies') };
  const whileRunning = await runPolicy(['replay', changed, '--since', '1h'], root, env);
  expect(whileRunning.code).toBe(2);
  expect(whileRunning.stderr).toContain(`the embedded database in ${dataDir} is in use by a running gateway (pid ${gateway.pid}); stop it first`);

  gateway.child.kill('SIGTERM');
  expect(await gateway.exited).toMatchObject({ code: 0 });
  gateway = null;

  const answer = await runPolicy(['replay', changed, '--since', '1h', '--json'], root, env);
  expect([answer.code, answer.stderr]).toEqual([0, '']);
  const report = JSON.parse(answer.stdout) as { total: Record<string, number> };
  expect(report.total['deny→allow']).toBe(1);
}, 180_000);

it('an embedded directory that holds no database: refused, nothing created', async () => {
  const empty = join(root, 'never-served');
  const answer = await runPolicy(['replay', join(ROOT, 'policies'), '--since', '1h'], root, {
    DATABASE_URL: '',
    DATABASE_EMBEDDED_DIR: empty,
    IAM_CONFIG: join(ROOT, 'config', 'default.yaml'),
    IAM_POLICIES_DIR: join(ROOT, 'policies'),
  });
  expect(answer.code).toBe(2);
  expect(answer.stderr).toContain(`no embedded database in ${empty} (database.embedded-dir): start the gateway on it once`);
});
