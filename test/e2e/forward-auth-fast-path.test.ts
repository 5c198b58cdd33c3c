/**
 * Forward-auth is answered by the front door like a proxied request (gateway/forward-auth-handler.ts), not by the
 * /iam Koa app: what that path could get wrong, on the wire. Every header the nginx and Caddy recipes read is on the
 * answer (the same identity headers the host receives through the proxy); HEAD; bodies ignored or refused as the
 * /iam app did; pipelined checks on one keep-alive connection answered in order, each with its own answer, a slow
 * decision first; a client that goes away mid-decision; repeated and huge X-Forwarded-* headers; method overrides;
 * the path's other spellings and methods.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { login, ROOT } from '../support/gateway';
import { startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { recordedHeader, type RecordingUpstream } from '../support/recording-upstream';
import { metricValue } from '../support/scrape';
import { until } from '../support/wait';

const PATH = '/iam/authorization/forward-auth';

/**
 * "Answered, not hung": for the answers of checks already sent (a held decision is released first). Far above a loaded
 * machine's latency; it only turns an answer that never comes into a failure.
 */
const ANSWERED_NOT_HUNG_MS = 20_000;

/** The e2e routes, a route whose decision waits for a resolver the test holds, and a shadow route. */
const POLICY = (resolverBase: string): string => `
version: 1
default: deny
resources:
  TASK:
    resolver: { url: "${resolverBase}/internal/resources/tasks/{id}", timeout: 10s }
routes:
  - { path: /health, methods: [GET], public: true }
  - path: /api/projects
    permission: project:read
    routes:
      - { methods: [GET], path: "", permission: project:list }
      - { methods: [POST], path: "", permission: project:create }
      - { methods: [GET], path: /:projectId }
  - { path: /api/admin/**, methods: ["*"], permission: admin:write }
  - { path: /api/tasks/:taskId, methods: [GET], permission: task:read, resource: { type: TASK, id: taskId, access: READ } }
  - { path: /shadow/**, methods: [GET], permission: admin:write, mode: shadow }
`;

/** The host's resolver: every call is held until the test releases it (a decision in progress). */
interface Resolver {
  server: Server;
  url: string;
  held: ServerResponse[];
  releaseAll(): void;
}

function startResolver(): Promise<Resolver> {
  const resolver: Resolver = {
    server: createServer((_req, res) => {
      resolver.held.push(res);
    }),
    url: '',
    held: [],
    releaseAll() {
      for (const res of resolver.held.splice(0)) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ scopes: [{ type: 'PROJECT', id: '1' }] }));
      }
    },
  };
  return new Promise((resolve) =>
    resolver.server.listen(0, '127.0.0.1', () => {
      resolver.url = `http://127.0.0.1:${(resolver.server.address() as AddressInfo).port}`;
      resolve(resolver);
    }),
  );
}

interface RawAnswer {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
}

/**
 * One client connection speaking raw HTTP/1.1: requests are written exactly as given (several in one write to
 * pipeline them), answers are read in order (`Content-Length` framing; none after a HEAD; 1xx skipped).
 */
class RawConnection {
  private buffer = '';
  private readonly heads: boolean[] = [];
  readonly answers: RawAnswer[] = [];
  bytesReceived = 0;
  closed = false;

  private constructor(readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      this.bytesReceived += chunk.length;
      this.buffer += chunk;
      this.parse();
    });
    socket.on('close', () => {
      this.closed = true;
    });
    socket.on('error', () => undefined);
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** Writes the requests in one write (pipelined when there are several). */
  send(...requests: Array<{ text: string; head?: boolean }>): void {
    for (const request of requests) this.heads.push(request.head === true);
    this.socket.write(requests.map((request) => request.text).join(''));
  }

  /** Resolves once `count` answers arrived in all; fails at once if the connection closes before. */
  async next(count: number): Promise<RawAnswer[]> {
    await until(`${count} answers on the connection`, () => this.answers.length >= count || this.closed, { within: ANSWERED_NOT_HUNG_MS, every: 5 });
    if (this.answers.length < count) throw new Error(`connection closed after ${this.answers.length} of ${count} answers`);
    return this.answers.slice(0, count);
  }

  close(): void {
    this.socket.destroy();
  }

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = this.buffer.slice(0, end).split('\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine!)?.[1]);
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).toLowerCase();
        const value = line.slice(colon + 1).trim();
        headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      }
      if (status >= 100 && status < 200) {
        this.buffer = this.buffer.slice(end + 4);
        continue;
      }
      const length = this.heads[this.answers.length] ? 0 : Number(headers['content-length'] ?? 0);
      if (this.buffer.length < end + 4 + length) return;
      this.answers.push({ status, headers, body: this.buffer.slice(end + 4, end + 4 + length) });
      this.buffer = this.buffer.slice(end + 4 + length);
    }
  }
}

