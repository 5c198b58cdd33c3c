import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ResourceResolverClient } from '../../src/authz/resource-resolver';
import { resolverUrl } from '../../src/authz/resource-url';
import { createMetrics } from '../../src/observability/metrics';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';

/** A real host resolver: answers per path, records every request path it saw. */
function startHost(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; base: string; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(req.url ?? '');
    handler(req, res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen })));
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/**
 * "Answered, not hung": a generous upper bound for a call to a resolver that never answers (50x the 200 ms timeout
 * configured below, far above a loaded machine's latency); it only turns a call that waits forever into a failure.
 */
const ANSWERED_NOT_HUNG_MS = 10_000;

describe('ResourceResolverClient (real HTTP)', () => {
  let host: Awaited<ReturnType<typeof startHost>>;
  let client: ResourceResolverClient;
  const pending: ServerResponse[] = [];

  beforeAll(async () => {
    host = await startHost((req, res) => {
      const id = decodeURIComponent((req.url ?? '').split('/').pop() ?? '');
      if (id === 'task-7') return json(res, 200, { scopes: [{ type: 'PROJECT', id: '7' }, { type: 'TEAM', id: 3 }] });
      if (id === 'empty') return json(res, 200, { scopes: [] });
      if (id === 'bare') return json(res, 200, {});
      if (id === 'garbage') return json(res, 200, '{not json');
      if (id === 'bad-shape') return json(res, 200, { scopes: [{ type: 'PROJECT' }] });
      if (id === 'missing') return json(res, 404, { error: 'no such thing' });
      if (id === 'broken') return json(res, 500, { error: 'boom' });
      if (id === 'slow') return void pending.push(res); // never answers in time
      if (id === 'a b/c') return json(res, 200, { scopes: [{ type: 'DOC', id: 'a b/c' }] });
      return json(res, 404, {});
    });
    client = new ResourceResolverClient();
  });

  afterAll(async () => {
    for (const res of pending) res.destroy();
    await client.close();
    await new Promise((resolve) => host.server.close(resolve));
  });

  const config = (timeoutMs = 2000) => ({ url: `${host.base}/internal/resources/{id}`, timeoutMs });

  it('returns the scopes of a 200 answer (numeric ids as strings)', async () => {
    expect(await client.resolve(config(), 'TASK', 'task-7')).toEqual({
      kind: 'found',
      scopeRefs: [
        { type: 'PROJECT', id: '7' },
        { type: 'TEAM', id: '3' },
      ],
    });
  });

  it.each(['empty', 'bare'])('treats a 200 without scopes (%s) as the resource itself', async (id) => {
    expect(await client.resolve(config(), 'PROJECT', id)).toEqual({ kind: 'found', scopeRefs: [{ type: 'PROJECT', id }] });
  });

  it.each(['garbage', 'bad-shape'])('treats a malformed 200 body (%s) as unavailable', async (id) => {
    const result = await client.resolve(config(), 'PROJECT', id);
    expect(result.kind).toBe('unavailable');
  });

  it('maps 404 to not-found', async () => {
    expect(await client.resolve(config(), 'PROJECT', 'missing')).toEqual({ kind: 'not-found' });
  });

  it('maps 500 to unavailable, naming the status but not the URL', async () => {
    const result = await client.resolve(config(), 'PROJECT', 'broken');
    expect(result).toEqual({ kind: 'unavailable', reason: expect.stringContaining('HTTP 500') });
    expect(JSON.stringify(result)).not.toContain('127.0.0.1');
  });

  it('gives up on a slow resolver after its timeout', async () => {
    const started = Date.now();
    const result = await client.resolve(config(200), 'PROJECT', 'slow');
    // The reason proves the timeout path; the resolver never answers, so only the timeout can end the call.
    expect(result).toEqual({ kind: 'unavailable', reason: expect.stringContaining('timed out') });
    const tookMs = Date.now() - started;
    expect(tookMs).toBeGreaterThanOrEqual(190); // it waited for its 200 ms timeout (a lower bound holds under load)
    expect(tookMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);
  });

  it('reports a closed port as unavailable', async () => {
    const closed = await startHost(() => undefined);
    const port = (closed.server.address() as AddressInfo).port;
    await new Promise((resolve) => closed.server.close(resolve));
    const result = await client.resolve({ url: `http://127.0.0.1:${port}/r/{id}`, timeoutMs: 1000 }, 'PROJECT', '1');
    expect(result).toEqual({ kind: 'unavailable', reason: expect.stringContaining('unreachable') });
  });

  it('decodes the path id once and re-encodes it, so it cannot change the resolver path', async () => {
    host.seen.length = 0;
    const result = await client.resolve(config(), 'DOC', 'a%20b%2Fc');
    expect(host.seen).toEqual(['/internal/resources/a%20b%2Fc']);
    expect(result).toEqual({ kind: 'found', scopeRefs: [{ type: 'DOC', id: 'a b/c' }] });
    host.seen.length = 0;
    await client.resolve(config(), 'DOC', '../../admin?x=1');
    expect(host.seen).toEqual(['/internal/resources/..%2F..%2Fadmin%3Fx%3D1']);
  });

  it.each(['..', '.', '%2e%2e', '.%2E', '%2e', ''])('#11.13: never sends id %j (a dot segment would reach another resolver URL): not-found, no request', async (id) => {
    host.seen.length = 0;
    expect(await client.resolve(config(), 'DOC', id)).toEqual({ kind: 'not-found' });
    expect(host.seen).toEqual([]);
  });

  it('counts every call in iam_resolver_requests_total{type, result} and times each request sent in iam_resolver_duration_seconds{type}', async () => {
    const metrics = createMetrics({ collectDefaults: false });
    const counted = new ResourceResolverClient({ metrics });
    try {
      const count = async (type: string, result: string): Promise<number> =>
        (await metrics.resolverRequests.get()).values.find((v) => v.labels.type === type && v.labels.result === result)?.value ?? 0;
      const timed = async (type: string): Promise<number> =>
        (await metrics.resolverDuration.get()).values.find((v) => v.metricName === 'iam_resolver_duration_seconds_count' && v.labels.type === type)?.value ?? 0;
      await counted.resolve(config(), 'TASK', 'task-7');
      await counted.resolve(config(), 'TASK', 'missing');
      await counted.resolve(config(), 'TASK', 'broken'); // HTTP 500
      await counted.resolve(config(), 'TASK', 'garbage'); // a malformed 200
      await counted.resolve(config(200), 'TASK', 'slow');
      await counted.resolve(config(), 'DOC', '..'); // cannot name a resource: not found, no request
      expect(await count('TASK', 'ok')).toBe(1);
      expect(await count('TASK', 'not_found')).toBe(1);
      expect(await count('TASK', 'error')).toBe(2);
      expect(await count('TASK', 'timeout')).toBe(1);
      expect(await count('DOC', 'not_found')).toBe(1);
      expect(await timed('TASK')).toBe(5);
      expect(await timed('DOC')).toBe(0);
      const sum = (await metrics.resolverDuration.get()).values.find((v) => v.metricName === 'iam_resolver_duration_seconds_sum' && v.labels.type === 'TASK')!.value;
      expect(sum).toBeGreaterThanOrEqual(0.2); // the timed-out request alone waited 200 ms
      // Seconds, not ms: in ms the timed-out request alone would count 200; no load makes this test run 100 s.
      expect(sum).toBeLessThan(100);
      // A closed port is an error, not a timeout.
      const closed = await startHost(() => undefined);
      const port = (closed.server.address() as AddressInfo).port;
      await new Promise((resolve) => closed.server.close(resolve));
      await counted.resolve({ url: `http://127.0.0.1:${port}/r/{id}`, timeoutMs: 1000 }, 'GONE', '1');
      expect(await count('GONE', 'error')).toBe(1);
      expect(await count('GONE', 'timeout')).toBe(0);
    } finally {
      await counted.close();
    }
  });

  it('keeps working after many error answers (bodies are released)', async () => {
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => client.resolve(config(), 'PROJECT', i % 2 ? 'broken' : 'missing')));
    expect(results.filter((r) => r.kind === 'not-found')).toHaveLength(50);
    expect(await client.resolve(config(), 'TASK', 'task-7')).toMatchObject({ kind: 'found' });
  });
});

