/**
 * `/favicon.ico` and `/robots.txt` (docs/http-contract.md): under `default: deny`, a `GET`/`HEAD` of exactly these
 * paths that no route declares is answered by the gateway itself (204; 200 `Disallow: /`), never forwarded, never
 * audited and not in the access log as a denial; a route that matches decides as usual, and so does `default: allow`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { startTestGateway } from '../support/gateway';
import { until } from '../support/wait';
import { E2E_POLICIES } from '../support/gateway-fixture';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

/** `default: deny`, a public route for the favicon only (robots.txt stays undeclared). */
const FAVICON_DECLARED = `version: 1
default: deny
routes:
  - { path: /health, methods: [GET], public: true }
  - { path: /favicon.ico, methods: [GET], public: true }
`;
/** `default: deny`, and a `/**` that reaches every GET path: the favicon and robots.txt included. */
const WILDCARD = `version: 1
default: deny
routes:
  - { path: /**, methods: [GET], permission: project:read }
`;
const DEFAULT_ALLOW = `version: 1
default: allow
routes:
  - { path: /health, methods: [GET], public: true }
`;

/** A pino destination keeping every line written. */
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

let dirs: string[] = [];
let db: TestDatabase;
let upstream: RecordingUpstream;
/** The shared e2e policies (`default: deny`, no favicon or robots route), `iam.access-log: denied`. */
let denyAll: RunningGateway;
const denyLog = capture();
/** {@link FAVICON_DECLARED}, `iam.access-log: all`. */
let declared: RunningGateway;
const allLog = capture();
let wildcard: RunningGateway;
let allowAll: RunningGateway;

function policyDir(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'iam-well-known-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'routes.yaml'), text);
  return dir;
}

beforeAll(async () => {
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
  denyAll = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_ACCESS_LOG: 'denied' }, { accessLogDestination: denyLog.destination });
  declared = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: policyDir(FAVICON_DECLARED), IAM_ACCESS_LOG: 'all' }, { accessLogDestination: allLog.destination });
  wildcard = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: policyDir(WILDCARD) });
  allowAll = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: policyDir(DEFAULT_ALLOW) });
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([denyAll?.close(), declared?.close(), wildcard?.close(), allowAll?.close()]);
  await upstream?.close();
  await db?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs = [];
});

beforeEach(() => upstream.clear());

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  requestId: string;
}

/** Sends the exact request target given (no client-side normalization). */
function send(gateway: RunningGateway, method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: gateway.port, method, path, headers, agent: false }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data, requestId: String(res.headers['x-request-id']) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The audit rows of these requests, once the trail wrote what it holds. */
async function auditRows(gateway: RunningGateway, requestIds: string[]): Promise<Array<{ action: string; request_id: string }>> {
  await gateway.services!.audit.flush();
  return db.orm.em.fork().execute<Array<{ action: string; request_id: string }>>('select action, request_id from iam_audit_events where request_id in (?)', [requestIds]);
}

/** Waits until the access log has a line for `requestId` (lines are written in batches, in order). */
async function lineFor(log: ReturnType<typeof capture>, requestId: string): Promise<Record<string, unknown>> {
  return until(`an access-log line for ${requestId}`, () => log.lines().find((line) => line.requestId === requestId), { every: 20 });
}

