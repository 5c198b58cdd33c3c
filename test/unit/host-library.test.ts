/**
 * `iam-gateway/host` (src/host/) against a stand-in gateway: an HTTP server with a JWKS and the check and plan
 * endpoints. The assertion is verified (signature by the gateway's key, iss, aud, exp) before anything is trusted;
 * the checks of one host request go out as one call; `require` rejects with a 403 problem carrying the decisionId.
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
        res.end(JSON.stringify({ subject: { userId: 'u-alice' }, results: checks.map((check, i) => ({ allowed: check.permissionCode !== 'admin:write', status: check.permissionCode === 'admin:write' ? 403 : 200, failedStep: check.permissionCode === 'admin:write' ? 'PERMISSION_DENIED' : null, decisionId: `d-${i}` })) }));
      } else res.end(JSON.stringify({ kind: 'SOME', ids: ['1'] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));
beforeEach(() => (calls.length = 0));

const assertion = (claims: Record<string, unknown> = {}, signWith = key, kid = 'gw-1'): Promise<string> =>
  new SignJWT({ sid: 's-1', identity_id: 'id-alice', identity_domain: 'example.com', profile_id: 'p-alice', permission: 'project:read', decision_id: 'd-0', ...claims })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid })
    .setIssuer((claims.iss as string) ?? 'iam-gateway')
    .setSubject('u-alice')
    .setIssuedAt()
    .setExpirationTime((claims.exp as number) ?? '60s')
    .sign(signWith);

describe('iam-gateway/host', () => {
  const host = () => createHostAuthorization({ gatewayUrl: `${base}/`, issuer: 'iam-gateway' });

  it('verifies the assertion and reads the principal from it', async () => {
    const principal = await host().principal({ 'x-iam-assertion': await assertion() });
    expect(principal).toMatchObject({ userId: 'u-alice', sessionId: 's-1', identityId: 'id-alice', profileId: 'p-alice', permission: 'project:read', decisionId: 'd-0' });
  });

  it.each([
    ['signed by another key', () => assertion({}, strangerKey)],
    ['expired', () => assertion({ exp: Math.floor(Date.now() / 1000) - 120 })],
    ['of another issuer', () => assertion({ iss: 'someone-else' })],
    ['not a JWT', () => Promise.resolve('iamt_not-an-assertion')],
  ])('refuses an assertion %s: no principal', async (_name, make) => {
    expect(await host().principal({ 'x-iam-assertion': await make() })).toBeNull();
    expect(await host().principal({})).toBeNull();
  });

  it('requires the audience when one is configured', async () => {
    const strict = createHostAuthorization({ gatewayUrl: base, issuer: 'iam-gateway', audience: 'my-host' });
    expect(await strict.principal({ 'x-iam-assertion': await assertion() })).toBeNull();
    expect(await strict.principal({ 'x-iam-assertion': await assertion({ aud: 'my-host' }) })).not.toBeNull();
  });

  it('sends the checks of one request asked in one tick as one call, with the assertion as the bearer', async () => {
    const token = await assertion();
    const iam = host().forRequest({ 'x-iam-assertion': token });
    const [one, many] = await Promise.all([iam.check({ permissionCode: 'project:read', resource: { type: 'PROJECT', id: '1', access: 'READ' } }), iam.check([{ permissionCode: 'task:read' }, { permissionCode: 'admin:write' }])]);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ path: '/iam/authorization/check', authorization: `Bearer ${token}` });
    expect((calls[0]!.body.checks as unknown[]).length).toBe(3);
    expect(one).toMatchObject({ allowed: true, decisionId: 'd-0' });
    expect(many.map((result) => result.allowed)).toEqual([true, false]);
  });

  it('require: resolves when allowed, rejects with a 403 problem carrying the decisionId otherwise', async () => {
    const iam = host().forRequest({ 'x-iam-assertion': await assertion() });
    await expect(iam.require({ permissionCode: 'project:read' })).resolves.toBeUndefined();
    const refused = await iam.require({ permissionCode: 'admin:write' }).catch((error: unknown) => error as HostAuthorizationError);
    expect(refused).toBeInstanceOf(HostAuthorizationError);
    expect(refused).toMatchObject({ status: 403, problem: { status: 403, code: 'IAM_ACCESS_DENIED', decisionId: 'd-0', step: 'PERMISSION_DENIED' } });
  });

  it('plan: the gateway\'s answer; no assertion is a 401 problem, without a call', async () => {
    const iam = host().forRequest({ 'x-iam-assertion': await assertion() });
    expect(await iam.plan('project:read', 'PROJECT')).toEqual({ kind: 'SOME', ids: ['1'] });
    expect(calls[0]!.body).toEqual({ permissionCode: 'project:read', resourceType: 'PROJECT', access: 'READ' });
    calls.length = 0;
    await expect(host().forRequest({}).plan('project:read', 'PROJECT')).rejects.toMatchObject({ status: 401 });
    await expect(host().forRequest({}).check({ permissionCode: 'x:y' })).rejects.toMatchObject({ status: 401 });
    expect(calls).toEqual([]);
  });

  it('Koa and Express middleware put the request\'s authorization on ctx.state.iam and req.iam', async () => {
    const authorization = host();
    const headers = { 'x-iam-assertion': await assertion() };
    const ctx = { req: { headers } as never, state: {} as Record<string, unknown> };
    await koaMiddleware(authorization)(ctx, () => Promise.resolve());
    expect(await (ctx.state.iam as RequestAuthorization).principal()).toMatchObject({ userId: 'u-alice' });
    const req = { headers } as never as { iam?: RequestAuthorization; headers: typeof headers };
    let nexted = false;
    expressMiddleware(authorization)(req as never, {} as never, () => (nexted = true));
    expect(nexted).toBe(true);
    expect(await req.iam!.principal()).toMatchObject({ userId: 'u-alice' });
  });
});
