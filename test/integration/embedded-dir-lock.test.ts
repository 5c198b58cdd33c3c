/**
 * #11.23: two processes on one embedded data directory would both open it (PGlite has no lock of its own)
 * and corrupt it. The directory is locked: a second `iam-gateway serve` exits at once, non-zero, naming the
 * directory; the first keeps serving; a lock left by a killed process does not block the next start.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, serveUntilExit, startGatewayProcess, type GatewayProcess, type ServeOutcome } from '../support/gateway-process';
import { hasExited } from '../support/processes';

/** `iam-gateway serve` on the embedded data directory `dir`, until it exits. */
const serveOn = (dir: string, boundMs: number): Promise<ServeOutcome> =>
  serveUntilExit({ PORT: '0', MANAGEMENT_PORT: '0', DATABASE_URL: '', DATABASE_EMBEDDED_DIR: dir, REDIS_URL: '' }, boundMs);

const embeddedOn = (dir: string): Record<string, string> => ({ DATABASE_URL: '', DATABASE_EMBEDDED_DIR: dir, REDIS_URL: '', DATABASE_POOL_SIZE: '1' });

describe('#11.23 one process per embedded data directory', () => {
  let root: string;
  const running: GatewayProcess[] = [];

  beforeAll(() => {
    ensureBuilt();
    root = mkdtempSync(join(tmpdir(), 'iam-lock-'));
  }, 180_000);
  afterAll(async () => {
    for (const process of running) await process.kill();
    // A killed gateway's database process closes the directory for a moment after it (retried, not raced).
    rmSync(root, { recursive: true, force: true, maxRetries: 50, retryDelay: 100 });
  });

  it('#11.23: a second process on the same directory exits at once, non-zero, naming it; the first keeps serving; a killed holder\'s lock is taken over', async () => {
    const dir = join(root, 'data');
    const first = await startGatewayProcess('http://127.0.0.1:9', embeddedOn(dir));
    running.push(first);

    const second = await serveOn(dir, 20_000);
    expect(second.code).not.toBe(0);
    expect(second.code).not.toBeNull();
    expect(second.stderr).toContain(dir);
    expect(second.stderr).toMatch(/in use/);

    expect((await fetch(`${first.managementUrl}/health/ready`)).status).toBe(200);

    // The lock names the gateway and its embedded database process.
    const [gatewayPid, databasePid] = readFileSync(join(dir, 'iam-gateway.lock'), 'utf8').trim().split('\n').map(Number);
    expect(gatewayPid).toBe(first.pid);
    expect(hasExited(databasePid!)).toBe(false);

    // A lock left by a killed process (SIGKILL: no chance to remove it) does not block the next start, and the
    // next gateway opens the directory only once the killed one's database process has closed it and exited. An
    // orphan that exited may stay a zombie until it is reaped: it holds nothing, and `kill(pid, 0)` would still find it.
    await first.kill();
    const next = await startGatewayProcess('http://127.0.0.1:9', embeddedOn(dir));
    running.push(next);
    expect(hasExited(databasePid!)).toBe(true);
    expect((await fetch(`${next.managementUrl}/health/ready`)).status).toBe(200);
  }, 120_000);
});
