/**
 * Lists filtered by the gateway (policy `filter`, docs/policy-format.md) in front of a real third-party REST host
 * (json-server): a user scoped to project 1 gets 403 on `/projects/2`, and `GET /projects` must not show it either.
 * The gateway plans the caller's ids of the filter's type with the route's permission: `ALL` streams the host's answer
 * untouched; `SOME`/`NONE` read it (uncompressed, bounded), keep the covered elements and send them with their own
 * Content-Length and without the headers that describe the host's whole body. An answer that cannot be filtered is
 * 502 IAM_FILTER_FAILED, never the unfiltered body.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { DestinationStream } from 'pino';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { SAMPLE_DATA, startJsonServer, type JsonServerHost } from '../support/json-server-host';
import { until } from '../support/wait';

const FILTERED_ROUTES = `version: 1
default: deny
routes:
  - path: /projects
    methods: [GET]
    permission: project:list
    filter: { type: PROJECT, id: /id }
  - path: /projects/:id
    methods: [GET]
    permission: project:read
    resource: { type: PROJECT, id: id, access: READ }
  - path: /tasks
    methods: [GET]
    permission: task:read
    filter: { type: PROJECT, id: /projectId }
`;

/** The answers a host may give that the gateway must refuse to filter, and two it must filter. */
const ODD_ROUTES = `version: 1
default: deny
routes:
  - path: /odd
    permission: project:list
    routes:
      - { path: /:kind, methods: [GET], filter: { type: PROJECT, id: /id } }
  - path: /envelope
    methods: [GET]
    permission: project:list
    filter: { type: PROJECT, id: /id, items: /data }
`;

/**
 * The sample projects and tasks, each project with a long description: json-server compresses answers above 1 KiB
 * only, and the list must be one it compresses when asked.
 */
const DATA = { ...SAMPLE_DATA, projects: SAMPLE_DATA.projects.map((project) => ({ ...project, description: `${project.name} `.repeat(80) })) };
const PROJECT_1 = DATA.projects[0];

const PROJECTS = [
  { id: 1, name: 'Apollo' },
  { id: 2, name: 'Gemini' },
];

/** A small host answering the shapes json-server never sends. */
function oddHost(): Server {
  return createServer((req, res) => {
    const kind = req.url!.split('?')[0];
    if (kind === '/odd/not-json') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<ul><li>Apollo</li><li>Gemini</li></ul>');
    if (kind === '/odd/bad-json') return void res.writeHead(200, { 'content-type': 'application/json' }).end('[{"id":1,"name":"Apollo"},');
    if (kind === '/odd/object') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ 1: PROJECTS[0], 2: PROJECTS[1] }));
    // Compressed whatever the request asked for.
    if (kind === '/odd/gzip') return void res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(gzipSync(JSON.stringify(PROJECTS)));
    // Above the 1 KiB bound: announced by its length, or streamed without one.
    const big = JSON.stringify(Array.from({ length: 100 }, (_, id) => ({ id, name: `project ${id}` })));
    if (kind === '/odd/big') return void res.writeHead(200, { 'content-type': 'application/json' }).end(big);
    if (kind === '/odd/big-chunked') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(big.slice(0, 600));
      return void res.end(big.slice(600));
    }
    // Within the bound, chunked: read whole and filtered.
    if (kind === '/odd/chunked') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.write('[{"id":1,"name":"Apollo"},');
      return void res.end('{"id":2,"name":"Gemini"}]');
    }
    if (kind === '/odd/missing') return void res.writeHead(404, { 'content-type': 'text/plain', etag: '"e"' }).end('no such list');
    if (kind === '/envelope') return void res.writeHead(200, { 'content-type': 'application/json', etag: '"whole"' }).end(JSON.stringify({ data: PROJECTS, page: 1 }));
    res.writeHead(500).end();
  });
}

