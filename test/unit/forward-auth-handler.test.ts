/**
 * gateway/forward-auth-handler.ts and its dispatch by the front door: GET and HEAD of the forward-auth path never
 * reach the /iam Koa app (its other methods and paths still do); the body rule is the /iam app's own (Koa's
 * `request.length` and `is()`, compared here on the same headers); failures are counted and logged as the /iam app's
 * problem middleware did, outages through the outage log.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { request } from 'undici';
import { problems, ProblemError } from '../../src/domain/problem';
import { StoreUnavailableError } from '../../src/domain/token-store';
import { ForwardAuthHandler, unsupportedBody } from '../../src/gateway/forward-auth-handler';
import { createFrontDoor } from '../../src/gateway/front-door';
import type { Authorization } from '../../src/gateway/request-authorizer';
import type { PreparedRequest } from '../../src/http/prepare-request';
import { createLogger } from '../../src/observability/logger';
import { createMetrics, type GatewayMetrics } from '../../src/observability/metrics';

describe('unsupportedBody: the /iam app refused exactly these bodies with 415', () => {
  /** The /iam app's rule (api/iam-app.ts), run by Koa itself on the same headers. */
  function koaRefuses(headers: IncomingHttpHeaders): boolean {
    const ctx = new Koa().createContext({ headers, url: '/iam/authorization/forward-auth', method: 'GET', socket: {} } as unknown as IncomingMessage, {} as ServerResponse);
    return ctx.request.length !== 0 && ctx.request.is('application/json') === false;
  }

  const lengths = [undefined, '0', '00', '3', '', '4294967296', '4294967299', ' 0', '0x10', '1e3'];
  const encodings = [undefined, 'chunked'];
  const types = [undefined, '', 'application/json', 'APPLICATION/JSON', 'application/json; charset=utf-8', ' application/json ;x=1', 'application/json;;', 'application/jsonx', 'application/vnd.api+json', 'text/plain', 'application/x-www-form-urlencoded', 'application /json', 'json', 'application/json\u00a0', '\tapplication/json\t; a=b', 'application/json\u000b'];
  const cases = lengths.flatMap((length) => encodings.flatMap((encoding) => types.map((type) => ({ 'content-length': length, 'transfer-encoding': encoding, 'content-type': type }))));

  it.each(cases)('%j', (given) => {
    const headers = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) as IncomingHttpHeaders;
    expect(unsupportedBody(headers)).toBe(koaRefuses(headers));
  });
});

const prepared = (path: string, method = 'GET'): PreparedRequest => ({ requestId: 'r-1', method, path, search: '', authorization: null, clientAddress: '127.0.0.1', host: 'gw.test', trustedPeer: false, cookieSession: null });

describe('ForwardAuthHandler.accepts', () => {
  const handler = new ForwardAuthHandler({ authorizer: {} as never, metrics: {} as never, target: { allowPathParameters: false, maxUrlLength: 8192 }, logger: createLogger('silent'), outages: null, tracer: null });

  it.each([
    ['GET', '/iam/authorization/forward-auth', true],
    ['HEAD', '/iam/authorization/forward-auth', true],
    ['GET', '/iam/authorization/forward-auth/', true],
    ['GET', '/iam/AUTHORIZATION/Forward-Auth', true],
    ['POST', '/iam/authorization/forward-auth', false],
    ['OPTIONS', '/iam/authorization/forward-auth', false],
    ['GET', '/iam/authorization/forward-auth/x', false],
    ['GET', '/iam/authorization/forward-authx', false],
    ['GET', '/iam/authorization/decisions/forward-auth', false],
  ])('%s %s → %s', (method, path, expected) => {
    expect(handler.accepts(prepared(path, method))).toBe(expected);
  });
});

