/**
 * #11.20 (failed start): any failure while starting closes every listener and ends the process with a
 * non-zero code; nothing keeps holding the proxy port. Real processes (`node bin/iam-gateway.js serve`).
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { testDatabaseKind, testDatabaseUrl, testRedisUrl, uniquePrefix } from '../support/env';
import { freePort } from '../support/front-proxy';
import { ROOT } from '../support/gateway';
import { ensureBuilt } from '../support/gateway-process';

interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  elapsedMs: number;
  stderr: string;
}

/** Runs `iam-gateway serve` and resolves when it exits; kills it (and fails) if it is still running after `boundMs`. */
function serveUntilExit(env: Record<string, string>, boundMs: number): Promise<Outcome> {
  const started = Date.now();
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'iam-gateway.js'), 'serve'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      SERVER_HOST: '127.0.0.1',
      UPSTREAM_URL: 'http://127.0.0.1:9',
      DATABASE_URL: testDatabaseUrl(),
      DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '2',
      REDIS_URL: testRedisUrl() ?? '',
      IAM_TOKEN_STORE_PREFIX: uniquePrefix('failed-start'),
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the process was still running ${boundMs} ms after a failed start\n${stderr}`));
    }, boundMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, elapsedMs: Date.now() - started, stderr });
    });
  });
}

function listenOn(port: number): Promise<Server> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

const close = (server: Server): Promise<void> => new Promise((resolve) => server.close(() => resolve()));

beforeAll(() => {
  ensureBuilt();
}, 180_000);

describe('#11.20 a failed start', () => {
  it('#11.20: management port taken → the process exits non-zero and the proxy port is free again', async () => {
    const proxyPort = await freePort();
    const taken = await listenOn(await freePort());
    try {
      const port = (taken.address() as { port: number }).port;
      const outcome = await serveUntilExit({ PORT: String(proxyPort), MANAGEMENT_PORT: String(port) }, 30_000);
      expect(outcome.code).toBe(1);
      expect(outcome.stderr).toMatch(/EADDRINUSE/);
      await close(await listenOn(proxyPort));
    } finally {
      await close(taken);
    }
  }, 60_000);
});