function capture(): { destination: DestinationStream; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  return {
    destination: { write: (chunk: string) => void (text += chunk) },
    lines: () =>
      text
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

let dir: string;
let oddDir: string;
let host: JsonServerHost;
let odd: Server;
let gateway: RunningGateway;
let oddGateway: RunningGateway;
const log = capture();
let alice: string;
let bob: string;

beforeAll(async () => {
  await (await createTestDatabase()).close();
  dir = await mkdtemp(join(tmpdir(), 'iam-filtered-lists-'));
  await writeFile(join(dir, 'lists.yaml'), FILTERED_ROUTES);
  oddDir = await mkdtemp(join(tmpdir(), 'iam-filtered-odd-'));
  await writeFile(join(oddDir, 'odd.yaml'), ODD_ROUTES);
  host = await startJsonServer(DATA);
  odd = oddHost();
  await new Promise<void>((resolve) => odd.listen(0, '127.0.0.1', resolve));
  gateway = await startTestGateway(host.origin, { IAM_POLICIES_DIR: dir, IAM_ACCESS_LOG: 'all' }, { accessLogDestination: log.destination });
  oddGateway = await startTestGateway(`http://127.0.0.1:${(odd.address() as AddressInfo).port}`, { IAM_POLICIES_DIR: oddDir, UPSTREAM_FILTER_MAX_BYTES: '1kb' });
  // Alice's WEB profile is scoped to project 1; Bob's is unscoped.
  alice = (await login(gateway.url, 'alice')).accessToken;
  bob = (await login(gateway.url, 'bob')).accessToken;
});

afterAll(async () => {
  await gateway?.close();
  await oddGateway?.close();
  await host?.close();
  await new Promise((resolve) => odd?.close(resolve));
  await rm(dir, { recursive: true, force: true });
  await rm(oddDir, { recursive: true, force: true });
});

const get = (path: string, token: string, headers: Record<string, string> = {}, method = 'GET') => fetch(`${gateway.url}${path}`, { method, headers: { ...bearer(token), ...headers } });

describe('a list the gateway filters for a scoped user', () => {
  it('GET /projects shows only project 1, with a Content-Length that matches and no X-Total-Count or ETag', async () => {
    expect((await get('/projects/2', alice)).status).toBe(403);
    const answer = await get('/projects', alice);
    expect(answer.status).toBe(200);
    const body = Buffer.from(await answer.arrayBuffer());
    expect(JSON.parse(body.toString())).toEqual([PROJECT_1]);
    expect(Number(answer.headers.get('content-length'))).toBe(body.length);
    expect(answer.headers.get('x-total-count')).toBeNull();
    expect(answer.headers.get('etag')).toBeNull();
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('records what the filter kept and removed in the access log line', async () => {
    const answer = await get('/projects', alice);
    await answer.arrayBuffer();
    const requestId = answer.headers.get('x-request-id');
    const line = await until('the access line of the filtered request', () => log.lines().find((entry) => entry.requestId === requestId) ?? null, { within: 10_000, every: 20 });
    expect(line).toMatchObject({ status: 200, decision: 'allow', route: '/projects', filtered: { kept: 1, removed: 2 } });
  });

  it('/projects?id=2 is an empty list', async () => {
    const answer = await get('/projects?id=2', alice);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual([]);
  });

  it('/tasks is filtered by each task\'s projectId as a PROJECT: tasks 1 and 2', async () => {
    const answer = await get('/tasks', alice);
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as Array<{ id: number }>).map((task) => task.id)).toEqual([1, 2]);
  });

  it('a page shrinks to what the user may see; the host\'s Link to the next page stays, its total goes', async () => {
    const direct = await fetch(`${host.origin}/projects?_page=1&_limit=2`);
    expect(direct.headers.get('x-total-count')).toBe('3');
    const answer = await get('/projects?_page=1&_limit=2', alice);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual([PROJECT_1]);
    expect(answer.headers.get('link')).toBe(direct.headers.get('link'));
    expect(answer.headers.get('link')).toContain('_page=2');
    expect(answer.headers.get('x-total-count')).toBeNull();
    const second = await get('/projects?_page=2&_limit=2', alice);
    expect(await second.json()).toEqual([]);
  });

  it('a client asking for gzip is no problem: the gateway asks the host for identity and answers uncompressed', async () => {
    const direct = await fetch(`${host.origin}/projects`, { headers: { 'accept-encoding': 'gzip' } });
    expect(direct.headers.get('content-encoding')).toBe('gzip');
    await direct.arrayBuffer();
    const answer = await get('/projects', alice, { 'accept-encoding': 'gzip' });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-encoding')).toBeNull();
    expect(await answer.json()).toEqual([PROJECT_1]);
  });

  it('HEAD has the headers of the filtered GET', async () => {
    const got = await get('/projects', alice);
    await got.arrayBuffer();
    const head = await get('/projects', alice, {}, 'HEAD');
    expect(head.status).toBe(got.status);
    // Everything but the date, the request's own id and how Node keeps the connection (it closes after a HEAD).
    const comparable = (headers: Headers) => Object.fromEntries([...headers].filter(([name]) => !['date', 'x-request-id', 'connection', 'keep-alive'].includes(name)));
    expect(comparable(head.headers)).toEqual(comparable(got.headers));
    expect(head.headers.get('content-length')).toBe(got.headers.get('content-length'));
    expect((await head.arrayBuffer()).byteLength).toBe(0);
  });
});

describe('an unscoped user, and one without the permission', () => {
  it('an unscoped user gets the host\'s own answer, byte for byte, with its ETag and total', async () => {
    for (const path of ['/projects', '/tasks', '/projects?_page=1&_limit=2']) {
      const direct = await fetch(`${host.origin}${path}`, { headers: { 'accept-encoding': 'identity' } });
      const answer = await get(path, bob, { 'accept-encoding': 'identity' });
      expect(answer.status).toBe(200);
      expect(Buffer.from(await answer.arrayBuffer()).equals(Buffer.from(await direct.arrayBuffer()))).toBe(true);
      expect(answer.headers.get('etag')).toBe(direct.headers.get('etag'));
      expect(answer.headers.get('etag')).not.toBeNull();
      expect(answer.headers.get('x-total-count')).toBe(direct.headers.get('x-total-count'));
    }
    // Compressed as the host compresses it: nothing is read on the way.
    const zipped = await get('/projects', bob, { 'accept-encoding': 'gzip' });
    expect(zipped.headers.get('content-encoding')).toBe('gzip');
    expect(await zipped.json()).toHaveLength(3);
  });

  it('a user without the route\'s permission gets 403 as before', async () => {
    const admin = (await login(gateway.url, 'admin')).accessToken;
    const switched = await fetch(`${gateway.url}/iam/authorization/profiles/p-admin-operator/switch`, { method: 'POST', headers: bearer(admin) });
    expect(switched.status).toBe(200);
    const operator = ((await switched.json()) as { accessToken: string }).accessToken;
    const answer = await get('/tasks', operator);
    expect(answer.status).toBe(403);
    expect(await answer.json()).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'PERMISSION_DENIED' });
  });
});

