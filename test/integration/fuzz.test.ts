/**
 * Reliability: bad input never crashes the gateway, never leaks internals, never reaches the host
 * unauthorized. Property-based (fast-check): random request targets, headers, framings and JSON bodies are
 * written on raw sockets (so nothing normalizes them first) to the proxy and to `/iam/auth/login` and
 * `/iam/authorization/diagnostics`. Every answer must be well-formed HTTP; every error the gateway's own
 * problem+json with no stack trace or file path; and every request the recording upstream received must be
 * one the policy allows for its caller, exactly as the host saw it.
 */
import fc from 'fast-check';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { IamPrincipal } from '../../src/domain/principal';
import { normalizeRequestTarget } from '../../src/http/normalize-target';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { login, ROOT, startTestGateway } from '../support/gateway';
import { recordedHeader, startRecordingUpstream, type RecordedRequest, type RecordingUpstream } from '../support/recording-upstream';

const CASES = Number(process.env.FUZZ_RUNS ?? 1000);
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);

let upstream: RecordingUpstream;
let gateway: RunningGateway;
let alice: Awaited<ReturnType<typeof login>>;
let bob: Awaited<ReturnType<typeof login>>;
/** sessionId → the principal and client type the gateway issued it for. */
const sessions = new Map<string, { principal: IamPrincipal; clientType: string }>();

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, {
    IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
    // A case that leaves a body or header section unfinished ends here instead of stalling the run.
    SERVER_HEADERS_TIMEOUT: '2s',
    SERVER_REQUEST_TIMEOUT: '2s',
    SERVER_MAX_URL_LENGTH: '4kb',
  });
  alice = await login(gateway.url, 'alice');
  bob = await login(gateway.url, 'bob');
  for (const session of [alice, bob]) sessions.set(session.sessionId, { principal: session.principal as unknown as IamPrincipal, clientType: 'WEB' });
});

afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

// ---------------------------------------------------------------------------------------------------------
// Generators

const SEGMENTS = [
  '..', '.', '%2e', '%2E%2e', '.%2e', '%2e.', '%2f', '%2F', '%5c', '%5C', '\\', '', ';', ';x=1', '..;', '%00', '%',
  '%zz', '%4', '%c3%a9', '%ff', '%C0%AF', '%e2%80%ae', 'é', '日本', '😀', '*', '~', '%7e', '%41', '%252e%252e', 'api',
  'projects', 'admin', 'stats', 'iam', 'health', 'auth', 'login', 'me', '1', '2', ':projectId', '**', '?', '#', '%3f',
  '%23', '@', 'whoami', 'upload', 'diagnostics', 'authorization', 'forward-auth', '.well-known', 'HEALTH', 'Api',
];
const PLAIN_PREFIXES = ['/', '/health', '/api/projects', '/api/projects/1', '/api/admin', '/api/admin/stats', '/api/whoami', '/upload', '/iam', '/iam/auth/me'];
const ODD_PREFIXES = [
  '//api/admin', '/API/admin', '/api//admin', '/health/../api/admin/stats', 'http://gateway/api/admin', 'http://evil.example/api/projects',
  'HTTP://GATEWAY/health', '*', 'api/projects', '/%2e%2e/api/admin', '/iam/authorization/diagnostics', '/iam/auth/login',
];
const prefix = fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...PLAIN_PREFIXES) }, { weight: 2, arbitrary: fc.constantFrom(...ODD_PREFIXES) });
const TARGET_CHARS = fc.constantFrom(...'abcAZ09-._~!$&\'()*+,;=:@/?%#\\ "<>^`{|}é日\u0000\u007f'.split(''));

