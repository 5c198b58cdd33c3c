/**
 * A real PgBouncer (Debian's `pgbouncer`, installed by .ci/run) in transaction pooling mode in front of the test
 * run's PostgreSQL, on a free loopback port: the deployment of docs/deployment and the README's scale-out section.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './front-proxy';

export interface RunningPgBouncer {
  /** `postgresql://…` for `database` through PgBouncer. */
  urlFor(database: string): string;
  close(): Promise<void>;
}

/** Starts PgBouncer for the PostgreSQL server of `postgresUrl` (trust authentication, as the test server uses). */
export async function startPgBouncer(postgresUrl: string): Promise<RunningPgBouncer> {
  const target = new URL(postgresUrl);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'iam-pgbouncer-'));
  const user = decodeURIComponent(target.username || 'postgres');
  writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${target.hostname} port=${target.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      // What the gateway must work with: a server connection per transaction, nothing kept between them.
      'pool_mode = transaction',
      'max_client_conn = 500',
      'default_pool_size = 10',
      'ignore_startup_parameters = extra_float_digits,options',
      'unix_socket_dir =',
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root: as root (CI), it switches to the postgres user, who must read the files.
  chmodSync(dir, 0o755);
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const child: ChildProcess = spawn('pgbouncer', [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 10_000;
  while (!output.includes(`listening on 127.0.0.1:${port}`)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer did not start:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    urlFor: (database) => `postgresql://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`,
    close: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