describe('paths that cannot filter refuse instead', () => {
  it('a forward-auth check of a filtered route answers 200 for a plan of ALL only', async () => {
    const check = (token: string) => fetch(`${gateway.url}/iam/authorization/forward-auth`, { headers: { ...bearer(token), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/projects' } });
    const scoped = await check(alice);
    expect(scoped.status).toBe(502);
    expect(await scoped.json()).toMatchObject({ code: 'IAM_FILTER_FAILED' });
    expect((await check(bob)).status).toBe(200);
  });

  it('a WebSocket handshake on a filtered route is refused', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const socket = connect(gateway.port, '127.0.0.1');
      let data = '';
      socket.on('connect', () =>
        socket.write(
          ['GET /projects HTTP/1.1', 'Host: gw.test', 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13', `Authorization: Bearer ${alice}`, '', ''].join('\r\n'),
        ),
      );
      socket.on('data', (chunk: Buffer) => {
        data += chunk.toString('latin1');
        if (data.includes('\r\n')) {
          socket.destroy();
          resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0));
        }
      });
      socket.on('error', reject);
    });
    expect(status).toBe(502);
  });
});

describe('answers that cannot be filtered', () => {
  let token: string;
  beforeAll(async () => {
    token = (await login(oddGateway.url, 'alice')).accessToken;
  });
  const oddGet = (path: string, method = 'GET') => fetch(`${oddGateway.url}${path}`, { method, headers: bearer(token) });

  it.each(['not-json', 'bad-json', 'object', 'gzip', 'big', 'big-chunked'])('/odd/%s: 502 IAM_FILTER_FAILED, never the host\'s body', async (kind) => {
    const answer = await oddGet(`/odd/${kind}`);
    expect(answer.status).toBe(502);
    expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const text = await answer.text();
    expect(JSON.parse(text)).toMatchObject({ code: 'IAM_FILTER_FAILED', status: 502 });
    expect(text).not.toMatch(/Gemini|project 2"/);
    // HEAD answers as GET does.
    expect((await oddGet(`/odd/${kind}`, 'HEAD')).status).toBe(502);
  });

  it('a chunked answer within the bound is read whole and filtered', async () => {
    const answer = await oddGet('/odd/chunked');
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual([{ id: 1, name: 'Apollo' }]);
  });

  it('an envelope: the array at items is filtered, the rest stays', async () => {
    const answer = await oddGet('/envelope');
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ data: [{ id: 1, name: 'Apollo' }], page: 1 });
    expect(answer.headers.get('etag')).toBeNull();
  });

  it('a non-2xx answer passes as the host sent it', async () => {
    const answer = await oddGet('/odd/missing');
    expect(answer.status).toBe(404);
    expect(answer.headers.get('etag')).toBe('"e"');
    expect(await answer.text()).toBe('no such list');
  });
});