describe("ResourceResolverClient reading the host's own representation (real HTTP)", () => {
  let host: Awaited<ReturnType<typeof startHost>>;
  let client: ResourceResolverClient;

  beforeAll(async () => {
    host = await startHost((req, res) => {
      const id = decodeURIComponent((req.url ?? '').split('/').pop() ?? '');
      if (id === '3') return json(res, 200, { id: 3, projectId: 2, title: 'Dock' });
      if (id === 'many') return json(res, 200, { id: 'many', projectIds: [1, '2'] });
      if (id === 'orphan') return json(res, 200, { id: 'orphan', projectId: null });
      if (id === 'page') return void (res.writeHead(200, { 'content-type': 'text/html' }), res.end('<html>sign in</html>'));
      if (id === 'broken') return json(res, 500, { projectId: 1 });
      if (id === 'moved') return void (res.writeHead(302, { location: '/elsewhere' }), res.end());
      return json(res, 404, {});
    });
    client = new ResourceResolverClient();
  });

  afterAll(async () => {
    await client.close();
    await new Promise((resolve) => host.server.close(resolve));
  });

  const byProject = () => compilePolicyFiles([{ file: 'p.yaml', text: `version: 1\nresources:\n  TASK: { resolver: { url: "${host.base}/tasks/{id}", scopes: [{ type: PROJECT, id: /projectId }, { type: PROJECT, id: /projectIds }] } }\n` }]);
  const self = () => compilePolicyFiles([{ file: 'p.yaml', text: `version: 1\nresources:\n  PROJECT: { resolver: { url: "${host.base}/tasks/{id}", self: true } }\n` }]);
  const pointers = () => byProject().policy!.resources.TASK!.resolver!;
  const itself = () => self().policy!.resources.PROJECT!.resolver!;
  const onlyProjectId = () => ({ ...pointers(), answer: { kind: 'pointers' as const, scopes: [{ type: 'PROJECT', pointer: '/projectId', tokens: ['projectId'] }] } });

  it('maps the answer with its pointers; self names the resource', async () => {
    expect(await client.resolve(onlyProjectId(), 'TASK', '3')).toEqual({ kind: 'found', scopeRefs: [{ type: 'PROJECT', id: '2' }] });
    expect(await client.resolve(itself(), 'PROJECT', '3')).toEqual({ kind: 'found', scopeRefs: [{ type: 'PROJECT', id: '3' }] });
    expect(await client.resolve({ ...onlyProjectId(), answer: { kind: 'pointers', scopes: [{ type: 'PROJECT', pointer: '/projectIds', tokens: ['projectIds'] }] } }, 'TASK', 'many')).toEqual({
      kind: 'found',
      scopeRefs: [
        { type: 'PROJECT', id: '1' },
        { type: 'PROJECT', id: '2' },
      ],
    });
  });

  it('404 is not found, with pointers and with self', async () => {
    expect(await client.resolve(pointers(), 'TASK', '99')).toEqual({ kind: 'not-found' });
    expect(await client.resolve(itself(), 'PROJECT', '99')).toEqual({ kind: 'not-found' });
  });

  it('a missing pointer, a null value, a page that is not JSON, a 500 or a redirect are unavailable (502), without a value of the answer', async () => {
    // Task 3 has projectId but no projectIds: the second entry names nothing.
    expect(await client.resolve(pointers(), 'TASK', '3')).toEqual({ kind: 'unavailable', reason: 'resolver for TASK answered no value at "/projectIds"' });
    expect(await client.resolve(onlyProjectId(), 'TASK', 'orphan')).toEqual({ kind: 'unavailable', reason: 'resolver for TASK answered a value at "/projectId" that is not a string or an integer' });
    for (const resolver of [onlyProjectId(), itself()]) {
      expect(await client.resolve(resolver, 'TASK', 'page')).toEqual({ kind: 'unavailable', reason: 'resolver for TASK answered a body that is not JSON' });
      expect(await client.resolve(resolver, 'TASK', 'broken')).toEqual({ kind: 'unavailable', reason: 'resolver for TASK answered HTTP 500' });
      expect(await client.resolve(resolver, 'TASK', 'moved')).toEqual({ kind: 'unavailable', reason: 'resolver for TASK answered HTTP 302' });
    }
  });
});

