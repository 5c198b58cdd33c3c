/**
 * `iam-gateway/host` (src/host/) against a stand-in gateway: an HTTP server with a JWKS and the check and plan
 * endpoints. The assertion is verified (signature by the gateway's key, iss, aud, exp, and htm/htu against the request
 * it arrived with) before anything is trusted; the checks of one host request go out as one call; `require` rejects
 * with a 403 problem carrying the decisionId.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { createHostAuthorization, expressMiddleware, HostAuthorizationError, koaMiddleware, type RequestAuthorization } from '../../src/host';

let server: Server;
let base: string;
let key: CryptoKey;
let jwk: JWK;
let strangerKey: CryptoKey;
const calls: Array<{ path: string; authorization: string | undefined; body: Record<string, unknown> }> = [];

beforeAll(async () => {
  const pair = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  jwk = { ...(await exportJWK(pair.publicKey)), kid: 'gw-1', alg: 'EdDSA', use: 'sig' };
  key = pair.privateKey;
  ({ privateKey: strangerKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' }));
  server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      if (req.url === '/iam/.well-known/jwks.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ keys: [jwk] }));
        return;
      }
      const body = JSON.parse(text || '{}') as Record<string, unknown>;
      calls.push({ path: req.url ?? '', authorization: req.headers.authorization, body });
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.url === '/iam/authorization/check') {
        const checks = body.checks as Array<{ permissionCode: string }>;
        // admin:write is denied; budget:spent and resolver:down stand for results that are not denials.
        const refused: Record<string, [number, string]> = { 'admin:write': [403, 'PERMISSION_DENIED'], 'budget:spent': [429, 'RESOLUTION_BUDGET_EXCEEDED'], 'resolver:down': [502, 'RESOURCE_RESOLUTION_UNAVAILABLE'] };
        res.end(JSON.stringify({ subject: { userId: 'u-alice' }, results: checks.map((check, i) => ({ allowed: refused[check.permissionCode] === undefined, status: refused[check.permissionCode]?.[0] ?? 200, failedStep: refused[check.permissionCode]?.[1] ?? null, decisionId: `d-${i}` })) }));
      } else res.end(JSON.stringify({ kind: 'SOME', ids: ['1'] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));
beforeEach(() => (calls.length = 0));

const assertion = (claims: Record<string, unknown> = {}, signWith = key, kid = 'gw-1'): Promise<string> =>
  new SignJWT({ sid: 's-1', identity_id: 'id-alice', identity_domain: 'example.com', profile_id: 'p-alice', permission: 'project:read', decision_id: 'd-0', htm: 'GET', htu: '/api/whoami', ...claims })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid })
    .setIssuer((claims.iss as string) ?? 'iam-gateway')
    .setSubject('u-alice')
    .setIssuedAt()
    .setExpirationTime((claims.exp as number) ?? '60s')
    .sign(signWith);

/** The request the assertions above were issued for, as the host receives it. */
const whoami = (assertionHeader?: string, extra: Record<string, string> = {}) => ({ method: 'GET', url: '/api/whoami', headers: { ...(assertionHeader === undefined ? {} : { 'x-iam-assertion': assertionHeader }), ...extra } });

