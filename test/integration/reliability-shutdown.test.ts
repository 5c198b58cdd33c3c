/**
 * Reliability: graceful shutdown of a real gateway process on SIGTERM (the way orchestrators stop
 * it): readiness fails first, new connections are refused, a request sent on an open keep-alive connection
 * after the signal is answered (never a hang-up) and idle ones close at their keep-alive timeout, an
 * in-flight slow upload still completes whole, and the process exits 0 within `server.shutdown-timeout`;
 * a request still running at that deadline is cut and the process exits anyway.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SHUTDOWN_CLEANUP_GRACE_MS } from '../../src/http/server-lifecycle';
import { createTestDatabase } from '../support/database';
import { testDatabaseUrl, testRedisUrl } from '../support/env';
import { ensureBuilt, startGatewayProcess, type GatewayProcess } from '../support/gateway-process';
import { login } from '../support/gateway';
import { startRecordingUpstream, type RecordedRequest, type RecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf, type TcpRelay } from '../support/tcp-relay';
import { RawConnection } from '../support/raw-connection';
import { until } from '../support/wait';

const POLICY = `
version: 1
default: deny
routes:
  - { path: /health, methods: [GET], public: true }
  - { path: /hang, methods: [GET], public: true }
  - { path: /upload, methods: [POST], permission: project:create }
  - { path: /admin-area, methods: [GET], permission: admin:write }
`;

/**
 * "Answered, not hung": a generous upper bound for something the stop must do by itself (fail readiness, refuse
 * connections, cut a request at a 1 s deadline). Far above a loaded machine's latency and 10x the short deadlines
 * configured below; it only turns a stop that never does it into a failure.
 */
const NOT_HUNG_MS = 10_000;

/** "Exited, not hung": a stop may wait out the whole cleanup's bound (10 s) on top of its drain; 3x that still excludes forever. */
const EXITED_NOT_HUNG_MS = 3 * SHUTDOWN_CLEANUP_GRACE_MS;

/**
 * The first test's drain: its shutdown deadline sits twice as far as this bound, so a process that exits within the
 * bound drained by itself (upload done, idle connection closed at its keep-alive timeout) and was not cut at the
 * deadline. The drain itself needs ~3 s (a 1.1 s upload, a 2 s keep-alive timeout): 5x that.
 */
const DRAINED_WITHIN_MS = 15_000;
const DRAIN_DEADLINE_MS = 2 * DRAINED_WITHIN_MS;

let policies: string;
let upstream: RecordingUpstream;
const processes: GatewayProcess[] = [];

beforeAll(async () => {
  const built = ensureBuilt();
  if (built === 'built') console.log('reliability: dist was older than src, ran npm run build');
  policies = mkdtempSync(join(tmpdir(), 'iam-reliability-shutdown-'));
  writeFileSync(join(policies, 'routes.yaml'), POLICY);
  const db = await createTestDatabase();
  await db.close();
  upstream = await startRecordingUpstream();
}, 180_000);

afterAll(async () => {
  for (const gateway of processes) await gateway.kill();
  await upstream?.close();
});

async function start(env: Record<string, string>): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess(upstream.url, { IAM_POLICIES_DIR: policies, ...env });
  processes.push(gateway);
  const ready = await fetch(`${gateway.managementUrl}/health/ready`);
  expect(ready.status).toBe(200);
  return gateway;
}

/** A keep-alive connection that made one request and now sits idle; `closed` resolves when the server closes it. */
async function idleKeepAliveConnection(port: number): Promise<{ socket: Socket; closed: Promise<number> }> {
  const socket = connect(port, '127.0.0.1');
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  socket.on('error', () => undefined);
  let received = '';
  await new Promise<void>((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const head = received.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(received);
      if (head >= 0 && length && received.length >= head + 4 + Number(length[1])) resolve();
    });
    socket.once('close', () => reject(new Error(`keep-alive connection closed before its answer: ${received}`)));
    socket.write('GET /health HTTP/1.1\r\nHost: gateway\r\nConnection: keep-alive\r\n\r\n');
  });
  expect(received).toMatch(/^HTTP\/1\.1 200 /);
  return { socket, closed };
}

/** Tries to open a new TCP connection: 'refused' or 'accepted'. */
function tryConnect(port: number): Promise<'refused' | 'accepted'> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('accepted');
    });
    socket.once('error', () => resolve('refused'));
  });
}

