/**
 * Reliability: the host behind the gateway is down, slow, or stalls mid-answer. Real faults: a port
 * nothing listens on, a TCP relay cut in front of the real upstream process, an upstream that never answers
 * (`/hang`), answers late (`/slow/<ms>`) or stops in the middle of its body. The client always gets an answer
 * (502/504 problem+json) or a cut connection, never a hang; a request that timed out is never retried.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { recordedHeader, startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { startTcpRelay, type TcpRelay } from '../support/tcp-relay';
import { timed } from '../support/timed-fetch';
import { expectProblem } from '../support/problems';

/** Routes for the recording upstream's fault paths; bob (editor) has project:create. */
const POLICY = `
version: 1
default: deny
routes:
  - { path: /health, methods: [GET], public: true }
  - { path: /hang, methods: [GET, POST], permission: project:create }
  - { path: /slow/:ms, methods: [GET, POST], permission: project:create }
  - { path: /stall, methods: [GET], public: true }
`;



async function closedPort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * "Answered, not hung": a generous upper bound for an answer the gateway must give instead of waiting on a host that
 * is gone or silent; far above a loaded machine's latency and at least 5x every upstream timeout configured below.
 */
const ANSWERED_NOT_HUNG_MS = 10_000;
/**
 * The connect timeout of the host-down gateways: far above ANSWERED_NOT_HUNG_MS, so a 502 within that bound proves the
 * refusal was seen at once and not waited out.
 */
const HOST_DOWN_CONNECT_TIMEOUT = '60s';

let policies: string;
let upstream: RecordingUpstream;
const gateways: RunningGateway[] = [];

async function gatewayFor(upstreamUrl: string, overrides: Record<string, string> = {}): Promise<RunningGateway> {
  const gateway = await startTestGateway(upstreamUrl, { IAM_POLICIES_DIR: policies, ...overrides });
  gateways.push(gateway);
  return gateway;
}

beforeAll(async () => {
  policies = mkdtempSync(join(tmpdir(), 'iam-reliability-upstream-'));
  writeFileSync(join(policies, 'routes.yaml'), POLICY);
  const db = await createTestDatabase();
  await db.close();
  upstream = await startRecordingUpstream();
});

afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await upstream?.close();
});

describe('host down', () => {
  it('answers 502 IAM_UPSTREAM_UNAVAILABLE at once when nothing listens on the host port', async () => {
    const gateway = await gatewayFor(`http://127.0.0.1:${await closedPort()}`, { UPSTREAM_CONNECT_TIMEOUT: HOST_DOWN_CONNECT_TIMEOUT });
    const bob = await login(gateway.url, 'bob');
    for (const answer of [
      await timed(`${gateway.url}/health`),
      await timed(`${gateway.url}/slow/10`, { method: 'POST', headers: { ...bearer(bob.accessToken), 'content-type': 'application/json' }, body: '{"a":1}' }),
    ]) {
      expectProblem(answer, 502, 'IAM_UPSTREAM_UNAVAILABLE', { requestId: expect.any(String) });
      expect(answer.elapsedMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);
    }
  });

  it('goes 502 when the host drops mid-run (keep-alive connections reset) and recovers by itself when it returns', async () => {
    const relay: TcpRelay = await startTcpRelay('127.0.0.1', upstream.port);
    try {
      const gateway = await gatewayFor(`http://127.0.0.1:${relay.port}`, { UPSTREAM_CONNECT_TIMEOUT: HOST_DOWN_CONNECT_TIMEOUT });
      // Several requests, so the gateway holds pooled keep-alive connections to the host.
      for (let i = 0; i < 3; i++) expect((await timed(`${gateway.url}/health`)).status).toBe(200);
      await relay.cut();
      for (let i = 0; i < 3; i++) {
        const answer = await timed(`${gateway.url}/health`);
        expectProblem(answer, 502, 'IAM_UPSTREAM_UNAVAILABLE', { requestId: expect.any(String) });
        expect(answer.elapsedMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);
      }
      await relay.restore();
      const answer = await timed(`${gateway.url}/health`);
      expect(answer.status).toBe(200);
    } finally {
      await relay.close();
    }
  });
});

