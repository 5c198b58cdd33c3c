/**
 * A PostgreSQL that cannot be reached at DATABASE_URL: every command that opens the database (serve, migrate,
 * provision, audit purge) fails with exit 1 and a message naming the database's host, port and name and the reason
 * (`cannot connect to the database at 127.0.0.1:1/x (ECONNREFUSED)`), never the URL's userinfo. Real processes
 * (`node bin/iam-gateway.js …` over the compiled dist), as an operator runs them.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../support/gateway';
import { ensureBuilt } from '../support/gateway-process';

const BIN = join(ROOT, 'bin', 'iam-gateway.js');
// Port 1 (tcpmux) has no listener: the connection is refused at once.
const DATABASE_URL = 'postgresql://operator:s3cret@127.0.0.1:1/x?sslmode=disable&application_name=iam';

function runCommand(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        cwd: ROOT,
        timeout: 60_000,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL, REDIS_URL: '', PORT: '0', MANAGEMENT_PORT: '0', LOG_LEVEL: 'info' },
      },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });
}

beforeAll(() => {
  ensureBuilt();
}, 180_000);

describe('a database that cannot be reached is named by host and port, never with its password', () => {
  it.each([
    [['migrate', 'status']],
    [['audit', 'purge', '--older-than', '1d']],
    [['provision', 'config/provision.example.yaml']],
    [['serve']],
  ])('%j', async (args) => {
    const { code, stdout, stderr } = await runCommand(args);
    expect(code).toBe(1);
    expect(stderr).toContain('iam-gateway: cannot connect to the database at 127.0.0.1:1/x (ECONNREFUSED)');
    expect(stdout + stderr).not.toContain('s3cret');
    expect(stdout + stderr).not.toContain('operator');
  }, 60_000);
});
