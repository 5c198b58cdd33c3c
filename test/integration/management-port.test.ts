/**
 * #11.16: the management port has no authentication, so it listens on loopback unless told otherwise
 * (`server.management-host`), has the proxy port's limits and timeouts, and readiness tells an
 * unauthenticated caller only `ok` per component (the reasons go to the log).
 */
import { connect, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { createLogger } from '../../src/observability/logger';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createManagementServer } from '../../src/app/management-server';
import { createTestDatabase } from '../support/database';
import { ROOT, startTestGateway, testConfig } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

/** An address of this machine that is not loopback (or 127.0.0.2, which a 127.0.0.1 listener does not accept). */
function otherLocalAddress(): string {
  for (const entries of Object.values(networkInterfaces())) {
    for (const entry of entries ?? []) if (entry.family === 'IPv4' && !entry.internal) return entry.address;
  }
  return '127.0.0.2';
}

/** Resolves 'connected' or the connect error code. */
function tryConnect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => (socket.destroy(), resolve('connected')));
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
}

/**
 * "Closed, not hung": the longest a test waits for the management port to drop a slow or idle client, 10x its longest
 * timeout (request-timeout, 1 s) and far above a loaded machine's latency. The tests below assert a lower bound (it
 * waited for the timeout), never how soon after the timeout the close came.
 */
const CLOSED_NOT_HUNG_MS = 10_000;

/** Milliseconds until the server closes the socket, or rejects after `boundMs`. */
function closedWithin(socket: Socket, boundMs: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => (socket.destroy(), reject(new Error(`socket still open after ${boundMs} ms`))), boundMs);
    socket.once('close', () => (clearTimeout(timer), resolve(Date.now() - started)));
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
  });
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

let upstream: RecordingUpstream;
let gateway: RunningGateway;

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, {
    IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
    // The proxy on every interface; the management host is left at its default.
    SERVER_HOST: '0.0.0.0',
    SERVER_HEADERS_TIMEOUT: '500ms',
    SERVER_REQUEST_TIMEOUT: '1s',
    SERVER_KEEP_ALIVE_TIMEOUT: '300ms',
    SERVER_MAX_HEADER_SIZE: '4kb',
  });
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

describe('#11.16 management port', () => {
  it('#11.16: defaults to 127.0.0.1 (server.management-host) while the proxy listens on 0.0.0.0', async () => {
    expect(testConfig(upstream.url).server.managementHost).toBe('127.0.0.1');
    const other = otherLocalAddress();
    expect(await tryConnect(other, gateway.port)).toBe('connected');
    expect(await tryConnect(other, gateway.managementPort)).toBe('ECONNREFUSED');
    expect(await tryConnect('127.0.0.1', gateway.managementPort)).toBe('connected');
  });

  it('#11.16: a client that never finishes its headers is cut at server.headers-timeout', async () => {
    const socket = await open(gateway.managementPort);
    socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    expect(await closedWithin(socket, CLOSED_NOT_HUNG_MS)).toBeGreaterThanOrEqual(450);
  });

  it('#11.16: an idle keep-alive connection is closed at server.keep-alive-timeout', async () => {
    const socket = await open(gateway.managementPort);
    const closed = closedWithin(socket, CLOSED_NOT_HUNG_MS);
    socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n');
    // Answered and then silent: nothing but the keep-alive timeout closes an idle connection.
    expect(await closed).toBeGreaterThanOrEqual(250);
  });

  it('#11.16: request headers above server.max-header-size are refused (431)', async () => {
    const answer = await fetch(`${gateway.managementUrl}/health/live`, { headers: { 'x-big': 'a'.repeat(8 * 1024) } });
    expect(answer.status).toBe(431);
  });

  it('#11.16: readiness serves only ok per component, no kinds, file names or policy details', async () => {
    const answer = await fetch(`${gateway.managementUrl}/health/ready`);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ status: 'ready', checks: { database: { ok: true }, tokenStore: { ok: true }, eventsChannel: { ok: true }, policy: { ok: true } } });
  });

  it('#11.16: a failing component shows ok: false; its error text goes to the log once, never to the caller', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }));
    const server = createManagementServer({
      registry: new Registry(),
      isShuttingDown: () => false,
      server: testConfig(upstream.url).server,
      logger,
      checks: [
        { name: 'database', check: () => Promise.reject(new Error('connect ECONNREFUSED /srv/secret/.s.PGSQL.5432')) },
        { name: 'policy', check: () => Promise.resolve({ ok: false, detail: { files: ['/etc/iam/policies/admin.yaml'] } }) },
        { name: 'tokenStore', check: () => Promise.resolve({ ok: true, detail: { kind: 'redis' } }) },
      ],
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health/ready`;
      for (let i = 0; i < 3; i++) {
        const answer = await fetch(url);
        expect(answer.status).toBe(503);
        const text = await answer.text();
        expect(JSON.parse(text)).toEqual({ status: 'not ready', checks: { database: { ok: false }, policy: { ok: false }, tokenStore: { ok: true } } });
        expect(text).not.toMatch(/secret|admin\.yaml|redis|ECONNREFUSED/);
      }
      const log = lines.join('');
      expect(log.match(/ECONNREFUSED \/srv\/secret/g)).toHaveLength(1);
      expect(log.match(/admin\.yaml/g)).toHaveLength(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
