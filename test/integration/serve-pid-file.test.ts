/**
 * `iam-gateway serve --pid-file FILE` (docs/cli.md): the real process writes its own pid once it listens, `kill $(cat
 * FILE)` stops it (the file goes, the embedded data directory's lock is released, so the next start works), a start
 * whose FILE names a running gateway is refused with exit 2, and a stale FILE (its process gone, or the pid reused by
 * something that is not a gateway) is overwritten.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, serveUntilExit, startGatewayProcess, type GatewayProcess } from '../support/gateway-process';
import { until } from '../support/wait';

const embeddedOn = (dir: string): Record<string, string> => ({ DATABASE_URL: '', DATABASE_EMBEDDED_DIR: dir, REDIS_URL: '', DATABASE_POOL_SIZE: '1' });

/** The documented stop, run by a shell. */
const killFromFile = (file: string): void => void execFileSync('sh', ['-c', 'kill "$(cat "$1")"', 'sh', file]);

const readPid = (file: string): number | null => (existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : null);

describe('serve --pid-file', () => {
  let root: string;
  const running: GatewayProcess[] = [];

  beforeAll(() => {
    ensureBuilt();
    root = mkdtempSync(join(tmpdir(), 'iam-pid-file-'));
  }, 180_000);
  afterAll(async () => {
    for (const gateway of running) await gateway.kill();
    rmSync(root, { recursive: true, force: true, maxRetries: 50, retryDelay: 100 });
  });

  it('writes its pid once listening, refuses a second start on it, stops on kill $(cat FILE) releasing the data lock, and overwrites a stale file', async () => {
    const dir = join(root, 'data');
    const file = join(root, 'gateway.pid');
    const first = await startGatewayProcess('http://127.0.0.1:9', embeddedOn(dir), ['--pid-file', file]);
    running.push(first);
    // Written right after the "listening" log line.
    await until('the pid file to name the gateway', () => readPid(file) === first.pid);

    // A second start on the same pid file: refused before it opens anything (the data directory would refuse it too,
    // but later and with another message), exit 2, naming the running pid.
    const second = await serveUntilExit({ PORT: '0', MANAGEMENT_PORT: '0', ...embeddedOn(join(root, 'other-data')) }, 20_000, ['--pid-file', file]);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain(`--pid-file ${file}: the gateway with pid ${first.pid} is still running`);
    expect(existsSync(join(root, 'other-data'))).toBe(false);
    expect(readPid(file)).toBe(first.pid);

    killFromFile(file);
    expect(await first.exited).toMatchObject({ code: 0 });
    expect(existsSync(file)).toBe(false);
    expect(existsSync(join(dir, 'iam-gateway.lock'))).toBe(false);

    // A stale file naming a live process that is not a gateway (the pid reused): overwritten, and the same data
    // directory opens again.
    const stranger = spawn('sleep', ['300'], { stdio: 'ignore' });
    try {
      writeFileSync(file, `${stranger.pid}\n`);
      const third = await startGatewayProcess('http://127.0.0.1:9', embeddedOn(dir), ['--pid-file', file]);
      running.push(third);
      await until('the pid file to name the new gateway', () => readPid(file) === third.pid);
      killFromFile(file);
      expect(await third.exited).toMatchObject({ code: 0 });
      expect(existsSync(file)).toBe(false);
    } finally {
      stranger.kill('SIGKILL');
    }

    // A stale file naming a process that is gone.
    const gone = spawnSync('true').pid;
    writeFileSync(file, `${gone}\n`);
    const fourth = await startGatewayProcess('http://127.0.0.1:9', embeddedOn(dir), ['--pid-file', file]);
    running.push(fourth);
    await until('the pid file to name the new gateway', () => readPid(file) === fourth.pid);
    killFromFile(file);
    expect(await fourth.exited).toMatchObject({ code: 0 });
  }, 180_000);

  it('--pid-file without a file name is a usage error', async () => {
    const outcome = await serveUntilExit({}, 20_000, ['--pid-file']);
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toContain('--pid-file');
    expect(outcome.stderr).toContain('usage: iam-gateway serve');
  });
});