const PLAIN_SEGMENTS = ['api', 'projects', 'admin', 'stats', '1', '2', 'whoami', 'health', 'upload', 'x'];
const segment = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...PLAIN_SEGMENTS) },
  { weight: 4, arbitrary: fc.constantFrom(...SEGMENTS) },
  { weight: 2, arbitrary: fc.string({ maxLength: 8, unit: TARGET_CHARS }) },
  { weight: 1, arbitrary: fc.integer({ min: 200, max: 5000 }).map((n) => 'a'.repeat(n)) },
);
const query = fc.oneof(
  { weight: 4, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.constantFrom('?a=1', '?access_token=iamt_x', '?%2e%2e', '?x=/../api/admin', '??', '?#frag', '?q=%00', '?é=1') },
);
/** Targets the policy routes as they are (most are allowed for alice or bob), or mangled. */
const target = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom('/health', '/api/projects', '/api/projects/1', '/api/projects/2', '/api/whoami', '/upload'), query).map(([path, search]) => path + search) },
  // Spellings that normalize to those routes: the host must get the normalized path.
  {
    weight: 2,
    arbitrary: fc.tuple(
      fc.constantFrom('/api/projects/%31', '/api/./projects', '/api/x/../projects', '//api/projects', '/api/projects/1/', '/%61pi/projects', '/api/projects/.', '/api/projects/1/..', '/./health', '/health/', '/api//whoami', '/up%6Coad', '/api/projects/%7E1', '/api/projects/1/%2e%2e'),
      query,
    ).map(([path, search]) => path + search),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(prefix, fc.array(segment, { maxLength: 3 }), fc.constantFrom('', '', '', '/', '//'), query)
      .map(([start, rest, tail, search]) => [start, ...rest].join('/') + tail + search),
  },
);

const method = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('GET', 'GET', 'GET', 'HEAD', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS') },
  { weight: 1, arbitrary: fc.constantFrom('TRACE', 'get', 'PROPFIND', 'M-SEARCH', 'CONNECT', 'G E T', 'GET\t') },
);

type Header = [string, string];
const authorization = fc.oneof(
  { weight: 2, arbitrary: fc.constant<() => Header[]>(() => []) },
  {
    weight: 6,
    arbitrary: fc.constantFrom<() => Header[]>(
      () => [['Authorization', `Bearer ${alice.accessToken}`]],
      () => [['Authorization', `Bearer ${bob.accessToken}`]],
      () => [['authorization', `bearer  ${bob.accessToken}`]],
    ),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom<() => Header[]>(
      () => [['Authorization', `Bearer ${alice.accessToken}`], ['Authorization', `Bearer ${bob.accessToken}`]],
      () => [['Authorization', `Bearer ${alice.accessToken}`], ['authorization', 'Basic YWRtaW46YWRtaW4=']],
      () => [['Authorization', 'Bearer iamt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']],
      () => [['Authorization', 'Bearer garbage token']],
      () => [['Authorization', `Bearer\t${alice.accessToken}`]],
      () => [['Authorization', 'Basic YWRtaW46YWRtaW4=']],
      () => [['Authorization', '']],
      () => [['Authorization', `Bearer ${alice.accessToken}, Bearer ${bob.accessToken}`]],
    ),
  },
);
const trickyHeader = fc.constantFrom<() => Header>(
  () => ['X-IAM-User-Id', 'u-admin'],
  () => ['x-iam-profile-id', 'p-admin'],
  () => ['X-Iam-Permission', '*:*'],
  () => ['X-IAM-Session-Id', alice.sessionId],
  () => ['X_IAM_User_Id', 'u-admin'],
  () => ['x_forwarded_for', '6.6.6.6'],
  () => ['Connection', 'close, X-IAM-User-Id, X-Request-Id, Authorization'],
  () => ['Connection', 'keep-alive, x-forwarded-for, x-iam-permission, host'],
  () => ['Connection', 'upgrade'],
  () => ['Upgrade', 'websocket'],
  () => ['Upgrade', 'h2c'],
  () => ['X-HTTP-Method-Override', 'DELETE'],
  () => ['X-Method-Override', 'PUT'],
  () => ['X-HTTP-Method', 'DELETE'],
  () => ['X-Original-URL', '/api/admin/stats'],
  () => ['X-Rewrite-URL', '/api/admin/stats'],
  () => ['x-middleware-subrequest', 'middleware:middleware:middleware'],
  () => ['X-Forwarded-For', '10.0.0.1'],
  () => ['X-Forwarded-Host', 'evil.example'],
  () => ['Forwarded', 'for=1.2.3.4;host=evil.example;proto=https'],
  () => ['X-Request-Id', 'client-chosen'],
  () => ['Expect', '100-continue'],
  () => ['Expect', 'something-else'],
  () => ['Host', 'evil.example'],
  () => ['Content-Type', 'application/json; charset=utf-8'],
  () => ['Proxy-Authorization', 'Basic eDp5'],
  () => ['TE', 'trailers'],
  () => ['Trailer', 'X-IAM-User-Id'],
  () => ['Keep-Alive', 'timeout=1000'],
);
const randomHeader = fc.tuple(
  fc.oneof({ weight: 4, arbitrary: fc.stringMatching(/^[A-Za-z0-9-]{1,24}$/) }, { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,24}$/) }),
  fc.oneof(
    { weight: 8, arbitrary: fc.string({ maxLength: 40, unit: fc.constantFrom(...' abcXYZ019!#$%&*+-.^_`|~:;,/"()<>@[]{}=?'.split('')) }) },
    { weight: 1, arbitrary: fc.string({ maxLength: 40, unit: fc.constantFrom(...' abc\\é\u0080\u00ff\t\u0001\u007f'.split('')) }) },
  ),
);
const headers = fc.tuple(authorization, fc.array(trickyHeader, { maxLength: 2 }), fc.array(randomHeader, { maxLength: 2 }), fc.oneof({ weight: 19, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) })).map(
  ([auth, tricky, random, withHost]): Header[] => [...(withHost ? [['Host', 'gateway'] as Header] : []), ...auth(), ...tricky.map((make) => make()), ...random],
);