describe('under default: deny, with no route for them', () => {
  it('GET and HEAD /favicon.ico are 204 with a day of caching; GET and HEAD /robots.txt are 200 Disallow: /', async () => {
    for (const method of ['GET', 'HEAD']) {
      const favicon = await send(denyAll, method, '/favicon.ico', { accept: 'image/avif,image/webp,*/*' });
      expect(favicon.status).toBe(204);
      expect(favicon.headers['cache-control']).toBe('public, max-age=86400');
      expect(favicon.headers['content-type']).toBeUndefined();
      expect(favicon.body).toBe('');
      expect(favicon.requestId).toMatch(/^[0-9a-f-]{36}$/);

      const robots = await send(denyAll, method, '/robots.txt');
      expect(robots.status).toBe(200);
      expect(robots.headers['cache-control']).toBe('public, max-age=86400');
      expect(robots.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(robots.headers['content-length']).toBe('26');
      expect(robots.body).toBe(method === 'HEAD' ? '' : 'User-agent: *\nDisallow: /\n');
    }
    expect(await upstream.requests()).toEqual([]);
  });

  it('the path is the normalized one, compared exactly; a query is ignored', async () => {
    expect((await send(denyAll, 'GET', '/./favicon.ico')).status).toBe(204);
    expect((await send(denyAll, 'GET', '//robots.txt?x=1')).status).toBe(200);
    expect((await send(denyAll, 'GET', '/assets/../%66avicon.ico')).status).toBe(204);
    // Not these paths: the policy's default denies them as before.
    for (const path of ['/favicon.ico/', '/Favicon.ico', '/favicon.ico.bak', '/static/favicon.ico', '/robots.txt/x']) {
      expect([path, (await send(denyAll, 'GET', path)).status]).toEqual([path, 403]);
    }
    expect(await upstream.requests()).toEqual([]);
  });

  it('other methods keep their denial', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS']) {
      const answer = await send(denyAll, method, '/favicon.ico');
      expect([method, answer.status]).toEqual([method, 403]);
      expect(answer.headers['content-type']).toBe('application/problem+json');
    }
    expect((await send(denyAll, 'POST', '/robots.txt')).status).toBe(403);
    expect(await upstream.requests()).toEqual([]);
  });

  it('writes no audit event and no access-log line (iam.access-log: denied), where a denial writes both', async () => {
    const favicon = await send(denyAll, 'GET', '/favicon.ico', { accept: 'image/*' });
    const robots = await send(denyAll, 'HEAD', '/robots.txt');
    // The control: a denied request, sent after them, has its row and its line.
    const denied = await send(denyAll, 'GET', '/favicon.png');
    expect(denied.status).toBe(403);
    expect((await lineFor(denyLog, denied.requestId)).decision).toBe('deny');
    const logged = new Set(denyLog.lines().map((line) => line.requestId));
    expect(logged.has(favicon.requestId)).toBe(false);
    expect(logged.has(robots.requestId)).toBe(false);
    expect(await auditRows(denyAll, [favicon.requestId, robots.requestId, denied.requestId])).toEqual([{ action: 'authz.deny', request_id: denied.requestId }]);
  });
});

describe('when the policy decides', () => {
  it('a route that matches /favicon.ico forwards it to the host', async () => {
    for (const method of ['GET', 'HEAD']) {
      const answer = await send(declared, method, '/favicon.ico');
      expect(answer.status).toBe(200);
      expect(answer.headers['content-type']).toBe('application/json');
    }
    const seen = await upstream.requests();
    expect(seen.map((request) => [request.method, request.url])).toEqual([
      ['GET', '/favicon.ico'],
      ['HEAD', '/favicon.ico'],
    ]);
  });

  it('the same policy leaves /robots.txt to the gateway; with iam.access-log: all its line says decision none', async () => {
    const robots = await send(declared, 'GET', '/robots.txt');
    expect(robots.status).toBe(200);
    expect(robots.body).toBe('User-agent: *\nDisallow: /\n');
    expect(await upstream.requests()).toEqual([]);
    expect(await lineFor(allLog, robots.requestId)).toMatchObject({ method: 'GET', path: '/robots.txt', route: null, status: 200, decision: 'none', decisionId: null, bytes: 26 });
    expect(await auditRows(declared, [robots.requestId])).toEqual([]);
  });

  it('a pattern such as /** matches them too: its decision applies (401 without a session)', async () => {
    for (const path of ['/favicon.ico', '/robots.txt']) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await send(wildcard, method, path);
        expect([method, path, answer.status]).toEqual([method, path, 401]);
      }
    }
    expect(await upstream.requests()).toEqual([]);
  });

  it('default: allow lets the host answer them, as before', async () => {
    for (const path of ['/favicon.ico', '/robots.txt']) {
      const answer = await send(allowAll, 'GET', path);
      expect([path, answer.status]).toEqual([path, 200]);
      expect(answer.headers['content-type']).toBe('application/json');
    }
    expect((await upstream.requests()).map((request) => request.url)).toEqual(['/favicon.ico', '/robots.txt']);
  });
});
