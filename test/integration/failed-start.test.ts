/**
 * #11.20 (failed start): any failure while starting closes every listener and ends the process with a
 * non-zero code; nothing keeps holding the proxy port. Real processes (`node bin/iam-gateway.js serve`).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

describe('every file the configuration names is checked before anything opens', () => {
  it('a bad assertion key, a missing users file and a bad provisioning file are all reported at once, before the database is tried', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-preflight-'));
    writeFileSync(join(dir, 'key.pem'), 'not a key\n');
    writeFileSync(join(dir, 'provision.yaml'), 'templates:\n  - { versionId: t, name: t, permissions: ["not a code"] }\n');
    const started = Date.now();
    const outcome = await serveUntilExit(
      {
        PORT: String(await freePort()),
        MANAGEMENT_PORT: String(await freePort()),
        // Nothing answers here: were it tried first, the start would wait for the connect timeout.
        DATABASE_URL: 'postgresql://postgres@127.0.0.1:9/nothing',
        DATABASE_CONNECT_TIMEOUT: '20s',
        IAM_FORWARD_ASSERTION_ENABLED: 'true',
        IAM_FORWARD_ASSERTION_KEY_FILE: join(dir, 'key.pem'),
        IAM_AUTHENTICATOR_TYPE: 'users-file',
        IAM_AUTHENTICATOR_PATH: join(dir, 'no-such-users.yaml'),
        IAM_PROVISION_FILE: join(dir, 'provision.yaml'),
        LOG_LEVEL: 'info',
      },
      30_000,
    );
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toMatch(/iam\.forward\.assertion\.key-file: cannot use .*key\.pem.*IAM_FORWARD_ASSERTION_KEY_FILE/);
    expect(outcome.stderr).toMatch(/iam\.authenticator\.path: cannot load the users-file authenticator: .*no-such-users\.yaml.*IAM_AUTHENTICATOR_PATH/);
    expect(outcome.stderr).toMatch(/iam\.provision\.file: .*provision\.yaml:2: \/templates\/0\/permissions\/0 "not a code"/);
    expect(outcome.stderr).not.toMatch(/ECONNREFUSED|database/i);
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 60_000);
});
