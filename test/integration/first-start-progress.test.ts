/**
 * A first start on the embedded database takes seconds (PGlite creates its data directory, then the migrations run):
 * `serve` says so on stderr, in order, before it logs that it listens; a start on a directory that is ready prints
 * none of it. The process's stdout and stderr go to one file, so the order between the two streams is the order the
 * process wrote them in.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IAM_MIGRATIONS as MIGRATIONS } from '../../src/adapters/postgres/migration-list';
import { ensureBuilt, spawnGatewayProcess } from '../support/gateway-process';
import { until } from '../support/wait';

let root: string;

beforeAll(() => {
  ensureBuilt();
  root = mkdtempSync(join(tmpdir(), 'iam-first-start-'));
}, 180_000);
afterAll(() => rmSync(root, { recursive: true, force: true, maxRetries: 50, retryDelay: 100 }));

/** `serve` on the embedded database in `dataDir` until it listens, then SIGTERM; resolves everything it wrote, in order. */
async function serveUntilListening(dataDir: string, name: string): Promise<string> {
  const outputFile = join(root, `${name}.out`);
  const fd = openSync(outputFile, 'w');
  const child = spawnGatewayProcess(
    'http://127.0.0.1:9',
    { DATABASE_URL: '', DATABASE_EMBEDDED_DIR: dataDir, DATABASE_POOL_SIZE: '1', REDIS_URL: '', IAM_AUDIT_SPOOL_DIR: join(root, `${name}-spool`) },
    [],
    { output: fd },
  );
  closeSync(fd);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const output = (): string => readFileSync(outputFile, 'utf8');
  try {
    await until('the gateway to listen', () => output().includes('"msg":"iam-gateway listening"') || child.exitCode !== null, { within: 90_000 });
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
  return output();
}

it('a fresh data directory: initializing, each migration n of m, ready, then listening; a second start prints none of it', async () => {
  const dataDir = join(root, 'data');
  const first = serveLines(await serveUntilListening(dataDir, 'first'));
  const total = MIGRATIONS.length;
  const expected = [
    `iam-gateway: initializing the embedded database in ${dataDir} (first start; this may take a while)`,
    ...MIGRATIONS.map((migration, index) => `iam-gateway: applying database migration ${index + 1} of ${total}: ${migration.name}`),
    `iam-gateway: database ready (${total} migration${total === 1 ? '' : 's'} applied)`,
    'LISTENING',
  ];
  expect(first.filter((line) => line.startsWith('iam-gateway: ') || line === 'LISTENING')).toEqual(expected);

  const second = serveLines(await serveUntilListening(dataDir, 'second'));
  expect(second.filter((line) => line.startsWith('iam-gateway: '))).toEqual([]);
  expect(second).toContain('LISTENING');
}, 240_000);

/** The lines written, the JSON "listening" log line shown as LISTENING. */
function serveLines(output: string): string[] {
  return output.split('\n').map((line) => (line.includes('"msg":"iam-gateway listening"') ? 'LISTENING' : line));
}
