/**
 * A private `redis-server` for tests that must restart, reconfigure or rewrite a Redis (the shared one of the
 * run is never touched): started on a free loopback port without persistence, stopped by `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';

export const REDIS_SERVER = '/usr/bin/redis-server';

export interface PrivateRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** True when the binary is there; outside CI a test without it skips (and says so), in CI it must run. */
export function privateRedisAvailable(): boolean {
  return existsSync(REDIS_SERVER) || process.env.CI !== undefined;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts redis-server with `args` appended (e.g. `['--maxmemory-policy', 'allkeys-lru']`). */
export async function startPrivateRedis(args: string[] = []): Promise<PrivateRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${output}`)), 10_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code}): ${output}`));
    });
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
