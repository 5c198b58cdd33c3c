/**
 * Reliability: the request limits of config/default.yaml `server.*` hold on a real socket, each set
 * through the environment exactly as a user would: header section → 431, request target → 414, `/iam` body
 * → 413, headers that never finish (slowloris) → disconnected after `server.headers-timeout`, a body that
 * never finishes → disconnected after `server.request-timeout`, idle keep-alive → closed.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { expectProblem } from '../support/problems';

const LIMITS = {
  SERVER_MAX_HEADER_SIZE: '4kb',
  SERVER_MAX_URL_LENGTH: '1kb',
  SERVER_IAM_BODY_LIMIT: '1kb',
  SERVER_HEADERS_TIMEOUT: '1s',
  SERVER_REQUEST_TIMEOUT: '2s',
  SERVER_KEEP_ALIVE_TIMEOUT: '500ms',
};

/**
 * "Answered, not hung" for a slow or idle client: the longest a test waits for the gateway to drop the connection, 5x
 * the longest timeout above (request-timeout, 2 s) and far above a loaded machine's latency. Each test below proves
 * which timeout closed the connection by what else could have closed it (nothing) and by a lower bound (it waited at
 * least that timeout), never by how soon after the timeout the close came.
 */
const SLOW_CLIENT_NOT_HUNG_MS = 10_000;

let upstream: RecordingUpstream;
let gateway: RunningGateway;

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), ...LIMITS });
});

afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

interface RawExchange {
  /** Everything the server sent before it closed the connection (or before `waitMs`). */
  text: string;
  status: number | null;
  headers: Record<string, string>;
  body: string;
  /** ms from the first byte sent until the server closed the connection; null if it stayed open. */
  closedAfterMs: number | null;
}

/**
 * Writes `parts` on a fresh connection (`delayMs` apart) and collects the answer until the server closes the
 * connection or `waitMs` passes. Nothing normalizes what is sent.
 */
function exchange(parts: Array<string | Buffer>, options: { delayMs?: number; waitMs?: number; closeOnAnswer?: boolean; to?: RunningGateway } = {}): Promise<RawExchange> {
  const { delayMs = 0, waitMs = 5000, closeOnAnswer = false, to = gateway } = options;
  return new Promise((resolve) => {
    const socket = connect(to.port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const started = Date.now();
    let done = false;
    const finish = (closedAfterMs: number | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('utf8');
      const head = text.indexOf('\r\n\r\n');
      const lines = (head >= 0 ? text.slice(0, head) : text).split('\r\n');
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(lines[0] ?? '');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ text, status: status ? Number(status[1]) : null, headers, body: head >= 0 ? text.slice(head + 4) : '', closedAfterMs });
    };
    const timer = setTimeout(() => finish(null), waitMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (!closeOnAnswer) return;
      const text = Buffer.concat(chunks).toString('utf8');
      const head = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(text);
      if (head >= 0 && length && Buffer.byteLength(text) >= Buffer.byteLength(text.slice(0, head + 4)) + Number(length[1])) finish(null);
    });
    socket.on('close', () => finish(Date.now() - started));
    socket.on('error', () => finish(Date.now() - started));
    void (async () => {
      for (const part of parts) {
        if (done || socket.destroyed) return;
        socket.write(part);
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    })();
  });
}

const get = (target: string, extraHeaders = ''): string => `GET ${target} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n${extraHeaders}\r\n`;

describe('server.max-header-size', () => {
  it('answers 431 problem+json for a header section over the limit', async () => {
    expectProblem(await exchange([get('/health', `X-Padding: ${'p'.repeat(5000)}\r\n`)]), 431, 'IAM_HEADERS_TOO_LARGE');
    // Many small headers count together.
    const many = Array.from({ length: 100 }, (_, i) => `X-Many-${i}: ${'m'.repeat(40)}\r\n`).join('');
    expectProblem(await exchange([get('/health', many)]), 431, 'IAM_HEADERS_TOO_LARGE');
  });

  it('accepts a header section under the limit', async () => {
    expect((await exchange([get('/health', `X-Padding: ${'p'.repeat(3000)}\r\n`)])).status).toBe(200);
  });
});

