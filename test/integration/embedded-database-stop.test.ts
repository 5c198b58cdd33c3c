/**
 * The embedded database's process (adapters/pglite/embedded-database-process.ts) when its gateway is killed while
 * the database starts: it finishes its start, closes again and exits — it never outlives the gateway — and it never
 * sends on the closed IPC channel (an uncaught ERR_IPC_CHANNEL_CLOSED on the gateway's stderr, which the child
 * shares).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, spawnGatewayProcess } from '../support/gateway-process';
import { until } from '../support/wait';

beforeAll(() => {
  ensureBuilt();
}, 180_000);

/** The pids of `pid`'s children, whichever of its threads started them (the database thread does) (Linux). */
function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) => readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    return [];
  }
}

const isRunning = (pid: number): boolean => {
  if (!existsSync(`/proc/${pid}`)) return false;
  // A zombie (exited, not reaped yet) is not running.
  return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
};

describe('the embedded database process when its gateway is killed during the start', () => {
  it('finishes its start, exits, and prints no uncaught ERR_IPC_CHANNEL_CLOSED', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'iam-embedded-stop-'));
    // The embedded database whatever this run uses: the test is about its process.
    const gateway = spawnGatewayProcess('http://127.0.0.1:9', {
      DATABASE_URL: '',
      DATABASE_POOL_SIZE: '1',
      DATABASE_EMBEDDED_DIR: dataDir,
      REDIS_URL: '',
      IAM_AUDIT_SPOOL_DIR: join(dataDir, 'spool'),
    });
    let stderr = '';
    gateway.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    gateway.stdout!.resume();
    // The child shares the gateway's stderr: the pipe ends when both have exited.
    const stderrClosed = new Promise<void>((resolve) => gateway.stderr!.once('close', () => resolve()));
    const gatewayExited = new Promise<void>((resolve) => gateway.once('exit', () => resolve()));

    let database: number;
    try {
      // The embedded database's process exists: PGlite is starting (seconds), the gateway waits for its ready message.
      database = await until('the embedded database process', () => childrenOf(gateway.pid!)[0], { every: 5 });
    } finally {
      gateway.kill('SIGKILL');
      await gatewayExited;
    }

    await until('the embedded database process to exit', () => !isRunning(database), { within: 60_000, every: 50 });
    await stderrClosed;
    expect(stderr).not.toMatch(/ERR_IPC_CHANNEL_CLOSED|Uncaught|Error/);
  }, 120_000);
});