describe('host slow or stalled', () => {
  let gateway: RunningGateway;
  let bob: Awaited<ReturnType<typeof login>>;

  beforeAll(async () => {
    gateway = await gatewayFor(upstream.url, { UPSTREAM_RESPONSE_TIMEOUT: '300ms' });
    bob = await login(gateway.url, 'bob');
  });

  beforeEach(() => upstream.clear());

  it.each(['/hang', '/slow/2000'])('answers 504 IAM_UPSTREAM_TIMEOUT for GET %s after the response timeout, not the late answer of the host', async (path) => {
    const answer = await timed(`${gateway.url}${path}`, { headers: bearer(bob.accessToken) });
    expectProblem(answer, 504, 'IAM_UPSTREAM_TIMEOUT', { requestId: expect.any(String) });
    // The 504 proves the timeout path (the /slow/2000 host would have answered 200); a lower bound: it waited 300 ms.
    expect(answer.elapsedMs).toBeGreaterThanOrEqual(250);
    expect(answer.elapsedMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);
  });

  it('still forwards an answer that comes within the timeout', async () => {
    expect((await timed(`${gateway.url}/slow/50`, { headers: bearer(bob.accessToken) })).status).toBe(200);
  });

  it.each(['/slow/1500', '/hang'])('a POST to %s that times out reached the host exactly once, whole, and is never retried', async (path) => {
    const body = JSON.stringify({ order: 'once', padding: 'x'.repeat(10_000) });
    const answer = await timed(`${gateway.url}${path}`, {
      method: 'POST',
      headers: { ...bearer(bob.accessToken), 'content-type': 'application/json' },
      body,
    });
    expectProblem(answer, 504, 'IAM_UPSTREAM_TIMEOUT', { requestId: expect.any(String) });
    // Past the moment /slow/1500 would have answered: a retry would have arrived by now.
    await new Promise((resolve) => setTimeout(resolve, 1800));
    const received = (await upstream.requests()).filter((r) => r.method === 'POST');
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ url: path, bodyLength: Buffer.byteLength(body), bodyText: body.slice(0, 4096) });
    expect(recordedHeader(received[0]!, 'x-iam-user-id')).toEqual(['u-bob']);
  });
});

describe('host stalls in the middle of its answer', () => {
  let stalling: Server;

  beforeAll(async () => {
    // Sends its head and part of the body, then nothing (no end, no close).
    stalling = createHttpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
      res.write('first part;');
    });
    await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    stalling.closeAllConnections();
    await new Promise<void>((resolve) => stalling.close(() => resolve()));
  });

  it('cuts the client connection after the body timeout instead of leaving it hanging', async () => {
    const port = (stalling.address() as { port: number }).port;
    const gateway = await gatewayFor(`http://127.0.0.1:${port}`, { UPSTREAM_BODY_TIMEOUT: '300ms' });
    const outcome = await new Promise<{ status: number; received: string; error: string | null }>((resolve) => {
      const req = httpRequest(`${gateway.url}/stall`, { agent: false }, (res) => {
        let received = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (received += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, received, error: null }));
        res.on('error', (error) => resolve({ status: res.statusCode ?? 0, received, error: error.message }));
        res.on('aborted', () => resolve({ status: res.statusCode ?? 0, received, error: 'aborted' }));
      });
      req.on('error', (error) => resolve({ status: 0, received: '', error: error.message }));
      req.setTimeout(ANSWERED_NOT_HUNG_MS, () => req.destroy(new Error('client gave up: the gateway left the response hanging')));
      req.end();
    });
    expect(outcome.status).toBe(200);
    expect(outcome.received).toBe('first part;');
    // The response is incomplete (1000 bytes announced): the connection is cut, so the client knows.
    expect(outcome.error).not.toBeNull();
    // Cut by the gateway, not given up on by the client after ANSWERED_NOT_HUNG_MS (33x the body timeout).
    expect(outcome.error).not.toMatch(/client gave up/);
  });
});