describe('server.max-url-length', () => {
  it('answers 414 IAM_URI_TOO_LONG for a request target over the limit, and the host sees nothing', async () => {
    await upstream.clear();
    expectProblem(await exchange([get(`/health?q=${'a'.repeat(1100)}`)]), 414, 'IAM_URI_TOO_LONG');
    expectProblem(await exchange([get(`/api/projects/${'b'.repeat(1100)}`)]), 414, 'IAM_URI_TOO_LONG');
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('accepts a request target under the limit', async () => {
    expect((await exchange([get(`/health?q=${'a'.repeat(900)}`)])).status).toBe(200);
  });

  it('still answers problem+json when the target is longer than the whole header limit', async () => {
    const answer = await exchange([get(`/health?q=${'a'.repeat(6000)}`)]);
    expect([414, 431]).toContain(answer.status);
    expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
  });
});

describe('server.iam-body-limit', () => {
  const loginHead = (length: number | null): string =>
    `POST /iam/auth/login HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\nContent-Type: application/json\r\n${length === null ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`}\r\n\r\n`;
  const bigBody = JSON.stringify({ username: 'alice', password: 'x'.repeat(2000), clientType: 'WEB' });

  it('answers 413 IAM_PAYLOAD_TOO_LARGE for a /iam body over the limit (Content-Length)', async () => {
    expectProblem(await exchange([loginHead(Buffer.byteLength(bigBody)) + bigBody]), 413, 'IAM_PAYLOAD_TOO_LARGE');
  });

  it('answers 413 IAM_PAYLOAD_TOO_LARGE for a chunked /iam body over the limit', async () => {
    const chunked = `${Buffer.byteLength(bigBody).toString(16)}\r\n${bigBody}\r\n0\r\n\r\n`;
    expectProblem(await exchange([loginHead(null) + chunked]), 413, 'IAM_PAYLOAD_TOO_LARGE');
  });

  it('reads a /iam body under the limit', async () => {
    const body = JSON.stringify({ username: 'alice', password: 'wrong-password', clientType: 'WEB' });
    expectProblem(await exchange([loginHead(Buffer.byteLength(body)) + body]), 401, 'IAM_INVALID_CREDENTIALS');
  });

  it('does not limit bodies proxied to the host (they are streamed)', async () => {
    const bob = await login(gateway.url, 'bob');
    await upstream.clear();
    const body = 'u'.repeat(100_000);
    const response = await fetch(`${gateway.url}/upload`, { method: 'POST', headers: { ...bearer(bob.accessToken), 'content-type': 'text/plain' }, body });
    expect(response.status).toBe(200);
    expect((await upstream.requests())[0]).toMatchObject({ bodyLength: 100_000, bodyComplete: true });
  });
});

describe('server.headers-timeout and server.request-timeout (slow clients)', () => {
  // The same limits with the request timeout off: only the headers timeout can drop a client that never finishes its
  // headers, so the close itself proves the headers timeout did it.
  let headersOnly: RunningGateway;
  beforeAll(async () => {
    headersOnly = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), ...LIMITS, SERVER_REQUEST_TIMEOUT: '0' });
  });
  afterAll(async () => {
    await headersOnly?.close();
  });

  it('disconnects a slowloris client that never finishes its headers after the headers timeout', async () => {
    // A header line every 100 ms (the scenario's pace, not a wait), for longer than the test waits: the headers never end.
    const lines = Math.ceil((2 * SLOW_CLIENT_NOT_HUNG_MS) / 100);
    const trickle = ['GET /health HTTP/1.1\r\nHost: gateway\r\n', ...Array.from({ length: lines }, (_, i) => `X-Slow-${i}: x\r\n`)];
    const answer = await exchange(trickle, { delayMs: 100, waitMs: SLOW_CLIENT_NOT_HUNG_MS, to: headersOnly });
    expect(answer.closedAfterMs).not.toBeNull();
    expect(answer.closedAfterMs!).toBeGreaterThanOrEqual(900);
    // If the gateway says anything, it says it as a problem (408).
    if (answer.text.length > 0) {
      expect(answer.status).toBe(408);
      expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(answer.body)).toMatchObject({ status: 408, code: expect.stringMatching(/^IAM_/) });
    }
  }, SLOW_CLIENT_NOT_HUNG_MS + 20_000);

  it('disconnects a client whose /iam body never finishes after the request timeout', async () => {
    const body = JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' });
    const head = `POST /iam/auth/login HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body) + 100}\r\n\r\n`;
    // The headers are complete at once and the body never is: only the request timeout can drop this client.
    const answer = await exchange([head, ...body.split('').slice(0, 40)], { delayMs: 100, waitMs: SLOW_CLIENT_NOT_HUNG_MS });
    expect(answer.closedAfterMs).not.toBeNull();
    expect(answer.closedAfterMs!).toBeGreaterThanOrEqual(1900);
  }, SLOW_CLIENT_NOT_HUNG_MS + 20_000);

  it('closes an idle keep-alive connection after the keep-alive timeout', async () => {
    // Answered and then silent: nothing but the keep-alive timeout closes an idle connection.
    const answer = await exchange(['GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n'], { waitMs: SLOW_CLIENT_NOT_HUNG_MS });
    expect(answer.status).toBe(200);
    expect(answer.closedAfterMs).not.toBeNull();
    expect(answer.closedAfterMs!).toBeGreaterThanOrEqual(450);
  }, SLOW_CLIENT_NOT_HUNG_MS + 20_000);
});

describe('config/default.yaml', () => {
  it('documents every limit key with a comment above it', () => {
    const document = parseDocument(readFileSync(join(ROOT, 'config', 'default.yaml'), 'utf8'));
    const server = document.get('server', true) as { items: Array<{ key: { value: string; commentBefore?: string } }> };
    const documented = new Map(server.items.map((pair) => [pair.key.value, pair.key.commentBefore ?? '']));
    const expected: Record<string, RegExp> = {
      'max-header-size': /431/,
      'max-url-length': /414/,
      'iam-body-limit': /413/,
      'headers-timeout': /header/i,
      'request-timeout': /slowloris|whole request/i,
      'keep-alive-timeout': /keep-alive/i,
      'shutdown-timeout': /SIGTERM/,
    };
    for (const [key, pattern] of Object.entries(expected)) expect({ key, comment: documented.get(key) }).toEqual({ key, comment: expect.stringMatching(pattern) });
  });
});
