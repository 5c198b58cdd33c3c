/**
 * Security logging includes refusals (docs/observability.md, docs/threat-model.md Round 3): a request the front door
 * refuses before any route is looked at — an encoded `/`, a control character, a method override, a token in the
 * query, two `Authorization` headers, an `Expect` it does not meet, a CONNECT, an upgrade to `/iam` — gets an
 * access-log line (with `iam.access-log: all` and with the default `denied`) and a server span named `METHOD refused`
 * carrying the problem's code; neither holds the token the request carried. A WebSocket handshake denied after routing
 * gets its line too. Raw sockets, so no client library
 * normalizes or refuses anything first. Tracing is process-wide: this file switches it on for itself.
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import type { DestinationStream } from 'pino';
import type { RunningGateway } from '../../src/app/start-gateway';
import { startTestGateway } from '../support/gateway';
import { E2E_POLICIES } from '../support/gateway-fixture';
import { createTestDatabase } from '../support/database';
import { OtlpReceiver, traceToReceiver } from '../support/otlp-receiver';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { until } from '../support/wait';

/** A pino destination keeping every line written. */
function capture(): { destination: DestinationStream; raw: () => string; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  return {
    destination: { write: (chunk: string) => void (text += chunk) },
    raw: () => text,
    lines: () =>
      text
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

const receiver = new OtlpReceiver();
let tracing: Awaited<ReturnType<typeof traceToReceiver>>;
let upstream: RecordingUpstream;
const gateways: Record<'all' | 'denied', { gateway: RunningGateway; log: ReturnType<typeof capture> }> = {} as never;

beforeAll(async () => {
  tracing = await traceToReceiver(receiver, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
  await (await createTestDatabase()).close();
  upstream = await startRecordingUpstream();
  for (const mode of ['all', 'denied'] as const) {
    const log = capture();
    const gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_ACCESS_LOG: mode }, { accessLogDestination: log.destination });
    gateways[mode] = { gateway, log };
  }
}, 60_000);
afterAll(async () => {
  await Promise.all(Object.values(gateways).map(({ gateway }) => gateway.close()));
  await upstream?.close();
  await tracing?.restore();
});

const TOKEN = `iamt_${randomBytes(32).toString('base64url')}`;

/** Sends a request head as it is; resolves the status and the `X-Request-Id` of the answer. */
function raw(port: number, head: string): Promise<{ status: number; requestId: string | null }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(Buffer.from(head, 'latin1')));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
      const status = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (status && data.includes('\r\n\r\n')) {
        socket.destroy();
        resolve({ status: Number(status[1]), requestId: /\r\nx-request-id: ([^\r\n]+)/i.exec(data)?.[1] ?? null });
      }
    });
    socket.on('error', reject);
    socket.setTimeout(5000, () => reject(new Error(`no answer to ${JSON.stringify(head.slice(0, 60))}`)));
  });
}

/** Each refusal: the request line's method and target, extra header lines, and what is answered. */
const REFUSALS: Array<{ what: string; method: string; target: string; headers?: string; status: number; code: string; path: string }> = [
  { what: 'an encoded slash', method: 'GET', target: '/api/projects%2f1', status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects%2f1' },
  { what: 'an encoded control character', method: 'GET', target: '/api/projects%0a', status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects%0a' },
  { what: 'a NUL', method: 'GET', target: '/api/projects%00', status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects%00' },
  { what: 'a method-override header', method: 'POST', target: '/api/projects', headers: 'X-HTTP-Method-Override: DELETE\r\nContent-Length: 0\r\n', status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects' },
  { what: 'a method-override parameter', method: 'POST', target: '/api/projects?_method=DELETE', headers: 'Content-Length: 0\r\n', status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects' },
  { what: 'a token in the query', method: 'GET', target: `/api/projects?access_token=${TOKEN}`, status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects' },
  { what: 'a token in the path', method: 'GET', target: `/files/${TOKEN}`, status: 400, code: 'IAM_BAD_REQUEST', path: '/files/iamt_[redacted]' },
  { what: 'two Authorization headers', method: 'GET', target: '/api/projects', headers: `Authorization: Bearer ${TOKEN}\r\nAuthorization: Bearer ${TOKEN}\r\n`, status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects' },
  { what: 'a refused /iam target', method: 'POST', target: '/iam/auth%2flogin', headers: 'Content-Length: 0\r\n', status: 400, code: 'IAM_BAD_REQUEST', path: '/iam/auth%2flogin' },
  { what: 'an unmet Expect', method: 'GET', target: '/api/projects', headers: 'Expect: 200-ok\r\n', status: 400, code: 'IAM_BAD_REQUEST', path: '/api/projects' },
  { what: 'CONNECT', method: 'CONNECT', target: 'upstream.test:443', status: 405, code: 'IAM_METHOD_NOT_ALLOWED', path: 'upstream.test:443' },
  { what: 'an upgrade to /iam', method: 'GET', target: '/iam/auth/me', headers: 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n', status: 404, code: 'IAM_NOT_FOUND', path: '/iam/auth/me' },
];

describe.each(['all', 'denied'] as const)('iam.access-log: %s', (mode) => {
  it.each(REFUSALS)('$what: $status $code, an access-log line and a span', async ({ method, target, headers, status, code, path }) => {
    const { gateway, log } = gateways[mode];
    // The client's trace context names this request's span (an untrusted client: its trace id is not recorded).
    const traceId = randomBytes(16).toString('hex');
    const answer = await raw(gateway.port, `${method} ${target} HTTP/1.1\r\nHost: gw.test\r\ntraceparent: 00-${traceId}-${randomBytes(8).toString('hex')}-01\r\n${headers ?? ''}Connection: close\r\n\r\n`);
    expect(answer.status).toBe(status);
    expect(answer.requestId).not.toBeNull();
    const line = await until('the access-log line', () => log.lines().find((entry) => entry.requestId === answer.requestId));
    expect(line).toMatchObject({ msg: 'access', method, path, route: null, status, decision: 'none', clientAddress: '127.0.0.1', traceId: null, userId: null, decisionId: null });
    const spans = await receiver.waitFor((all) => all.some((span) => span.traceId === traceId && span.kind === 2), 'the refusal span');
    const span = spans.find((candidate) => candidate.traceId === traceId && candidate.kind === 2)!;
    expect(span).toMatchObject({ name: `${method} refused`, attributes: { 'http.request.method': method, 'http.response.status_code': status, 'iam.problem': code, 'client.address': '127.0.0.1' } });
    // Whatever the request carried, the token reaches neither the log nor the span.
    expect(log.raw()).not.toContain(TOKEN);
    expect(JSON.stringify(spans)).not.toContain(TOKEN);
    expect(await upstream.requests()).toHaveLength(0);
  });
});

describe('a WebSocket handshake the gateway refuses after routing', () => {
  it.each(['all', 'denied'] as const)('iam.access-log: %s — a denied upgrade has its access-log line', async (mode) => {
    const { gateway, log } = gateways[mode];
    const answer = await raw(
      gateway.port,
      'GET /api/projects HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    expect(answer.status).toBe(401);
    const line = await until('the access-log line', () => log.lines().find((entry) => entry.requestId === answer.requestId));
    expect(line).toMatchObject({ msg: 'access', method: 'GET', path: '/api/projects', route: '/api/projects', status: 401, decision: 'deny', clientAddress: '127.0.0.1' });
    expect(await upstream.requests()).toHaveLength(0);
  });
});
