/**
 * #11.20 (failed start): any failure while starting closes every listener and ends the process with a
 * non-zero code; nothing keeps holding the proxy port. Real processes (`node bin/iam-gateway.js serve`).
 */
import { createServer, type Server } from 'node:net';
import { testDatabaseKind, testDatabaseUrl, testRedisUrl, uniquePrefix } from '../support/env';
import { freePort } from '../support/front-proxy';
import { ensureBuilt, serveUntilExit } from '../support/gateway-process';

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
      const outcome = await serveUntilExit(
        {
          PORT: String(proxyPort),
          MANAGEMENT_PORT: String(port),
          DATABASE_URL: testDatabaseUrl(),
          DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '2',
          REDIS_URL: testRedisUrl() ?? '',
          IAM_TOKEN_STORE_PREFIX: uniquePrefix('failed-start'),
          LOG_LEVEL: 'info',
        },
        30_000,
      );
      expect(outcome.code).toBe(1);
      expect(outcome.stderr).toMatch(/EADDRINUSE/);
      await close(await listenOn(proxyPort));
    } finally {
      await close(taken);
    }
  }, 60_000);
});