/** A raw forward-auth request: the request line, `Host`, then `lines` (`Name: value`), then `body`. */
function check(lines: string[], options: { method?: string; path?: string; body?: string } = {}): string {
  return `${options.method ?? 'GET'} ${options.path ?? PATH} HTTP/1.1\r\nHost: gateway.test\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n${options.body ?? ''}`;
}

/** Sends one request on a new connection and reads its answer. */
async function once(text: string, head = false): Promise<RawAnswer> {
  const connection = await RawConnection.open(gateway.port);
  try {
    connection.send({ text, head });
    return (await connection.next(1))[0]!;
  } finally {
    connection.close();
  }
}

const code = (answer: RawAnswer): string => {
  expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
  return (JSON.parse(answer.body) as { code: string }).code;
};

/** The names of the gateway headers the nginx recipe copies (`$upstream_http_x_iam_*`) and the Caddy recipe's `copy_headers`. */
function recipeHeaderNames(): { nginx: string[]; caddy: string[] } {
  const nginx = readFileSync(join(ROOT, 'examples/forward-auth/nginx.conf'), 'utf8');
  const caddy = readFileSync(join(ROOT, 'examples/forward-auth/Caddyfile'), 'utf8');
  return {
    nginx: [...nginx.matchAll(/\$upstream_http_(x_iam_[a-z_]+)/g)].map((match) => match[1]!.replace(/_/g, '-')),
    caddy: /copy_headers ([^\n]+)/.exec(caddy)![1]!.trim().split(/\s+/).map((name) => name.toLowerCase()),
  };
}

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let resolver: Resolver;
let policyDir: string;
let token: string;
let sessionId: string;
let auth: string;

beforeAll(async () => {
  resolver = await startResolver();
  policyDir = mkdtempSync(join(tmpdir(), 'forward-auth-fast-path-'));
  writeFileSync(join(policyDir, 'routes.yaml'), POLICY(resolver.url));
  // Assertions on, so X-IAM-Assertion is among the headers; 127.0.0.1 trusted, so the X-Request-Id each request
  // sends is kept and names its answer.
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: policyDir, IAM_FORWARD_ASSERTION_ENABLED: 'true', IAM_FORWARD_TRUSTED_PROXIES: '127.0.0.1' });
  ({ upstream, gateway } = fixture);
  ({ accessToken: token, sessionId } = await login(gateway.url, 'alice'));
  auth = `Authorization: Bearer ${token}`;
}, 60_000);

afterAll(async () => {
  resolver?.releaseAll();
  await fixture?.close();
  await new Promise((resolve) => resolver?.server.close(resolve));
  if (policyDir) rmSync(policyDir, { recursive: true, force: true });
});