describe('iam-gateway/host', () => {
  const host = () => createHostAuthorization({ gatewayUrl: `${base}/`, issuer: 'iam-gateway' });

  it('verifies the assertion and reads the principal from it', async () => {
    const principal = await host().principal(whoami(await assertion()));
    expect(principal).toMatchObject({ userId: 'u-alice', sessionId: 's-1', identityId: 'id-alice', profileId: 'p-alice', permission: 'project:read', decisionId: 'd-0' });
  });

  it.each([
    ['signed by another key', () => assertion({}, strangerKey)],
    ['expired', () => assertion({ exp: Math.floor(Date.now() / 1000) - 120 })],
    ['of another issuer', () => assertion({ iss: 'someone-else' })],
    ['not a JWT', () => Promise.resolve('iamt_not-an-assertion')],
  ])('refuses an assertion %s: no principal', async (_name, make) => {
    expect(await host().principal(whoami(await make()))).toBeNull();
    expect(await host().principal(whoami())).toBeNull();
  });

  it('requires the audience when one is configured', async () => {
    const strict = createHostAuthorization({ gatewayUrl: base, issuer: 'iam-gateway', audience: 'my-host' });
    expect(await strict.principal(whoami(await assertion()))).toBeNull();
    expect(await strict.principal(whoami(await assertion({ aud: 'my-host' })))).not.toBeNull();
  });

  describe('an assertion counts only on the request it was issued for', () => {
    const deleteTask = (token: string) => ({ method: 'DELETE', url: '/api/tasks/10', headers: { 'x-iam-assertion': token } });

    it('one for GET /api/whoami is refused on DELETE /api/tasks/10: no principal, and check, plan and require answer 401 without asking the gateway', async () => {
      const token = await assertion();
      expect(await host().principal(deleteTask(token))).toBeNull();
      const iam = host().forRequest(deleteTask(token));
      expect(await iam.principal()).toBeNull();
      for (const refused of [iam.require({ permissionCode: 'task:delete' }), iam.check({ permissionCode: 'task:delete' }), iam.plan('task:read', 'TASK')]) {
        const error = await refused.catch((caught: unknown) => caught);
        expect(error).toBeInstanceOf(HostAuthorizationError);
        expect(error).toMatchObject({ status: 401, problem: { status: 401, code: 'IAM_UNAUTHENTICATED' } });
      }
      expect(calls).toEqual([]);
    });

    it.each([
      ['another method on the same path', { method: 'POST', url: '/api/whoami' }],
      ['the same method on another path', { method: 'GET', url: '/api/whoami/../admin' }],
      ['a request whose method and path are unknown', {}],
    ])('is refused for %s', async (_name, request) => {
      expect(await host().principal({ ...request, headers: { 'x-iam-assertion': await assertion() } })).toBeNull();
    });

    it('is accepted on its own request, with any query (the gateway signs the path it forwards, no decision reads the query)', async () => {
      const token = await assertion();
      expect(await host().principal({ method: 'GET', url: '/api/whoami?verbose=1', headers: { 'x-iam-assertion': token } })).toMatchObject({ userId: 'u-alice' });
      // Express: a mounted router cuts its prefix off `url`; `originalUrl` is what the gateway forwarded.
      expect(await host().principal({ method: 'GET', url: '/whoami', originalUrl: '/api/whoami', headers: { 'x-iam-assertion': token } })).toMatchObject({ userId: 'u-alice' });
      const iam = host().forRequest(whoami(token));
      await expect(iam.require({ permissionCode: 'project:read' })).resolves.toBeUndefined();
      expect(calls).toHaveLength(1);
    });

    it('an assertion that names no request (no htm/htu) is refused', async () => {
      expect(await host().principal(whoami(await assertion({ htm: undefined, htu: undefined })))).toBeNull();
    });

    it('bindToRequest: false accepts it on any request (a host behind something that rewrites paths)', async () => {
      const loose = createHostAuthorization({ gatewayUrl: base, issuer: 'iam-gateway', bindToRequest: false });
      expect(await loose.principal(deleteTask(await assertion()))).toMatchObject({ userId: 'u-alice' });
      await expect(loose.forRequest(deleteTask(await assertion())).require({ permissionCode: 'project:read' })).resolves.toBeUndefined();
    });

    it('the middleware compare with the request they run for (Koa: ctx.originalUrl; Express: req.originalUrl)', async () => {
      const authorization = host();
      const headers = { 'x-iam-assertion': await assertion() };
      const koa = { req: { method: 'DELETE', url: '/api/tasks/10', headers } as never, state: {} as Record<string, unknown> };
      await koaMiddleware(authorization)(koa, () => Promise.resolve());
      expect(await (koa.state.iam as RequestAuthorization).principal()).toBeNull();
      const mounted = { req: { method: 'GET', url: '/whoami', headers } as never, originalUrl: '/api/whoami', state: {} as Record<string, unknown> };
      await koaMiddleware(authorization)(mounted, () => Promise.resolve());
      expect(await (mounted.state.iam as RequestAuthorization).principal()).toMatchObject({ userId: 'u-alice' });
      const req = { method: 'DELETE', url: '/api/tasks/10', headers } as never as { iam?: RequestAuthorization };
      expressMiddleware(authorization)(req as never, {} as never, () => undefined);
      expect(await req.iam!.principal()).toBeNull();
    });

    it('refuses to guess: headers passed where the request belongs are a TypeError', async () => {
      expect(() => host().forRequest({ 'x-iam-assertion': 'x' } as never)).toThrow(TypeError);
      await expect(host().principal({ 'x-iam-assertion': 'x' } as never)).rejects.toThrow(TypeError);
    });
  });

  describe('each host its own audience', () => {
    it('an assertion for another host\'s audience is refused: no principal, no call to the gateway (which accepts every audience it issues)', async () => {
      const billing = createHostAuthorization({ gatewayUrl: base, issuer: 'iam-gateway', audience: 'billing' });
      const forTasks = await assertion({ aud: 'tasks' });
      expect(await billing.principal(whoami(forTasks))).toBeNull();
      await expect(billing.forRequest(whoami(forTasks)).check({ permissionCode: 'project:read' })).rejects.toMatchObject({ status: 401, problem: { code: 'IAM_UNAUTHENTICATED' } });
      expect(calls).toEqual([]);
      expect(await billing.principal(whoami(await assertion({ aud: 'billing' })))).toMatchObject({ userId: 'u-alice' });
    });

    it('a host configured with no audience refuses an assertion that names one (RFC 7519 §4.1.3)', async () => {
      expect(await host().principal(whoami(await assertion({ aud: 'tasks' })))).toBeNull();
    });
  });

  it('sends the checks of one request asked in one tick as one call, with the assertion as the bearer', async () => {
    const token = await assertion();
    const iam = host().forRequest(whoami(token));
    const [one, many] = await Promise.all([iam.check({ permissionCode: 'project:read', resource: { type: 'PROJECT', id: '1', access: 'READ' } }), iam.check([{ permissionCode: 'task:read' }, { permissionCode: 'admin:write' }])]);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ path: '/iam/authorization/check', authorization: `Bearer ${token}` });
    expect((calls[0]!.body.checks as unknown[]).length).toBe(3);
    expect(one).toMatchObject({ allowed: true, decisionId: 'd-0' });
    expect(many.map((result) => result.allowed)).toEqual([true, false]);
  });

  it('require: resolves when allowed, rejects with a 403 problem carrying the decisionId otherwise', async () => {
    const iam = host().forRequest(whoami(await assertion()));
    await expect(iam.require({ permissionCode: 'project:read' })).resolves.toBeUndefined();
    const refused = await iam.require({ permissionCode: 'admin:write' }).catch((error: unknown) => error as HostAuthorizationError);
    expect(refused).toBeInstanceOf(HostAuthorizationError);
    expect(refused).toMatchObject({ status: 403, problem: { status: 403, code: 'IAM_ACCESS_DENIED', decisionId: 'd-0', step: 'PERMISSION_DENIED' } });
  });

  it.each([
    ['budget:spent', 429, 'IAM_RATE_LIMITED', 'RESOLUTION_BUDGET_EXCEEDED'],
    ['resolver:down', 502, 'IAM_UPSTREAM_UNAVAILABLE', 'RESOURCE_RESOLUTION_UNAVAILABLE'],
  ])('require: a %s result that is no denial rejects with its own status %i (%s), not 403', async (permissionCode, status, code, step) => {
    const refused = await host()
      .forRequest(whoami(await assertion()))
      .require({ permissionCode })
      .catch((error: unknown) => error as HostAuthorizationError);
    expect(refused).toBeInstanceOf(HostAuthorizationError);
    expect(refused).toMatchObject({ status, problem: { status, code, step, decisionId: 'd-0' } });
  });

  it('plan: the gateway\'s answer; no assertion is a 401 problem, without a call', async () => {
    const iam = host().forRequest(whoami(await assertion()));
    expect(await iam.plan('project:read', 'PROJECT')).toEqual({ kind: 'SOME', ids: ['1'] });
    expect(calls[0]!.body).toEqual({ permissionCode: 'project:read', resourceType: 'PROJECT', access: 'READ' });
    calls.length = 0;
    await expect(host().forRequest(whoami()).plan('project:read', 'PROJECT')).rejects.toMatchObject({ status: 401 });
    await expect(host().forRequest(whoami()).check({ permissionCode: 'x:y' })).rejects.toMatchObject({ status: 401 });
    expect(calls).toEqual([]);
  });

  it('Koa and Express middleware put the request\'s authorization on ctx.state.iam and req.iam', async () => {
    const authorization = host();
    const headers = { 'x-iam-assertion': await assertion() };
    const ctx = { req: { method: 'GET', url: '/api/whoami', headers } as never, state: {} as Record<string, unknown> };
    await koaMiddleware(authorization)(ctx, () => Promise.resolve());
    expect(await (ctx.state.iam as RequestAuthorization).principal()).toMatchObject({ userId: 'u-alice' });
    const req = { method: 'GET', url: '/api/whoami', headers } as never as { iam?: RequestAuthorization; headers: typeof headers };
    let nexted = false;
    expressMiddleware(authorization)(req as never, {} as never, () => (nexted = true));
    expect(nexted).toBe(true);
    expect(await req.iam!.principal()).toMatchObject({ userId: 'u-alice' });
  });
});