/** Readiness right after SIGTERM: the status code, or 'refused' when the management port is gone. */
async function readiness(gateway: GatewayProcess): Promise<number | 'refused'> {
  try {
    return (await fetch(`${gateway.managementUrl}/health/ready`, { signal: AbortSignal.timeout(3000) })).status;
  } catch {
    return 'refused';
  }
}

/** `promise`, or `fallback` after `ms` (the timer is cleared either way, so jest can exit). */
async function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitForRecorded(predicate: (r: RecordedRequest) => boolean): Promise<RecordedRequest> {
  return until('the upstream to receive the request', async () => (await upstream.requests()).find(predicate), { every: 20 });
}

/**
 * The lines that report answered data lost at a stop (the audit trail's events, an ended session's record) say LOST in
 * capitals; "Redis connection lost" from a frozen relay is a connection, not data.
 */
const DATA_LOST = /\bLOST\b/;

describe('SIGTERM to a gateway process', () => {
  it('fails readiness, refuses new connections, lets a slow upload finish whole, closes idle connections at their keep-alive timeout, then exits 0', async () => {
    const gateway = await start({ SERVER_SHUTDOWN_TIMEOUT: `${DRAIN_DEADLINE_MS}ms`, SERVER_KEEP_ALIVE_TIMEOUT: '2s' });
    const bob = await login(gateway.url, 'bob');
    await upstream.clear();
    const idle = await idleKeepAliveConnection(gateway.port);

    // A 12 kB upload streamed over ~1.1 s; its last chunk waits until the test saw the drain begin.
    const chunks = Array.from({ length: 12 }, (_, i) => Buffer.alloc(1000, 65 + i));
    const whole = Buffer.concat(chunks);
    let upload: ClientRequest;
    const uploadAnswer = new Promise<{ status: number; body: string; at: number }>((resolve, reject) => {
      upload = httpRequest(
        `${gateway.url}/upload`,
        {
          method: 'POST',
          agent: false,
          headers: { authorization: `Bearer ${bob.accessToken}`, 'content-type': 'application/octet-stream', 'content-length': whole.length },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, at: Date.now() }));
          res.on('error', reject);
        },
      );
      upload.on('error', reject);
    });
    upload!.write(chunks[0]);
    // The upload is authorized and on its way to the host before the signal.
    await waitForRecorded((r) => r.method === 'POST' && r.url === '/upload');

    const signalledAt = Date.now();
    gateway.child.kill('SIGTERM');
    let drainSeen: () => void = () => undefined;
    const drainObserved = new Promise<void>((resolve) => (drainSeen = resolve));
    const sending = (async () => {
      // The 100 ms between chunks are the scenario (a slow client), not a wait for something.
      for (const chunk of chunks.slice(1, -1)) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        upload!.write(chunk);
      }
      // The upload cannot finish before the checks below ran, however slowly this machine runs them.
      await drainObserved;
      upload!.write(chunks[chunks.length - 1]);
      upload!.end();
    })();

    try {
      // Readiness fails first, while the upload is still in flight.
      const ready = await until('readiness to fail after SIGTERM', async () => {
        const status = await readiness(gateway);
        return status === 200 ? null : status;
      }, { within: NOT_HUNG_MS, every: 10 });
      expect([503, 'refused']).toContain(ready);
      // New connections are refused; the upload is not done yet.
      await until('new connections to be refused', async () => (await tryConnect(gateway.port)) === 'refused', { within: NOT_HUNG_MS });
      const stillUploading = await within(uploadAnswer.then(() => false), 0, true);
      expect(stillUploading).toBe(true);
    } finally {
      drainSeen();
    }

    await sending;
    const answer = await uploadAnswer;
    expect(answer.status).toBe(200);
    expect(answer.at - signalledAt).toBeGreaterThanOrEqual(1000);
    const received = (await upstream.requests()).filter((r) => r.method === 'POST' && r.url === '/upload');
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ bodyComplete: true, bodyLength: whole.length, bodySha256: createHash('sha256').update(whole).digest('hex') });

    const exit = await gateway.exited;
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    // The idle keep-alive connection was left open for a request its client might still send, and closed
    // before the exit, when its keep-alive timeout ran out.
    const idleClosedAt = await within(idle.closed, NOT_HUNG_MS, -1);
    expect(idleClosedAt).toBeGreaterThan(0);
    expect(idleClosedAt).toBeLessThanOrEqual(exit.at);
    expect(exit.at - signalledAt).toBeLessThan(DRAINED_WITHIN_MS);
    expect(gateway.logs().some((entry) => entry.msg === 'iam-gateway stopped')).toBe(true);
  }, DRAIN_DEADLINE_MS + 40_000);

  it('R3 endings: requests sent on open keep-alive connections after SIGTERM each get a whole answer (Connection: close), none a hang-up; unused ones close cleanly at their keep-alive timeout', async () => {
    const gateway = await start({ SERVER_SHUTDOWN_TIMEOUT: '8s', SERVER_KEEP_ALIVE_TIMEOUT: '2s' });
    // Each connection has answered one request and sits idle, as a client's (or a load balancer's) pool keeps it.
    const connections = await Promise.all(Array.from({ length: 40 }, () => RawConnection.open(gateway.port)));
    const unused = await Promise.all([1, 2].map(() => RawConnection.open(gateway.port)));
    gateway.child.kill('SIGTERM');
    // Then each sends again, spread over the first ~100 ms of the stop (the signal's delivery and the drain's
    // first steps fall in there), some a GET, some a POST (never to be retried blindly), on and on until an
    // answer says Connection: close.
    const outcomes = await Promise.all(
      connections.map(async (connection, i) => {
        await new Promise((resolve) => setTimeout(resolve, i < 30 ? i : 30 + (i - 30) * 7));
        const answers: string[] = [];
        for (let n = 0; n < 50; n++) {
          connection.send(`/health?c=${i}&n=${n}`, i % 3 === 0 ? 'POST' : 'GET');
          const answer = await connection.response();
          if (answer === null) return { i, answers, ending: connection.ending, hungUp: true };
          answers.push(answer.head.split('\r\n')[0]!);
          if (/^connection: close$/im.test(answer.head)) break;
        }
        await connection.closed;
        return { i, answers, ending: connection.ending, hungUp: false };
      }),
    );
    expect(outcomes.filter((outcome) => outcome.hungUp)).toEqual([]);
    for (const outcome of outcomes) {
      expect(outcome.answers.length).toBeGreaterThan(0);
      expect(outcome.ending).toBe('closed');
    }
    // Nobody used these: closed by the server (a FIN, not a reset) once their keep-alive timeout ran out.
    for (const connection of unused) {
      await connection.closed;
      expect(connection.ending).toBe('closed');
    }
    const exit = await gateway.exited;
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
  }, 40_000);

  it('cuts a request still running at the shutdown deadline and exits anyway', async () => {
    const gateway = await start({ SERVER_SHUTDOWN_TIMEOUT: '1s', UPSTREAM_RESPONSE_TIMEOUT: '60s' });
    await upstream.clear();
    const started = Date.now();
    const hanging = new Promise<{ outcome: string; at: number }>((resolve) => {
      const req = httpRequest(`${gateway.url}/hang`, { agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve({ outcome: `answered ${res.statusCode}`, at: Date.now() }));
        res.on('error', () => resolve({ outcome: 'cut', at: Date.now() }));
      });
      req.on('error', () => resolve({ outcome: 'cut', at: Date.now() }));
      req.end();
    });
    await waitForRecorded((r) => r.url === '/hang');
    const signalledAt = Date.now();
    gateway.child.kill('SIGTERM');

    // Cut at the deadline, not before (it was in flight); and by the stop, not by the 60 s response timeout, which
    // NOT_HUNG_MS stays far below.
    const result = await within(hanging, NOT_HUNG_MS, { outcome: 'still hanging', at: -1 });
    expect(result.outcome).toBe('cut');
    expect(result.at - signalledAt).toBeGreaterThanOrEqual(900);
    const exit = await within(gateway.exited, EXITED_NOT_HUNG_MS, null);
    expect(exit).not.toBeNull();
    expect({ code: exit!.code, signal: exit!.signal }).toEqual({ code: 0, signal: null });
    expect(started).toBeLessThan(signalledAt);
  }, NOT_HUNG_MS + EXITED_NOT_HUNG_MS + 30_000);

  it('still exits when the database and the token store stopped answering (silent partition) before SIGTERM', async () => {
    const relays: TcpRelay[] = [];
    const env: Record<string, string> = { SERVER_SHUTDOWN_TIMEOUT: '1s' };
    const database = targetOf(testDatabaseUrl());
    relays.push(await startTcpRelay(database.host, database.port));
    env.DATABASE_URL = relayedUrl(testDatabaseUrl(), relays[0]!);
    const redisUrl = testRedisUrl();
    if (redisUrl) {
      const redis = targetOf(redisUrl);
      relays.push(await startTcpRelay(redis.host, redis.port));
      env.REDIS_URL = relayedUrl(redisUrl, relays[1]!);
    }
    try {
      const gateway = await start(env);
      // Leaves work for shutdown: an audit event and a last-seen time to write, pooled connections to close.
      const bob = await login(gateway.url, 'bob');
      expect((await fetch(`${gateway.url}/health`, { headers: { authorization: `Bearer ${bob.accessToken}` } })).status).toBe(200);
      for (const relay of relays) relay.freeze();
      const signalledAt = Date.now();
      gateway.child.kill('SIGTERM');
      // Drain (1 s, nothing in flight) plus the bounded cleanup grace, not forever: the log names the grace path.
      const exit = await within(gateway.exited, EXITED_NOT_HUNG_MS, null);
      expect(exit).not.toBeNull();
      expect(exit!.code).toBe(0);
      expect(exit!.at - signalledAt).toBeLessThan(EXITED_NOT_HUNG_MS);
      // Whatever steps the silent servers held were left behind at their bounds; the audit event was kept all the same.
      expect(gateway.logs().filter((entry) => DATA_LOST.test(String(entry.msg)))).toEqual([]);
    } finally {
      for (const relay of relays) await relay.close();
    }
  }, EXITED_NOT_HUNG_MS + 40_000);

  it('every denial answered while the database is silent is kept at SIGTERM (in the audit spool), none lost, although the stop\'s database-bound steps hang', async () => {
    const spoolDir = mkdtempSync(join(tmpdir(), 'iam-shutdown-spool-'));
    const database = targetOf(testDatabaseUrl());
    const relay = await startTcpRelay(database.host, database.port);
    try {
      // A statement to the silent database waits far past the stop: only the cleanup's own bounds end its steps.
      const gateway = await start({ SERVER_SHUTDOWN_TIMEOUT: '1s', DATABASE_URL: relayedUrl(testDatabaseUrl(), relay), DATABASE_QUERY_TIMEOUT: '120s', IAM_AUDIT_SPOOL_DIR: spoolDir });
      const bob = await login(gateway.url, 'bob');
      const deny = async (): Promise<string> => {
        const res = await fetch(`${gateway.url}/admin-area`, { headers: { authorization: `Bearer ${bob.accessToken}` } });
        expect(res.status).toBe(403);
        expect(((await res.json()) as { code: string }).code).toBe('IAM_ACCESS_DENIED');
        return res.headers.get('x-request-id')!;
      };
      // Bob's grant is compiled (read from the database) while it still answers.
      await deny();
      relay.freeze();
      // Answered while the database is silent: the trail's batches to it hang, and so will the stop's last-seen flush
      // (bob's requests touched his session) and the change feed's read.
      const answered: string[] = [];
      for (let round = 0; round < 60; round++) answered.push(...(await Promise.all(Array.from({ length: 10 }, deny))));
      gateway.child.kill('SIGTERM');
      const exit = await within(gateway.exited, EXITED_NOT_HUNG_MS, null);
      expect(exit).not.toBeNull();
      expect(exit!.code).toBe(0);

      const spooled = new Set<string>();
      for (const file of readdirSync(spoolDir).filter((name) => name.startsWith('audit-'))) {
        for (const line of readFileSync(join(spoolDir, file), 'utf8').split('\n')) {
          if (line === '') continue;
          const event = JSON.parse(line) as { action: string; requestId: string | null };
          if (event.action === 'authz.deny' && event.requestId !== null) spooled.add(event.requestId);
        }
      }
      expect(answered.filter((requestId) => !spooled.has(requestId))).toEqual([]);
      expect(gateway.logs().filter((entry) => DATA_LOST.test(String(entry.msg)))).toEqual([]);
      expect(gateway.logs().find((entry) => entry.msg === 'audit: database unavailable at stop; events spooled, written at the next start')).toBeDefined();
    } finally {
      await relay.close();
    }
  }, EXITED_NOT_HUNG_MS + 60_000);
});