describe('#11.13 resolverUrl', () => {
  it.each([
    ['http://h/r/{id}', '..', null],
    ['http://h/r/{id}', '.', null],
    ['http://h/r/.{id}', '.', null],
    ['http://h/r/{id}.', '.', null],
    ['http://h/r/{id}', '', null],
    ['http://h/r/{id}', 'a%00b', null],
    ['http://h/r/{id}', 'a\nb', null],
    ['http://h/r/{id}', '...', 'http://h/r/...'],
    ['http://h/r/{id}', '..a', 'http://h/r/..a'],
    ['http://h/r/{id}', 'a/../b', 'http://h/r/a%2F..%2Fb'],
    ['http://h/r?id={id}', '..', null],
    ['http://h/r/{id}/scopes', '1', 'http://h/r/1/scopes'],
  ])('#11.13: %s with id %j → %s', (template, id, expected) => {
    expect(resolverUrl(template, id)).toBe(expected);
  });

  it('#11.13: a policy whose resolver URL puts {id} in the host is refused at load', () => {
    for (const url of ['http://{id}.internal/r', 'http://h{id}/r', 'http://{id}', 'https://user@{id}/x']) {
      const result = compilePolicyFiles([{ file: 'p.yaml', text: `version: 1\nresources:\n  T:\n    resolver: { url: "${url}" }\n` }]);
      expect(result.policy).toBeNull();
    }
    const fine = compilePolicyFiles([{ file: 'p.yaml', text: 'version: 1\nresources:\n  T:\n    resolver: { url: "http://h:8080/r?id={id}" }\n' }]);
    expect(fine.policy).not.toBeNull();
  });
});
