/**
 * A private `redis-server` for tests that must do what nobody may do to the shared one (FLUSHALL, ACL
 * changes, restarts): started on a free port with no persistence, stopped by `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import Redis from 'ioredis';

export const REDIS_SERVER = '/usr/bin/redis-server';

export interface PrivateRedis {
  port: number;
  /** `redis://127.0.0.1:{port}` (or with `user:password@` when given). */
  url(credentials?: { user: string; password: string }): string;
  /** An admin client (the default user). */
  admin: Redis;
  stop(): Promise<void>;
}

/** True when the binary is there, and always in CI (where a missing binary must fail, not skip). */
export const privateRedisAvailable = (): boolean => existsSync(REDIS_SERVER) || process.env.CI !== undefined;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (address && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Starts redis-server with `args` appended (e.g. `['--maxmemory-policy', 'allkeys-lru']`). */
export async function startPrivateRedis(args: string[] = []): Promise<PrivateRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  admin.on('error', () => undefined);
  const started = Date.now();
  for (;;) {
    try {
      await admin.connect();
      await admin.ping();
      break;
    } catch (error) {
      admin.disconnect();
      if (Date.now() - started > 5000) {
        child.kill('SIGKILL');
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    port,
    admin,
    url: (credentials) => `redis://${credentials ? `${credentials.user}:${credentials.password}@` : ''}127.0.0.1:${port}`,
    async stop() {
      admin.disconnect();
      child.kill('SIGTERM');
      await exited;
    },
  };
}