describe('the front door hands forward-auth to the handler, never to the /iam app', () => {
  let metrics: GatewayMetrics;
  let outcome: () => Authorization | Promise<Authorization>;
  let identityHeaders: () => Array<readonly [string, string]> | null;
  const iamCalls: string[] = [];
  const proxyCalls: string[] = [];
  const decided: PreparedRequest[] = [];
  const errors: unknown[] = [];
  const outages: Array<[string, unknown]> = [];
  let base: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    metrics = createMetrics({ collectDefaults: false });
    const logger = createLogger('silent');
    logger.error = ((object: unknown) => void errors.push(object)) as typeof logger.error;
    const handler = new ForwardAuthHandler({
      authorizer: {
        authorizeFast: (request) => {
          decided.push(request);
          return outcome();
        },
      },
      metrics,
      target: { allowPathParameters: false, maxUrlLength: 8192 },
      logger,
      outages: { failed: (dependency, error) => void outages.push([dependency, error]) },
      tracer: null,
    });
    const server = createFrontDoor({
      limits: { maxHeaderSize: 16384, requestTimeoutMs: 10_000, headersTimeoutMs: 5000, keepAliveTimeoutMs: 5000 },
      prepare: { allowPathParameters: false, maxUrlLength: 8192 },
      cors: null,
      iam: (req, res) => {
        iamCalls.push(`${req.method} ${req.url}`);
        res.writeHead(299).end();
      },
      forwardAuth: handler,
      proxy: {
        handle: (req: IncomingMessage, res: ServerResponse) => {
          proxyCalls.push(`${req.method} ${req.url}`);
          res.writeHead(298).end();
        },
        handleUpgrade: async () => undefined,
      },
      metrics,
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => new Promise((resolve) => server.close(() => resolve()));
  });
  afterAll(() => close());
  beforeEach(() => {
    iamCalls.length = 0;
    proxyCalls.length = 0;
    decided.length = 0;
    errors.length = 0;
    outages.length = 0;
    identityHeaders = () => [['X-IAM-User-Id', 'u-1'] as const];
    outcome = () => ({ allowed: true, decision: null, session: null, bearerSent: false, identity: identityHeaders() });
  });

  const original = { 'x-forwarded-method': 'PUT', 'x-forwarded-uri': '/api/things/1?x=2' };
  const send = (method: string, path: string, headers: Record<string, string> = original) => request(`${base}${path}`, { method: method as 'GET', headers });
  const count = async (outcomeLabel: string): Promise<number> => (await metrics.forwardAuth.get()).values.find((value) => value.labels.outcome === outcomeLabel)?.value ?? 0;

  it('GET and HEAD: decided for the original request, answered 200 with the identity headers and no body', async () => {
    for (const method of ['GET', 'HEAD']) {
      const answer = await send(method, '/iam/authorization/forward-auth');
      expect(answer.statusCode).toBe(200);
      expect(answer.headers['x-iam-user-id']).toBe('u-1');
      expect(answer.headers['x-request-id']).toEqual(expect.any(String));
      expect(answer.headers['cache-control']).toBe('no-store');
      expect(answer.headers['content-length']).toBe('0');
      expect(await answer.body.text()).toBe('');
    }
    expect(decided.map((request) => [request.method, request.path, request.search])).toEqual([
      ['PUT', '/api/things/1', '?x=2'],
      ['PUT', '/api/things/1', '?x=2'],
    ]);
    expect(iamCalls).toEqual([]);
    expect(proxyCalls).toEqual([]);
  });

  it('the 200 carries the Cookie the host may see (the gateway\'s cookies removed, two lines joined); none when nothing is left, and none on a refusal', async () => {
    const token = `iamt_${'Q'.repeat(43)}`;
    const cookieOf = async (headers: string[]): Promise<[number, unknown]> => {
      const answer = await request(`${base}/iam/authorization/forward-auth`, { method: 'GET', headers: [...Object.entries(original).flat(), ...headers] });
      await answer.body.dump();
      return [answer.statusCode, answer.headers.cookie];
    };
    expect(await cookieOf(['cookie', `theme=dark; __Host-iam-session=${token}; pref=a=b`])).toEqual([200, 'theme=dark; pref=a=b']);
    expect(await cookieOf(['cookie', `theme=dark`, 'cookie', `IAM-SESSION=${token}; __Host-iam-oidc=v1.x; lang=en`])).toEqual([200, 'theme=dark; lang=en']);
    expect(await cookieOf(['cookie', `iam-session=${token}; iam-oidc=v1.x`])).toEqual([200, undefined]);
    expect(await cookieOf([])).toEqual([200, undefined]);
    outcome = () => ({ allowed: false, problem: new ProblemError('IAM_ACCESS_DENIED', 'no') });
    expect(await cookieOf(['cookie', 'theme=dark'])).toEqual([403, undefined]);
  });

  it('a decision that takes a turn (a promise) is answered when it settles', async () => {
    outcome = () => new Promise((resolve) => setTimeout(() => resolve({ allowed: false, problem: problems.unauthenticated('Authentication is required.', false) }), 20));
    const answer = await send('GET', '/iam/authorization/forward-auth');
    expect(answer.statusCode).toBe(401);
    expect(answer.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(await answer.body.json()).toMatchObject({ code: 'IAM_UNAUTHENTICATED', instance: '/api/things/1' });
  });

  it('other methods and other /iam paths go to the /iam app; other paths to the proxy', async () => {
    for (const method of ['POST', 'OPTIONS', 'DELETE']) expect((await send(method, '/iam/authorization/forward-auth')).statusCode).toBe(299);
    expect((await send('GET', '/iam/authorization/forward-auth/more')).statusCode).toBe(299);
    expect((await send('GET', '/api/things/1')).statusCode).toBe(298);
    expect(iamCalls).toEqual(['POST /iam/authorization/forward-auth', 'OPTIONS /iam/authorization/forward-auth', 'DELETE /iam/authorization/forward-auth', 'GET /iam/authorization/forward-auth/more']);
    expect(decided).toEqual([]);
  });

  it('a store outage: 503 with Retry-After, counted by the outage log (not logged per answer), outcome error', async () => {
    const cause = new StoreUnavailableError('redis down');
    outcome = () => ({ allowed: false, problem: problems.storeUnavailable(cause) });
    const before = await count('error');
    const answer = await send('GET', '/iam/authorization/forward-auth');
    expect(answer.statusCode).toBe(503);
    expect(answer.headers['retry-after']).toBe('5');
    expect(await answer.body.json()).toMatchObject({ code: 'IAM_STORE_UNAVAILABLE' });
    expect(outages).toEqual([['tokenStore', cause]]);
    expect(errors).toEqual([]);
    expect((await count('error')) - before).toBe(1);
  });

  it('any other failure (the authorizer throws: here while building the identity headers) is a logged 500, never a 200 without them', async () => {
    identityHeaders = () => {
      throw new Error('signer broke');
    };
    const answer = await send('GET', '/iam/authorization/forward-auth');
    expect(answer.statusCode).toBe(500);
    expect(answer.headers['x-iam-user-id']).toBeUndefined();
    expect(await answer.body.json()).toMatchObject({ code: 'IAM_INTERNAL_ERROR', instance: '/api/things/1' });
    expect(errors).toEqual([expect.objectContaining({ err: expect.any(Error), requestId: expect.any(String) })]);
    expect(outages).toEqual([]);
  });

  it('a refusal is counted as refused; a denial as denied', async () => {
    const refusedBefore = await count('refused');
    expect((await send('GET', '/iam/authorization/forward-auth', { 'x-forwarded-method': 'GET' })).statusCode).toBe(400);
    expect((await count('refused')) - refusedBefore).toBe(1);
    outcome = () => ({ allowed: false, problem: new ProblemError('IAM_ACCESS_DENIED', 'no') });
    const deniedBefore = await count('denied');
    expect((await send('GET', '/iam/authorization/forward-auth')).statusCode).toBe(403);
    expect((await count('denied')) - deniedBefore).toBe(1);
    expect(decided).toHaveLength(1);
  });
});