type Framing = 'none' | 'length' | 'chunked' | 'length+chunked' | 'two-lengths' | 'two-different-lengths' | 'odd-te' | 'bad-length';
const framing = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom<Framing>('none', 'length', 'length', 'chunked') },
  { weight: 1, arbitrary: fc.constantFrom<Framing>('length+chunked', 'two-lengths', 'two-different-lengths', 'odd-te', 'bad-length') },
);
const oddTransferEncoding = fc.constantFrom('Chunked', ' chunked', 'chunked ', 'gzip, chunked', 'chunked, identity', 'xchunked', 'identity', 'chunked;q=1');
const SMUGGLED = 'GET /api/admin/stats HTTP/1.1\r\nHost: gateway\r\nX-IAM-User-Id: u-admin\r\nX-IAM-Permission: admin:write\r\n\r\n';
const rawBody = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.constant(`0\r\n\r\n${SMUGGLED}`),
  fc.constant(SMUGGLED),
  fc.json({ maxDepth: 2 }),
);

const loginBody = fc.oneof(
  fc.record({
    username: fc.oneof(fc.constantFrom('alice', 'bob', 'admin', 'eve', 'ALICE', 'alice\u0000', ''), fc.string({ maxLength: 300 })),
    password: fc.oneof(fc.constantFrom('alice-password', 'wrong', ''), fc.string({ maxLength: 40 }), fc.constant('p'.repeat(2000))),
    clientType: fc.constantFrom('WEB', 'API', 'web', 'TOASTER', '', 'WEB '),
  }, { requiredKeys: [] }).map((value) => JSON.stringify(value)),
  fc.json({ maxDepth: 3 }),
  fc.constantFrom('{"username":', '{"__proto__":{"admin":true},"username":"alice","password":"x","clientType":"WEB"}', 'null', '[]', '"x"', '{}', '[['.repeat(3000) + ']]'.repeat(3000), '{"username":"alice","password":"alice-password","clientType":"WEB","clientType":"API"}', '\u00ef\u00bb\u00bf{}'),
);
const diagnosticsBody = fc.oneof(
  fc.record({ method: fc.constantFrom('GET', 'get', 'DELETE', 'G3T', ''), path: fc.oneof(target, fc.string({ maxLength: 50 })) }).map((value) => JSON.stringify(value)),
  fc.record({
    permissionCode: fc.oneof(fc.constantFrom('project:read', '*:*', 'x', 'project:'), fc.string({ maxLength: 30 })),
    resourceType: fc.constantFrom('PROJECT', 'TASK', 'NOPE', ''),
    resourceId: fc.string({ maxLength: 10 }),
    scopeAccess: fc.constantFrom('READ', 'WRITE', 'ALL'),
  }, { requiredKeys: ['permissionCode'] }).map((value) => JSON.stringify(value)),
  fc.json({ maxDepth: 3 }),
);
const contentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '', 'application/vnd.api+json', 'application/json; charset=utf-16');