describe('the answer carries what the recipes read', () => {
  it('200: every X-IAM-* header the nginx and Caddy recipes copy, the same ones the host receives through the proxy; no body', async () => {
    const allowed = await once(check([auth, 'X-Original-Method: GET', 'X-Original-URI: /api/projects?page=2', 'X-Request-Id: fa-recipe-1']));
    expect(allowed.status).toBe(200);
    expect(allowed.headers).toMatchObject({
      'x-request-id': 'fa-recipe-1',
      'x-iam-user-id': 'u-alice',
      'x-iam-identity-id': 'id-alice',
      'x-iam-identity-domain': 'example.com',
      'x-iam-session-id': sessionId,
      'x-iam-profile-id': 'p-alice-editor',
      'x-iam-permission': 'project:list',
      'cache-control': 'no-store',
      'content-length': '0',
    });
    expect(allowed.body).toBe('');
    expect(allowed.headers['x-iam-shadow-denied']).toBeUndefined();
    // The assertion is about the original request, with this check's request id.
    const claims = JSON.parse(Buffer.from(allowed.headers['x-iam-assertion']!.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    expect(claims).toMatchObject({ sub: 'u-alice', sid: sessionId, htm: 'GET', htu: '/api/projects', jti: 'fa-recipe-1', permission: 'project:list' });

    // The same request through the proxy: the host gets the same identity headers (the assertion differs only by its jti and times).
    await upstream.clear();
    const proxied = await fetch(`${gateway.url}/api/projects?page=2`, { headers: { authorization: `Bearer ${token}` } });
    expect(proxied.status).toBe(200);
    const [received] = await upstream.requests();
    const names = ['x-iam-user-id', 'x-iam-identity-id', 'x-iam-identity-domain', 'x-iam-session-id', 'x-iam-profile-id', 'x-iam-permission', 'x-iam-shadow-denied'];
    for (const name of names) expect([name, recordedHeader(received!, name)]).toEqual([name, allowed.headers[name] === undefined ? [] : [allowed.headers[name]]]);

    // A shadow route that would deny: 200 with X-IAM-Shadow-Denied and no X-IAM-Permission.
    const shadow = await once(check([auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /shadow/stats']));
    expect(shadow.status).toBe(200);
    expect(shadow.headers).toMatchObject({ 'x-iam-shadow-denied': 'PERMISSION_DENIED', 'x-iam-user-id': 'u-alice' });
    expect(shadow.headers['x-iam-permission']).toBeUndefined();

    // Every header either recipe reads is sent by one of the two answers.
    const { nginx, caddy } = recipeHeaderNames();
    expect(nginx.length).toBeGreaterThanOrEqual(8);
    expect(new Set(caddy)).toEqual(new Set(nginx));
    for (const name of nginx) expect([name, allowed.headers[name] ?? shadow.headers[name]]).toEqual([name, expect.any(String)]);
  });

  it('HEAD: the same status and headers as GET, no body; a denial keeps its problem headers', async () => {
    const lines = [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects'];
    const get = await once(check(lines));
    const head = await once(check(lines, { method: 'HEAD' }), true);
    expect(head.status).toBe(200);
    for (const name of ['x-iam-user-id', 'x-iam-session-id', 'x-iam-profile-id', 'x-iam-permission', 'cache-control', 'content-length']) expect([name, head.headers[name]]).toEqual([name, get.headers[name]]);
    expect(head.headers['x-request-id']).toEqual(expect.any(String));
    expect(head.body).toBe('');
    const anonymous = await once(check(['X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects'], { method: 'HEAD' }), true);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(anonymous.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(anonymous.body).toBe('');
  });

  it('denials and refusals: problem+json naming the original request (after the URI is read), X-Request-Id, no-store', async () => {
    const denied = await once(check([auth, 'X-Forwarded-Method: DELETE', 'X-Forwarded-Uri: /api/admin/users', 'X-Request-Id: fa-denied-1']));
    expect(denied.status).toBe(403);
    expect(denied.headers).toMatchObject({ 'x-request-id': 'fa-denied-1', 'cache-control': 'no-store' });
    expect(JSON.parse(denied.body)).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'PERMISSION_DENIED', instance: '/api/admin/users', requestId: 'fa-denied-1', decisionId: expect.any(String) });
    const refused = await once(check([auth, 'X-Forwarded-Method: GET', 'X-Request-Id: fa-refused-1']));
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'IAM_BAD_REQUEST', instance: PATH, requestId: 'fa-refused-1' });
  });
});

describe('bodies, as the /iam app treated them', () => {
  let original: string[];
  beforeAll(() => {
    original = [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects'];
  });

  it('a JSON body is ignored (never read, whatever its size); any other body, or one without a type, is 415', async () => {
    const big = '{"a":"' + 'x'.repeat(200_000) + '"}';
    for (const [lines, body] of [
      [['Content-Type: application/json', 'Content-Length: 7'], '{"a":1}'],
      [['Content-Type: Application/JSON; charset=utf-8', 'Content-Length: 7'], '{"a":1}'],
      [['Content-Type: application/json', 'Content-Length: 3'], 'abc'],
      [['Content-Type: application/json', `Content-Length: ${big.length}`], big],
      [['Content-Type: application/json', 'Transfer-Encoding: chunked'], '3\r\nabc\r\n0\r\n\r\n'],
      [['Content-Type: text/plain', 'Content-Length: 0'], ''],
      [['Content-Length: 0'], ''],
    ] as Array<[string[], string]>) {
      const answer = await once(check([...original, ...lines], { body }));
      expect([lines, answer.status]).toEqual([lines, 200]);
      expect(answer.headers['x-iam-permission']).toBe('project:list');
    }
    for (const [lines, body] of [
      [['Content-Type: text/plain', 'Content-Length: 3'], 'abc'],
      [['Content-Length: 3'], 'abc'],
      [['Content-Type: application/vnd.api+json', 'Content-Length: 2'], '{}'],
      [['Content-Type: application/x-www-form-urlencoded', 'Content-Length: 3'], 'a=b'],
      [['Transfer-Encoding: chunked'], '3\r\nabc\r\n0\r\n\r\n'],
      [['Transfer-Encoding: chunked'], '0\r\n\r\n'],
    ] as Array<[string[], string]>) {
      const answer = await once(check([...original, ...lines], { body }));
      expect([lines, answer.status]).toEqual([lines, 415]);
      expect(code(answer)).toBe('IAM_UNSUPPORTED_MEDIA_TYPE');
      expect(answer.headers['x-request-id']).toEqual(expect.any(String));
      expect(answer.headers['x-iam-user-id']).toBeUndefined();
    }
  });

  it('an unread body does not leak into the next request on the connection', async () => {
    const connection = await RawConnection.open(gateway.port);
    try {
      const body = '{"smuggled":"GET /iam/authorization/forward-auth HTTP/1.1\\r\\n\\r\\n"}';
      connection.send(
        { text: check([...original, 'Content-Type: application/json', `Content-Length: ${body.length}`], { body }) },
        { text: check([...original.slice(1), 'X-Request-Id: fa-after-body']) },
      );
      const [first, second] = await connection.next(2);
      expect(first!.status).toBe(200);
      expect(second!.status).toBe(401);
      expect(second!.headers['x-request-id']).toBe('fa-after-body');
      // Negative check (nothing to poll for an answer that must never come): a moment for a third one to show up if
      // the body leaked.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(connection.answers).toHaveLength(2);
    } finally {
      connection.close();
    }
  });

  it('Expect: 100-continue is answered, then the check', async () => {
    const connection = await RawConnection.open(gateway.port);
    try {
      connection.send({ text: check([...original, 'Expect: 100-continue', 'Content-Type: application/json', 'Content-Length: 2']) });
      // Scenario pacing: the body comes after a pause, as from a client waiting for the 100 (the gateway may answer
      // the check without reading the body, so there is no 100 to poll for).
      await new Promise((resolve) => setTimeout(resolve, 50));
      connection.socket.write('{}');
      const [answer] = await connection.next(1);
      expect(answer!.status).toBe(200);
    } finally {
      connection.close();
    }
  });
});

describe('one keep-alive connection', () => {
  it('pipelined checks are answered in order, each with its own answer, behind a decision that waits for a resolver', async () => {
    const connection = await RawConnection.open(gateway.port);
    try {
      const requests = [
        { id: 'p-slow', lines: [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/tasks/20'], status: 200, permission: 'task:read' },
        { id: 'p-list', lines: [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects'], status: 200, permission: 'project:list' },
        { id: 'p-create', lines: [auth, 'X-Original-Method: POST', 'X-Original-URI: /api/projects'], status: 200, permission: 'project:create' },
        { id: 'p-admin', lines: [auth, 'X-Forwarded-Method: DELETE', 'X-Forwarded-Uri: /api/admin/users'], status: 403 },
        { id: 'p-anonymous', lines: ['X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects'], status: 401 },
        { id: 'p-public', lines: ['X-Forwarded-Method: GET', 'X-Forwarded-Uri: /health'], status: 200 },
        { id: 'p-no-uri', lines: [auth, 'X-Forwarded-Method: GET'], status: 400 },
        { id: 'p-head', lines: [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects/1'], status: 200, permission: 'project:read', head: true },
        { id: 'p-post-endpoint', lines: [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects', 'Content-Length: 0'], status: 405, method: 'POST' },
        { id: 'p-last', lines: [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects'], status: 200, permission: 'project:list' },
      ];
      connection.send(...requests.map((r) => ({ text: check([...r.lines, `X-Request-Id: ${r.id}`], { method: r.method ?? (r.head ? 'HEAD' : 'GET') }), head: r.head })));
      // The first decision waits for the resolver: nothing may be answered before it, though the others are decided.
      await until('the resolver to hold the first decision', () => resolver.held.length > 0, { every: 10 });
      expect(resolver.held).toHaveLength(1);
      // Negative check: a moment for the other decisions to be made (nothing to poll: what is checked is that none is
      // written).
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(connection.bytesReceived).toBe(0);
      resolver.releaseAll();
      const answers = await connection.next(requests.length);
      expect(answers.map((answer) => answer.headers['x-request-id'])).toEqual(requests.map((r) => r.id));
      expect(answers.map((answer) => answer.status)).toEqual(requests.map((r) => r.status));
      expect(answers.map((answer) => answer.headers['x-iam-permission'])).toEqual(requests.map((r) => r.permission));
      expect(answers.map((answer) => answer.headers['x-iam-user-id'])).toEqual(requests.map((r) => (r.status === 200 && r.lines[0] === auth ? 'u-alice' : undefined)));
      expect(JSON.parse(answers[3]!.body)).toMatchObject({ code: 'IAM_ACCESS_DENIED', requestId: 'p-admin', instance: '/api/admin/users' });
      expect(JSON.parse(answers[4]!.body)).toMatchObject({ code: 'IAM_UNAUTHENTICATED', requestId: 'p-anonymous', instance: '/api/projects' });
      expect(JSON.parse(answers[6]!.body)).toMatchObject({ code: 'IAM_BAD_REQUEST', requestId: 'p-no-uri' });
      expect(JSON.parse(answers[8]!.body)).toMatchObject({ code: 'IAM_METHOD_NOT_ALLOWED', requestId: 'p-post-endpoint' });
      expect(connection.closed).toBe(false);
    } finally {
      resolver.releaseAll();
      connection.close();
    }
  });

  it('a client that goes away mid-decision: the decision completes, nothing is written to it, the gateway answers the next check', async () => {
    const allowedBefore = await metricValue(gateway.managementUrl, 'iam_forward_auth_requests_total', { outcome: 'allowed' });
    const connection = await RawConnection.open(gateway.port);
    connection.send({ text: check([auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/tasks/21']) });
    await until('the resolver to hold the decision', () => resolver.held.length > 0, { every: 10 });
    expect(resolver.held).toHaveLength(1);
    connection.close();
    // Scenario pacing: a moment for the gateway to see the client leave before the decision completes (nothing to poll).
    await new Promise((resolve) => setTimeout(resolve, 100));
    resolver.releaseAll();
    await until('the decision to be counted', async () => (await metricValue(gateway.managementUrl, 'iam_forward_auth_requests_total', { outcome: 'allowed' })) !== allowedBefore);
    expect(await metricValue(gateway.managementUrl, 'iam_forward_auth_requests_total', { outcome: 'allowed' })).toBe(allowedBefore + 1);
    expect(connection.bytesReceived).toBe(0);
    const next = await once(check([auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects']));
    expect(next.status).toBe(200);
    // And a client gone before a denial is written.
    const denied = await RawConnection.open(gateway.port);
    denied.send({ text: check([auth, 'X-Forwarded-Method: DELETE', 'X-Forwarded-Uri: /api/tasks/22']) });
    denied.close();
    expect((await once(check([auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /health']))).status).toBe(200);
  });
});

describe('headers a client or a proxy chain may repeat or blow up', () => {
  const uri = (value: string): string => `X-Forwarded-Uri: ${value}`;

  it('many copies of the method and URI that agree are one request; one disagreeing copy anywhere is 400', async () => {
    const agreeing = [auth, ...Array.from({ length: 40 }, () => ['X-Forwarded-Method: GET', 'X-Original-Method: GET', uri('/api/projects'), 'X-Original-URI: /api/projects']).flat()];
    const answer = await once(check(agreeing));
    expect(answer.status).toBe(200);
    expect(answer.headers['x-iam-permission']).toBe('project:list');
    for (const odd of ['X-Original-Method: POST', 'X-Forwarded-Method: get', 'X-Original-URI: /api/projects/', uri('/api/admin/users')]) {
      const refused = await once(check([...agreeing, odd, ...agreeing.slice(1, 5)]));
      expect([odd, refused.status]).toEqual([odd, 400]);
      expect(code(refused)).toBe('IAM_BAD_REQUEST');
    }
  });

  it('a URI above server.max-url-length is 414; a header block above server.max-header-size is 431', async () => {
    const long = await once(check([auth, 'X-Forwarded-Method: GET', uri('/api/projects?' + 'a'.repeat(9000))]));
    expect(long.status).toBe(414);
    expect(code(long)).toBe('IAM_URI_TOO_LONG');
    expect(JSON.parse(long.body)).toMatchObject({ instance: PATH });
    const huge = await once(check([auth, 'X-Forwarded-Method: GET', uri('/api/projects'), `X-Forwarded-For: ${'10.0.0.1, '.repeat(2000)}10.0.0.2`]));
    expect(huge.status).toBe(431);
    expect(code(huge)).toBe('IAM_HEADERS_TOO_LARGE');
  });

  it('long and repeated X-Forwarded-For/-Host/-Proto chains from a proxy do not change the decision', async () => {
    const chain = Array.from({ length: 300 }, (_, i) => `10.0.${i >> 8}.${i & 255}`).join(', ');
    const answer = await once(
      check([auth, 'X-Forwarded-Method: GET', uri('/api/projects'), `X-Forwarded-For: ${chain}`, 'X-Forwarded-For: 192.0.2.1', 'X-Forwarded-Host: a.test', 'X-Forwarded-Host: b.test', 'X-Forwarded-Proto: https', 'X-Forwarded-Proto: http']),
    );
    expect(answer.status).toBe(200);
    expect(answer.headers['x-iam-permission']).toBe('project:list');
  });

  it('a header naming the gateway (X-IAM-*) in any case is refused, even beside a valid request', async () => {
    for (const header of ['X-IAM-User-Id: u-admin', 'x-iam-permission: *:*', 'X-Iam-Anything: 1']) {
      const refused = await once(check([auth, 'X-Forwarded-Method: GET', uri('/api/projects'), header]));
      expect([header, refused.status]).toEqual([header, 400]);
      expect(code(refused)).toBe('IAM_BAD_REQUEST');
      expect(refused.headers['x-iam-user-id']).toBeUndefined();
    }
  });
});

describe('method overrides never choose the method judged', () => {
  it.each([['X-HTTP-Method-Override: GET'], ['X-HTTP-Method: GET'], ['X-Method-Override: GET']])('%s on the check is 400', async (header) => {
    const refused = await once(check([auth, 'X-Forwarded-Method: DELETE', 'X-Forwarded-Uri: /api/projects', header]));
    expect(refused.status).toBe(400);
    expect(code(refused)).toBe('IAM_BAD_REQUEST');
  });

  it('a _method parameter in the original URI, or in the check URL itself, is 400', async () => {
    for (const [path, target] of [
      [PATH, '/api/projects?_method=GET'],
      [PATH, '/api/projects?a=1&_METHOD=get'],
      [`${PATH}?_method=POST`, '/api/projects'],
    ]) {
      const refused = await once(check([auth, 'X-Forwarded-Method: POST', `X-Forwarded-Uri: ${target}`], { path }));
      expect([path, target, refused.status]).toEqual([path, target, 400]);
      expect(code(refused)).toBe('IAM_BAD_REQUEST');
    }
  });
});

describe('the path and its methods', () => {
  let lines: string[];
  beforeAll(() => {
    lines = [auth, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /api/projects'];
  });

  it('the spellings the /iam router matched are answered (trailing slash, any case after /iam, a query, an encoded unreserved character)', async () => {
    for (const path of [`${PATH}/`, '/iam/Authorization/Forward-Auth', `${PATH}?x=1`, '/iam/authorization/forward%2Dauth', '/iam//authorization/./forward-auth']) {
      const answer = await once(check(lines, { path }));
      expect([path, answer.status, answer.headers['x-iam-permission']]).toEqual([path, 200, 'project:list']);
    }
    const unknown = await once(check(lines, { path: `${PATH}/more` }));
    expect(unknown.status).toBe(404);
    expect(code(unknown)).toBe('IAM_NOT_FOUND');
  });

  it('other methods: 405 IAM_METHOD_NOT_ALLOWED (a body of another type 415 first); OPTIONS lists HEAD and GET', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'TRACE']) {
      const answer = await once(check([...lines, 'Content-Length: 0'], { method }));
      expect([method, answer.status]).toEqual([method, 405]);
      expect(code(answer)).toBe('IAM_METHOD_NOT_ALLOWED');
    }
    const textBody = await once(check([...lines, 'Content-Type: text/plain', 'Content-Length: 3'], { method: 'POST', body: 'abc' }));
    expect(textBody.status).toBe(415);
    const options = await once(check(lines, { method: 'OPTIONS' }));
    expect(options.status).toBe(200);
    expect(options.headers.allow).toBe('HEAD, GET');
    expect(options.headers['x-iam-user-id']).toBeUndefined();
  });
});
