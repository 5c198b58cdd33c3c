/**
 * #11.32 (authenticators): the module authenticator is bound by `iam.authenticator.timeout` (502, and its
 * AbortSignal fires); the stored identity's domain wins over the authenticator's (a mismatch is refused); the
 * http authenticator reads at most 64 KiB of answer, then drops the connection (502).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

let db: TestDatabase;
let upstream: RecordingUpstream;
const dir = mkdtempSync(join(tmpdir(), 'iam-authn-'));

beforeAll(async () => {
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
});
afterAll(async () => {
  await upstream?.close();
  await db?.close();
});

async function loginAt(gateway: RunningGateway, username: string): Promise<{ status: number; body: Record<string, any>; ms: number }> {
  const started = Date.now();
  const response = await fetch(`${gateway.url}/iam/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: 'pw', clientType: 'WEB' }),
    // Without the fix the login never answers: fail the test instead of hanging it.
    signal: AbortSignal.timeout(5000),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any>, ms: Date.now() - started };
}

describe('#11.32 module authenticator', () => {
  let gateway: RunningGateway;
  const modulePath = join(dir, 'authenticator.js');

  beforeAll(async () => {
    writeFileSync(
      modulePath,
      `const state = { aborted: 0 };
       module.exports.state = state;
       module.exports.authenticate = async ({ username, signal }) => {
         if (username === 'hang') {
           signal.addEventListener('abort', () => { state.aborted += 1; });
           return new Promise(() => {});
         }
         if (username === 'alice') return { userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com' };
         if (username === 'alice-elsewhere') return { userId: 'u-alice', identityId: 'id-alice', identityDomain: 'evil.example' };
         return null;
       };`,
    );
    gateway = await startTestGateway(upstream.url, { IAM_AUTHENTICATOR_TYPE: 'module', IAM_AUTHENTICATOR_MODULE: modulePath, IAM_AUTHENTICATOR_TIMEOUT: '300ms' });
  });
  afterAll(() => gateway?.close());

  it('#11.32: a module that never answers is 502 IAM_AUTHENTICATOR_UNAVAILABLE after iam.authenticator.timeout, and its signal is aborted', async () => {
    const answer = await loginAt(gateway, 'hang');
    expect(answer.status).toBe(502);
    expect(answer.body.code).toBe('IAM_AUTHENTICATOR_UNAVAILABLE');
    expect(answer.ms).toBeGreaterThanOrEqual(250);
    // A bound, not a speed check: a module that is never cut off would hang until the test's timeout.
    expect(answer.ms).toBeLessThan(15_000);
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the module instance the in-process gateway loaded
    expect((require(modulePath) as { state: { aborted: number } }).state.aborted).toBe(1);
    expect((await loginAt(gateway, 'alice')).status).toBe(200);
  });

  it('#11.32: the stored identity domain wins: an authenticator naming another domain for a known identity is refused', async () => {
    const refused = await loginAt(gateway, 'alice-elsewhere');
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('IAM_INVALID_CREDENTIALS');
    await gateway.services!.audit.flush();
    const rows = await db.orm.em.fork().execute<Array<{ details: { reason: string } }>>(
      "select details from iam_audit_events where action = 'auth.login.failed' order by id desc limit 1",
    );
    expect(rows[0]!.details.reason).toBe('identity-domain-mismatch');
    const accepted = await loginAt(gateway, 'alice');
    expect(accepted.status).toBe(200);
    expect(accepted.body.principal.identityDomain).toBe('example.com');
    expect((await db.repository.getIdentity('id-alice'))!.identityDomain).toBe('example.com');
  });
});

describe('#11.32 http authenticator', () => {
  let gateway: RunningGateway;
  let host: Server;
  const sockets = new Set<Socket>();
  let firstClose: () => void;
  const socketClosed = new Promise<void>((resolve) => (firstClose = resolve));

  beforeAll(async () => {
    const identity = { userId: 'u-bob', identityId: 'id-bob', identityDomain: 'example.com' };
    host = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const { username: name } = JSON.parse(body) as { username: string };
        res.writeHead(200, { 'content-type': 'application/json' });
        if (name === 'endless') {
          // A JSON string that never ends: without a bound the gateway would buffer it until its memory runs out.
          res.write(`{"userId":"u-bob","identityId":"id-bob","identityDomain":"example.com","padding":"`);
          const chunk = 'x'.repeat(16 * 1024);
          const pump = (): void => {
            while (!res.destroyed && res.write(chunk));
            if (!res.destroyed) res.once('drain', pump);
          };
          pump();
          return;
        }
        if (name === 'big') res.end(JSON.stringify({ ...identity, padding: 'x'.repeat(70 * 1024) }));
        else res.end(JSON.stringify({ ...identity, padding: 'x'.repeat(60 * 1024) }));
      });
    });
    host.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => firstClose());
    });
    host.listen(0, '127.0.0.1');
    await once(host, 'listening');
    const url = `http://127.0.0.1:${(host.address() as AddressInfo).port}/login`;
    gateway = await startTestGateway(upstream.url, { IAM_AUTHENTICATOR_TYPE: 'http', IAM_AUTHENTICATOR_URL: url, IAM_AUTHENTICATOR_TIMEOUT: '3s' });
  });
  afterAll(async () => {
    await gateway?.close();
    for (const socket of sockets) socket.destroy();
    host?.close();
  });

  it('#11.32: an answer over 64 KiB, or one that never ends, is 502 IAM_AUTHENTICATOR_UNAVAILABLE at once and its connection is dropped', async () => {
    const endless = await loginAt(gateway, 'endless');
    expect(endless.status).toBe(502);
    expect(endless.body.code).toBe('IAM_AUTHENTICATOR_UNAVAILABLE');
    // A bound, not a speed check: an answer read to its end would never finish.
    expect(endless.ms).toBeLessThan(15_000);
    // The gateway dropped the connection it was reading the endless answer on (else this waits until the test times out).
    await socketClosed;

    const big = await loginAt(gateway, 'big');
    expect(big.status).toBe(502);
    expect(big.body.code).toBe('IAM_AUTHENTICATOR_UNAVAILABLE');
    // Within the limit is still a login.
    expect((await loginAt(gateway, 'fits')).status).toBe(200);
  });
});