interface FuzzCase {
  method: string;
  target: string;
  headers: Header[];
  body: string;
  framing: Framing;
  te: string;
  /** #11.1: bytes the client writes after its request, with it or once the answer starts arriving. */
  after?: { bytes: string; when: 'with' | 'on-answer' };
}

// #11.1: upgrade requests (WebSocket or not) followed by more bytes on the same connection: a forged
// request, a WebSocket frame, junk. None of it may reach the host unchecked.
const upgradeHeaders = fc.constantFrom<Header[]>(
  [['Connection', 'Upgrade'], ['Upgrade', 'websocket'], ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='], ['Sec-WebSocket-Version', '13']],
  [['Connection', 'Upgrade'], ['Upgrade', 'websocket']],
  [['Connection', 'upgrade, keep-alive'], ['Upgrade', 'WebSocket']],
  [['Connection', 'Upgrade, HTTP2-Settings'], ['Upgrade', 'h2c'], ['HTTP2-Settings', 'AAMAAABkAAQAAP__']],
  [['Connection', 'Upgrade'], ['Upgrade', 'websocket, h2c']],
  [['Connection', 'Upgrade'], ['Upgrade', 'foo/1']],
);
const afterBytes = fc.record({
  bytes: fc.oneof(fc.constant(SMUGGLED), fc.constant('\x81\x85abcd\x09\x07\x0f\x08\x0e'), fc.string({ maxLength: 60 }), fc.constant(`${SMUGGLED}${SMUGGLED}`)),
  when: fc.constantFrom<'with' | 'on-answer'>('with', 'on-answer'),
});
const plainProxyCase = fc.record({ method, target, headers, body: rawBody, framing, te: oddTransferEncoding });
const upgradeCase = fc
  .tuple(fc.constantFrom('GET', 'GET', 'GET', 'POST'), fc.oneof(target, fc.constantFrom('/ws', '/ws?x=1', '/health')), headers, upgradeHeaders, afterBytes)
  .map(([m, t, hs, upgrade, after]): FuzzCase => ({ method: m, target: t, headers: [...hs, ...upgrade], body: '', framing: 'none', te: 'chunked', after }));
const proxyCase = fc.oneof({ weight: 3, arbitrary: plainProxyCase }, { weight: 1, arbitrary: upgradeCase });
const iamCase = fc
  .tuple(fc.constantFrom('/iam/auth/login', '/iam/authorization/diagnostics', '/iam/auth/login?x=1', '/iam//auth/login', '/iam/auth/./login'), headers, contentType, fc.boolean(), framing, oddTransferEncoding)
  .chain(([path, hs, type, aliceSession, frame, te]) =>
    (path.includes('diagnostics') ? diagnosticsBody : loginBody).map((body): FuzzCase => ({
      method: 'POST',
      target: path,
      headers: [
        ...hs.filter(([name]) => name.toLowerCase() !== 'authorization' || !path.includes('diagnostics')),
        ...(path.includes('diagnostics') && aliceSession ? [['Authorization', `Bearer ${alice.accessToken}`] as Header] : []),
        ...(type ? [['Content-Type', type] as Header] : []),
      ],
      body,
      framing: frame === 'none' ? 'length' : frame,
      te,
    })),
  );
const fuzzCase: fc.Arbitrary<FuzzCase> = fc.oneof({ weight: 2, arbitrary: proxyCase }, { weight: 1, arbitrary: iamCase });

/** The bytes of a case on the wire: request line, headers, then the body framed as the case says. */
function encode(c: FuzzCase): Buffer {
  const body = Buffer.from(c.body, 'utf8');
  const chunked = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
  const framingHeaders: Header[] = [];
  let payload = Buffer.alloc(0);
  switch (c.framing) {
    case 'none':
      break;
    case 'length':
      framingHeaders.push(['Content-Length', String(body.length)]);
      payload = body;
      break;
    case 'chunked':
      framingHeaders.push(['Transfer-Encoding', 'chunked']);
      payload = chunked;
      break;
    case 'length+chunked':
      framingHeaders.push(['Content-Length', String(body.length)], ['Transfer-Encoding', 'chunked']);
      payload = chunked;
      break;
    case 'two-lengths':
      framingHeaders.push(['Content-Length', String(body.length)], ['Content-Length', String(body.length)]);
      payload = body;
      break;
    case 'two-different-lengths':
      framingHeaders.push(['Content-Length', String(body.length)], ['Content-Length', String(body.length + 1)]);
      payload = body;
      break;
    case 'odd-te':
      framingHeaders.push(['Transfer-Encoding', c.te]);
      payload = chunked;
      break;
    case 'bad-length':
      framingHeaders.push(['Content-Length', `+${body.length}`]);
      payload = body;
      break;
  }
  const head = `${c.method} ${c.target} HTTP/1.1\r\n${[...c.headers, ...framingHeaders].map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'utf8'), payload]);
}

// ---------------------------------------------------------------------------------------------------------
// Reading answers

interface ParsedResponse {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer;
}

type ParseResult = { state: 'complete'; response: ParsedResponse } | { state: 'incomplete' } | { state: 'malformed'; reason: string };

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Parses the final response at the start of `data` (interim 1xx answers skipped); `closed` = no more bytes. */
function parseResponse(data: Buffer, headRequest: boolean, closed: boolean): ParseResult {
  let offset = 0;
  for (;;) {
    const end = data.indexOf('\r\n\r\n', offset);
    if (end < 0) return closed && data.length > offset ? { state: 'malformed', reason: 'truncated head' } : { state: 'incomplete' };
    const lines = data.subarray(offset, end).toString('latin1').split('\r\n');
    const statusLine = /^HTTP\/1\.1 ([1-5]\d\d) [^\r\n]*$/.exec(lines[0] ?? '');
    if (!statusLine) return { state: 'malformed', reason: `bad status line ${JSON.stringify(lines[0])}` };
    const status = Number(statusLine[1]);
    const headerList: Array<[string, string]> = [];
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) return { state: 'malformed', reason: `bad header line ${JSON.stringify(line)}` };
      headerList.push([line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]);
    }
    offset = end + 4;
    // A 101 ends the HTTP exchange: what follows belongs to the tunnel (#11.1).
    if (status === 101) return { state: 'complete', response: { status, headers: headerList, body: Buffer.alloc(0) } };
    if (status < 200) continue;
    const lengths = headerList.filter(([name]) => name === 'content-length');
    const encodings = headerList.filter(([name]) => name === 'transfer-encoding');
    if (lengths.length > 1 || (lengths.length > 0 && encodings.length > 0)) return { state: 'malformed', reason: 'ambiguous response framing' };
    const rest = data.subarray(offset);
    if (headRequest || status === 204 || status === 304) return { state: 'complete', response: { status, headers: headerList, body: Buffer.alloc(0) } };
    if (encodings.length > 0) {
      const body: Buffer[] = [];
      let at = 0;
      for (;;) {
        const lineEnd = rest.indexOf('\r\n', at);
        if (lineEnd < 0) return closed ? { state: 'malformed', reason: 'truncated chunked body' } : { state: 'incomplete' };
        const size = parseInt(rest.subarray(at, lineEnd).toString('latin1'), 16);
        if (!Number.isFinite(size)) return { state: 'malformed', reason: 'bad chunk size' };
        if (size === 0) return { state: 'complete', response: { status, headers: headerList, body: Buffer.concat(body) } };
        if (rest.length < lineEnd + 2 + size + 2) return closed ? { state: 'malformed', reason: 'truncated chunk' } : { state: 'incomplete' };
        body.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
    }
    if (lengths.length === 1) {
      const length = Number(lengths[0]![1]);
      if (!/^\d+$/.test(lengths[0]![1])) return { state: 'malformed', reason: 'bad content-length' };
      if (rest.length < length) return closed ? { state: 'malformed', reason: 'truncated body' } : { state: 'incomplete' };
      return { state: 'complete', response: { status, headers: headerList, body: rest.subarray(0, length) } };
    }
    return closed ? { state: 'complete', response: { status, headers: headerList, body: rest } } : { state: 'incomplete' };
  }
}

/** Sends a case on a fresh connection; resolves the parsed answer, or null when the gateway closed without one. */
function send(c: FuzzCase): Promise<{ response: ParsedResponse | null; malformed: string | null; hung: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(gateway.port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (result: { response: ParsedResponse | null; malformed: string | null; hung: boolean }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const check = (closed: boolean): void => {
      const data = Buffer.concat(chunks);
      if (closed && data.length === 0) return finish({ response: null, malformed: null, hung: false });
      const parsed = parseResponse(data, c.method === 'HEAD', closed);
      if (parsed.state === 'complete') finish({ response: parsed.response, malformed: null, hung: false });
      else if (parsed.state === 'malformed') finish({ response: null, malformed: parsed.reason, hung: false });
    };
    // Headers and request timeouts are 2 s: anything still open after 6 s is a hang.
    const timer = setTimeout(() => finish({ response: null, malformed: null, hung: true }), 6000);
    let answered = false;
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (!answered && c.after?.when === 'on-answer' && socket.writable) socket.write(c.after.bytes, 'latin1');
      answered = true;
      check(false);
    });
    socket.on('close', () => check(true));
    socket.on('error', () => undefined);
    socket.write(c.after?.when === 'with' ? Buffer.concat([encode(c), Buffer.from(c.after.bytes, 'latin1')]) : encode(c));
  });
}

const LEAK = /\bat [\w$.<>]+ \(|\bat (?:async )?\/|node_modules|\/work\/|\/src\/|\.ts:\d+|\.js:\d+|\bError: |TypeError|ReferenceError|ECONNREFUSED|stack/;

/**
 * Why an answer breaks the contract, or null. `forwarded`: the host received the request, so the answer
 * may be the host's own (e.g. its 404 to a WebSocket handshake), which only has to be well-formed.
 */
function violation(c: FuzzCase, response: ParsedResponse, forwarded: boolean): string | null {
  const header = (name: string): string | undefined => response.headers.find(([key]) => key === name)?.[1];
  const type = header('content-type') ?? '';
  const text = response.body.toString('utf8');
  const fromGateway = !forwarded || type.startsWith('application/problem+json');
  if (!fromGateway) return null;
  if (response.status >= 400) {
    if (!type.startsWith('application/problem+json')) return `${response.status} without problem+json (content-type ${JSON.stringify(type)})`;
    if (c.method !== 'HEAD') {
      let problem: { status?: unknown; code?: unknown; title?: unknown; type?: unknown };
      try {
        problem = JSON.parse(text) as typeof problem;
      } catch {
        return `${response.status} problem body is not JSON: ${JSON.stringify(text.slice(0, 200))}`;
      }
      if (problem.status !== response.status) return `problem status ${String(problem.status)} on a ${response.status} answer`;
      if (typeof problem.code !== 'string' || !problem.code.startsWith('IAM_')) return `problem without a code: ${text.slice(0, 200)}`;
      if (typeof problem.title !== 'string' || typeof problem.type !== 'string') return `problem without title/type: ${text.slice(0, 200)}`;
      // Hostile input is the client's fault, never the gateway's: no answer of it is an internal error.
      if (problem.code === 'IAM_INTERNAL_ERROR') return `500 IAM_INTERNAL_ERROR for ${c.method} ${c.target.slice(0, 100)}`;
    }
  }
  if (LEAK.test(text)) return `body leaks internals: ${JSON.stringify(text.slice(0, 300))}`;
  return null;
}

/** Why a request the host received was not one the policy allows for its caller, or null. */
async function unauthorizedAtHost(received: RecordedRequest): Promise<string | null> {
  const requestIds = recordedHeader(received, 'x-request-id');
  if (requestIds.length !== 1) return `${requestIds.length} X-Request-Id headers`;
  for (const name of ['x-iam-user-id', 'x-iam-identity-id', 'x-iam-identity-domain', 'x-iam-profile-id', 'x-iam-session-id', 'x-iam-permission']) {
    if (recordedHeader(received, name).length > 1) return `${name} sent more than once`;
  }
  for (let i = 0; i < received.rawHeaders.length; i += 2) {
    const name = received.rawHeaders[i]!.toLowerCase();
    if (name.includes('_')) return `header with "_" reached the host: ${name}`;
    if (['x-original-url', 'x-rewrite-url', 'x-middleware-subrequest', 'x-http-method-override', 'x-method-override', 'x-http-method', 'expect', 'proxy-authorization'].includes(name)) return `${name} reached the host`;
    if (name === 'authorization' && received.rawHeaders[i + 1]!.includes('iamt_')) return 'the gateway bearer token reached the host';
  }
  // What the host got must already be normal: normalizing it again changes nothing.
  const queryAt = received.url.indexOf('?');
  const rawPath = queryAt < 0 ? received.url : received.url.slice(0, queryAt);
  const again = normalizeRequestTarget(received.url, { allowPathParameters: false, host: undefined });
  if (!again.ok) return `the host got a target the gateway refuses: ${again.reason}`;
  if (again.path !== rawPath) return `the host got a path that is not normal: ${rawPath} (normal: ${again.path})`;
  // The caller is whoever the gateway's identity headers name, and the policy must allow exactly this.
  const sessionIds = recordedHeader(received, 'x-iam-session-id');
  let subject: { principal: IamPrincipal; clientType: string } | null = null;
  if (sessionIds.length === 1) {
    subject = sessions.get(sessionIds[0]!) ?? null;
    if (!subject) return `unknown session ${sessionIds[0]}`;
    if (recordedHeader(received, 'x-iam-user-id')[0] !== subject.principal.userId) return 'X-IAM-User-Id does not match the session';
  } else if (recordedHeader(received, 'x-iam-user-id').length > 0) {
    return 'identity headers without a session';
  }
  const policy = gateway.services!.policy.current;
  const match = policy.match(received.method, again.path);
  if (!match) return `no route matches ${received.method} ${again.path}`;
  if (match.route.public) return null;
  if (!subject) return `${received.method} ${again.path} needs a session, the host got none`;
  const decision = await gateway.services!.engine.decideRequest({ method: received.method, path: again.path, policy, subject });
  return decision.allowed ? null : `${received.method} ${again.path} is denied for ${subject.principal.userId} (${decision.failedStep ?? '?'})`;
}

it(`answers ${CASES} random hostile requests with well-formed HTTP, no leaks, and nothing unauthorized reaches the host (seed ${SEED})`, async () => {
  await upstream.clear();
  /** X-Request-Id of every request the gateway forwarded for a case. */
  const forwardedIds = new Set<string>();
  const statuses = new Map<number | string, number>();
  let lastSeq = 0;
  await fc.assert(
    fc.asyncProperty(fuzzCase, async (c) => {
      const { response, malformed, hung } = await send(c);
      if (hung) throw new Error('no answer and the connection stayed open: the client hangs');
      if (malformed) throw new Error(`malformed answer: ${malformed}`);
      const key = response?.status ?? 'closed';
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      // What reached the host for this case: at most the one request that was sent, and only as authorized.
      const fresh = (await upstream.requests()).filter((r) => r.seq > lastSeq);
      lastSeq = Math.max(lastSeq, ...fresh.map((r) => r.seq));
      if (fresh.length > 1) throw new Error(`one request in, ${fresh.length} requests reached the host: ${fresh.map((r) => `${r.method} ${r.url}`).join(', ')}`);
      for (const received of fresh) {
        const problem = await unauthorizedAtHost(received);
        if (problem) throw new Error(`the host received ${received.method} ${received.url}: ${problem}`);
        forwardedIds.add(recordedHeader(received, 'x-request-id')[0]!);
      }
      if (!response) throw new Error('the gateway closed the connection without an answer');
      const problem = violation(c, response, fresh.length > 0);
      if (problem) throw new Error(problem);
    }),
    { numRuns: CASES, seed: SEED, interruptAfterTimeLimit: 45_000, markInterruptAsFailure: false },
  );
  console.log(`fuzz: seed ${SEED}, answers ${JSON.stringify(Object.fromEntries(statuses))}, forwarded ${forwardedIds.size}`);

  // Late arrivals (a request smuggled inside a body would reach the host after its carrier was answered).
  await new Promise((resolve) => setTimeout(resolve, 200));
  const late = (await upstream.requests()).filter((r) => r.seq > lastSeq || !forwardedIds.has(recordedHeader(r, 'x-request-id')[0] ?? ''));
  expect(late.map((r) => `${r.method} ${r.url}`)).toEqual([]);
  // The run exercised both outcomes: requests were forwarded, and requests were refused.
  expect(forwardedIds.size).toBeGreaterThan(0);
  expect([...statuses.keys()].some((status) => typeof status === 'number' && status >= 400)).toBe(true);
  // The gateway is still healthy afterwards.
  expect((await fetch(`${gateway.url}/health`)).status).toBe(200);
}, 60_000);

/** All bytes a connection receives until the server closes it (or `waitMs`). */
function readUntilClose(bytes: string, waitMs = 5000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(gateway.port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    socket.write(bytes);
  });
}

// Found by the property above (seed 15): the 400 for bytes that follow a complete request on the same
// connection was written ahead of that request's own answer, so the client took the 400 for its request
// while the host had run it.
describe('a complete request followed by unparsable bytes on the same connection', () => {
  it.each([
    ['GET /health', 'GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n'],
    ['an empty chunked body terminated twice', 'GET /health HTTP/1.1\r\nHost: gateway\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
  ])('answers %s first, in order, then refuses the rest and closes', async (_name, request) => {
    await upstream.clear();
    const text = await readUntilClose(`${request}0\r\n\r\n`);
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    expect(await upstream.requests()).toHaveLength(1);
    // RFC 9112 §9.3.2: responses in the order of the requests. The first answer is the forwarded one.
    expect(statuses[0]).toBe(200);
    expect(statuses.slice(1).every((status) => status === 400)).toBe(true);
  });
});
