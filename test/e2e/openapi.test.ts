/**
 * docs/http-contract.md: the OpenAPI 3.1 description of every /iam endpoint, and the gateway's REAL answers checked
 * against it — each status must be documented for its operation and each body, media type and required
 * header must match. A failure here is a contract break: fix the handler (or the document when it is the
 * one that is wrong), never loosen a schema to fit a bug.
 */
import { join } from 'node:path';
import { HTTP_METHODS, openApiDocument, type HttpMethod, type ParameterObject, type ReferenceObject, type ResponseObject } from '../../src/api/openapi-document';
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { freePort } from '../support/front-proxy';
import { startTestOp, type TestOp } from '../support/oidc-op';
import { registeredIamRoutes } from '../support/iam-routes';
import { createResponseValidator, resolvePointer } from '../support/openapi-validator';
import { type RecordingUpstream } from '../support/recording-upstream';

const validator = createResponseValidator(openApiDocument);

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({
    IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
    IAM_LOGIN_RATE_LIMIT_MAX_FAILURES: '3',
    // One configured client type no profile serves (the CLIENT_TYPE_MISMATCH diagnostics case).
    IAM_CLIENT_TYPES: '["WEB","MOBILE","DESKTOP","API","KIOSK"]',
  });
  ({ upstream, gateway } = fixture);
});

afterAll(() => fixture?.close());

interface Answer {
  status: number;
  contentType: string | null;
  headers: Headers;
  /** Parsed JSON for JSON media types, else the text ('' when empty). */
  body: unknown;
}

async function send(
  method: string,
  path: string,
  options: { token?: string; json?: unknown; raw?: string; headers?: Record<string, string>; base?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...(options.token ? bearer(options.token) : {}), ...options.headers };
  let body: string | undefined;
  if (options.json !== undefined || options.raw !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = options.raw ?? JSON.stringify(options.json);
  }
  const response = await fetch(`${options.base ?? gateway.url}${path}`, { method, headers, body, redirect: 'manual' });
  const text = await response.text();
  const contentType = response.headers.get('content-type');
  const isJson = contentType !== null && /^application\/([a-z.+-]+\+)?json/i.test(contentType);
  return { status: response.status, contentType, headers: response.headers, body: isJson && text !== '' ? JSON.parse(text) : text };
}

/** `operationId status` of every answer checked, to prove every operation was exercised. */
const exercised = new Set<string>();

/**
 * The heart of this file: the answer has the status the case expects (and `code`, for problems), and the
 * document describes exactly that answer for the operation serving `path`.
 */
function expectDocumented(method: string, path: string, answer: Answer, status: number, code?: string): void {
  if (answer.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${answer.status}: ${JSON.stringify(answer.body)}`);
  if (code !== undefined) expect((answer.body as { code?: unknown }).code).toBe(code);
  const match = validator.operationFor(method, path);
  if (!match) throw new Error(`${method} ${path} is served but matches no documented operation`);
  validator.assertMatches(method, match.pathTemplate, answer.status, answer.contentType, answer.body, answer.headers);
  exercised.add(`${match.operation.operationId} ${answer.status}`);
}

/** A `security` with the anonymous alternative `{}`: a credential is used when sent, none is fine. */
const isOptional = (security: Array<Record<string, string[]>>): boolean => security.some((requirement) => Object.keys(requirement).length === 0);

/** A value for the path parameter `name` of `pathTemplate`: its first `enum` value (a console page), else `sample`. */
function sampleOf(pathTemplate: string, name: string): string {
  const item = openApiDocument.paths[pathTemplate]!;
  const declared = [...(item.parameters ?? []), ...HTTP_METHODS.flatMap((method) => item[method]?.parameters ?? [])]
    .map((p) => ('$ref' in p ? (resolvePointer(openApiDocument, p.$ref) as ParameterObject) : p))
    .find((p) => p.in === 'path' && p.name === name);
  const values = declared?.schema.enum;
  return values && typeof values[0] === 'string' ? values[0] : 'sample';
}

/** Fresh sessions: tests that revoke or log out never disturb each other. */
const fresh = (user: string, clientType = 'WEB'): ReturnType<typeof login> => login(gateway.url, user, `${user}-password`, clientType);

describe('the document', () => {
  const operations = validator.operations();

  it('has the OpenAPI 3.1 shape: version, dialect, info, this origin as server, bearer and cookie schemes, /iam paths only', () => {
    expect(openApiDocument.openapi).toBe('3.1.0');
    expect(openApiDocument.jsonSchemaDialect).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(openApiDocument.info.title).toEqual(expect.any(String));
    expect(openApiDocument.info.version).toEqual(expect.any(String));
    expect(openApiDocument.servers.map((server) => server.url)).toEqual(['/']);
    expect(openApiDocument.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(openApiDocument.components.securitySchemes.sessionCookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: '__Host-iam-session' });
    // A protected operation takes either credential (docs/http-contract.md, Authentication).
    expect(openApiDocument.security).toEqual([{ bearer: [] }, { sessionCookie: [] }]);
    expect(Object.keys(openApiDocument.paths).length).toBeGreaterThan(10);
    for (const path of Object.keys(openApiDocument.paths)) expect(path).toMatch(/^\/iam\/[^?#]*[^/]$/);
    const names = ['Problem', 'AuthenticationResult', 'Principal', 'Session', 'Profile', 'Scope', 'Decision', 'DecisionStep', 'LoginRequest', 'DiagnosticsRequest'];
    for (const name of names) expect(openApiDocument.components.schemas).toHaveProperty(name);
  });

  it('resolves every $ref', () => {
    const refs: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node !== null && typeof node === 'object') {
        for (const [key, value] of Object.entries(node)) {
          if (key === '$ref') refs.push(value as string);
          else walk(value);
        }
      }
    };
    walk(openApiDocument);
    expect(refs.length).toBeGreaterThan(50);
    const broken = refs.filter((ref) => resolvePointer(openApiDocument, ref) === undefined);
    expect(broken).toEqual([]);
  });

  it('compiles every schema with ajv 2020-12 in strict mode (no unknown keyword, no bad format)', () => {
    expect(validator.compileAll()).toBeGreaterThan(100);
  });

  it('gives every operation a unique operationId, a summary and tags', () => {
    const ids = operations.map((o) => o.operation.operationId);
    expect(ids.every((id) => /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { operation } of operations) {
      expect(operation.summary.length).toBeGreaterThan(0);
      expect(operation.tags.length).toBeGreaterThan(0);
    }
  });

  it('documents a 401 problem for every operation that needs a token, and names only declared schemes', () => {
    const missing: string[] = [];
    for (const { method, pathTemplate, operation } of operations) {
      const security = operation.security ?? openApiDocument.security;
      for (const requirement of security) for (const scheme of Object.keys(requirement)) expect(openApiDocument.components.securitySchemes).toHaveProperty(scheme);
      const needsToken = security.length > 0 && !security.some((requirement) => Object.keys(requirement).length === 0);
      if (needsToken && !operation.responses['401']) missing.push(`${method} ${pathTemplate}`);
    }
    expect(missing).toEqual([]);
    // The public ones are exactly these (a missing `security: []` would silently demand a token).
    const open = operations.filter((o) => (o.operation.security ?? openApiDocument.security).length === 0).map((o) => o.operation.operationId);
    expect(open.sort()).toEqual([
      'completeOidcLogin',
      'getConsoleAsset',
      'getJwks',
      'getOpenApiDocument',
      'login',
      'oidcBackchannelLogout',
      'showLoginPage',
      'startOidcLogin',
      'submitLoginPage',
    ]);
    // These use a session when one is sent, and answer without one too.
    const optional = operations.filter((o) => isOptional(o.operation.security ?? openApiDocument.security)).map((o) => o.operation.operationId);
    expect(optional.sort()).toEqual(['forwardAuth', 'oidcLogout']);
  });

  it('describes every error as application/problem+json (or, on the browser login page, its HTML form) and every success without it', () => {
    const pages = new Set(['showLoginPage', 'submitLoginPage', 'startOidcLogin', 'completeOidcLogin', 'oidcLogout']);
    for (const { method, pathTemplate, operation } of operations) {
      for (const [status, entry] of Object.entries(operation.responses)) {
        const declared = ('$ref' in entry ? resolvePointer(openApiDocument, entry.$ref) : entry) as ResponseObject;
        const mediaTypes = Object.keys(declared.content ?? {});
        const at = `${method} ${pathTemplate} ${status}`;
        if (Number(status) >= 400 && pages.has(operation.operationId) && mediaTypes.includes('text/html')) expect({ at, others: mediaTypes.filter((m) => m !== 'text/html') }).toEqual({ at, others: mediaTypes.length > 1 ? ['application/problem+json'] : [] });
        else if (Number(status) >= 400) expect({ at, mediaTypes }).toEqual({ at, mediaTypes: ['application/problem+json'] });
        else expect(mediaTypes).not.toContain('application/problem+json');
      }
    }
  });

  it('declares each path parameter exactly once, as required', () => {
    for (const [pathTemplate, item] of Object.entries(openApiDocument.paths)) {
      const inPath = [...pathTemplate.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      for (const method of HTTP_METHODS) {
        const operation = item[method];
        if (!operation) continue;
        const declared = [...(item.parameters ?? []), ...(operation.parameters ?? [])]
          .map((p) => ('$ref' in p ? (resolvePointer(openApiDocument, (p as ReferenceObject).$ref) as ParameterObject) : p))
          .filter((p) => p.in === 'path');
        expect({ at: `${method} ${pathTemplate}`, names: declared.map((p) => p.name).sort() }).toEqual({ at: `${method} ${pathTemplate}`, names: inPath });
        expect(declared.every((p) => p.required === true)).toBe(true);
      }
    }
  });

  it('states the iam.admin.* permission, a 401 and a 403 for every admin operation', () => {
    const codes = ['templates:read', 'templates:write', 'users:read', 'users:write', 'identities:write', 'profiles:read', 'profiles:write', 'sessions:read', 'sessions:revoke', 'audit:read', 'policy:read'].map(
      (c) => `iam.admin.${c}`,
    );
    const admin = operations.filter((o) => o.pathTemplate.startsWith('/iam/admin/'));
    expect(admin).toHaveLength(19);
    for (const { operation } of admin) {
      expect(codes).toContain(operation['x-permission']);
      expect(operation.security).toEqual([{ bearer: [operation['x-permission']] }, { sessionCookie: [operation['x-permission']] }]);
      expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['401', '403']));
    }
  });

  it('documents every route the /iam modules register, and every documented route is registered', () => {
    const routes = registeredIamRoutes();
    expect(routes.length).toBeGreaterThanOrEqual(24);
    const undocumented = routes.filter(({ method, path }) => {
      const item = openApiDocument.paths[path];
      return !item || !item[(method === 'ALL' ? 'get' : method.toLowerCase()) as HttpMethod];
    });
    expect(undocumented).toEqual([]);
    const served = new Set(routes.map((r) => `${r.method === 'ALL' ? 'GET' : r.method} ${r.path}`));
    const unserved = operations.map((o) => `${o.method.toUpperCase()} ${o.pathTemplate}`).filter((key) => !served.has(key));
    expect(unserved).toEqual([]);
  });

  it('matches concrete paths to templates, literal segments first', () => {
    expect(validator.operationFor('POST', '/iam/sessions/abc/revoke')).toMatchObject({ pathTemplate: '/iam/sessions/{sessionId}/revoke', params: { sessionId: 'abc' } });
    expect(validator.operationFor('POST', '/iam/sessions/revoke-others')?.pathTemplate).toBe('/iam/sessions/revoke-others');
    expect(validator.operationFor('GET', '/iam/authorization/decisions/d-1?x=1')?.pathTemplate).toBe('/iam/authorization/decisions/{decisionId}');
    expect(validator.operationFor('DELETE', '/iam/sessions')).toBeNull();
    expect(validator.operationFor('GET', '/iam/sessions/x')).toBeNull();
  });

  it('rejects answers the document does not describe (the validator can fail)', () => {
    const good = { accessToken: `iamt_${'a'.repeat(43)}`, sessionId: '3b241101-e2bb-4255-8caf-4136c566a962', expiresAt: '2030-01-01T00:00:00.000Z', principal: { userId: 'u', identityId: 'i', identityDomain: 'd', activeProfileId: null, authorizationVersion: 0 } };
    expect(() => validator.assertMatches('POST', '/iam/auth/login', 200, 'application/json; charset=utf-8', good)).not.toThrow();
    expect(() => validator.assertMatches('POST', '/iam/auth/login', 200, 'application/json', { ...good, stack: 'Error: at…' })).toThrow(/"stack"/);
    expect(() => validator.assertMatches('POST', '/iam/auth/login', 200, 'text/html', good)).toThrow(/media type/);
    expect(() => validator.assertMatches('POST', '/iam/auth/login', 418, 'application/json', good)).toThrow(/not documented/);
    expect(() => validator.assertMatches('POST', '/iam/auth/logout', 204, null, 'unexpected')).toThrow(/no body/);
    const problem = { type: 'https://iam-gateway.dev/problems/iam-access-denied', title: 'Access denied', status: 403, detail: 'x', instance: '/', code: 'IAM_ACCESS_DENIED', requestId: '3b241101-e2bb-4255-8caf-4136c566a962' };
    expect(() => validator.assertMatchesComponent('AccessDenied', 403, 'application/problem+json', problem)).toThrow(/decisionId/);
    expect(() => validator.assertMatches('POST', '/iam/authorization/profiles/{profileId}/switch', 404, 'application/problem+json', { ...problem, status: 404, code: 'IAM_SESSION_NOT_FOUND' })).toThrow(/code/);
    expect(() => validator.assertMatches('GET', '/iam/auth/me', 401, 'application/problem+json', { ...problem, status: 401, code: 'IAM_UNAUTHENTICATED' }, new Headers())).toThrow(/WWW-Authenticate/);
  });

  it('accepts the request bodies the gateway accepts and rejects the ones it refuses', () => {
    expect(validator.requestBodyErrors('POST', '/iam/auth/login', { username: 'a', password: 'b', clientType: 'WEB' })).toEqual([]);
    expect(validator.requestBodyErrors('POST', '/iam/auth/login', { username: 'a', password: 'b', clientType: 'WEB', extra: 1 })).not.toEqual([]);
    const diagnostics = '/iam/authorization/diagnostics';
    expect(validator.requestBodyErrors('POST', diagnostics, { method: 'GET', path: '/api/projects/1' })).toEqual([]);
    expect(validator.requestBodyErrors('POST', diagnostics, { permissionCode: 'project:read', resourceType: 'PROJECT', resourceId: '1', scopeAccess: 'WRITE' })).toEqual([]);
    expect(validator.requestBodyErrors('POST', diagnostics, { permissionCode: 'project:read', resourceType: 'PROJECT' })).not.toEqual([]);
    expect(validator.requestBodyErrors('POST', diagnostics, { method: 'GET', path: '/x', permissionCode: 'project:read' })).not.toEqual([]);
  });
});

describe('POST /iam/auth/login', () => {
  const path = '/iam/auth/login';

  it('200 AuthenticationResult', async () => {
    const body = { username: 'alice', password: 'alice-password', clientType: 'WEB' };
    expect(validator.requestBodyErrors('POST', path, body)).toEqual([]);
    const answer = await send('POST', path, { json: body });
    expectDocumented('POST', path, answer, 200);
    expect(answer.body).toMatchObject({ principal: { userId: 'u-alice', activeProfileId: 'p-alice-editor' } });
  });

  it.each([
    ['a missing password', { json: { username: 'alice', clientType: 'WEB' } }],
    ['an unknown property', { json: { username: 'alice', password: 'x', clientType: 'WEB', remember: true } }],
    ['a client type outside iam.client-types', { json: { username: 'alice', password: 'x', clientType: 'TOASTER' } }],
    ['malformed JSON', { raw: '{"username": "alice",' }],
  ])('400 IAM_VALIDATION_FAILED for %s', async (_name, options) => {
    expectDocumented('POST', path, await send('POST', path, options), 400, 'IAM_VALIDATION_FAILED');
  });

  it.each([
    ['a wrong password', 'alice', 'not-her-password'],
    ['a disabled user', 'eve', 'eve-password'],
    ['an unknown user', 'nobody', 'nobody-password'],
  ])('401 IAM_INVALID_CREDENTIALS for %s', async (_name, username, password) => {
    expectDocumented('POST', path, await send('POST', path, { json: { username, password, clientType: 'WEB' } }), 401, 'IAM_INVALID_CREDENTIALS');
  });

  it('413 for a body over the limit', async () => {
    const answer = await send('POST', path, { json: { username: 'alice', password: 'x'.repeat(70 * 1024), clientType: 'WEB' } });
    expectDocumented('POST', path, answer, 413, 'IAM_PAYLOAD_TOO_LARGE');
  });

  it.each([
    ['text/plain', 'text/plain'],
    ['a form', 'application/x-www-form-urlencoded'],
    ['another +json type', 'application/vnd.example+json'],
    ['no Content-Type', ''],
  ])('415 IAM_UNSUPPORTED_MEDIA_TYPE for a body that is %s, not JSON', async (_name, contentType) => {
    const raw = contentType === 'application/x-www-form-urlencoded' ? 'username=alice&password=alice-password&clientType=WEB' : '{"username":"alice","password":"alice-password","clientType":"WEB"}';
    const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: contentType ? { 'content-type': contentType } : {}, body: contentType ? raw : new Blob([raw]) });
    const answer: Answer = { status: response.status, contentType: response.headers.get('content-type'), headers: response.headers, body: await response.json() };
    expectDocumented('POST', path, answer, 415, 'IAM_UNSUPPORTED_MEDIA_TYPE');
  });

  it('accepts application/json with parameters', async () => {
    for (const contentType of ['application/json; charset=utf-8', 'Application/JSON']) {
      const answer = await send('POST', path, { json: { username: 'alice', password: 'alice-password', clientType: 'WEB' }, headers: { 'content-type': contentType } });
      expectDocumented('POST', path, answer, 200);
    }
  });

  it('429 IAM_RATE_LIMITED with Retry-After after repeated failures', async () => {
    const attempt = { json: { username: 'rate-limited', password: 'wrong', clientType: 'WEB' } };
    for (let i = 0; i < 3; i++) expectDocumented('POST', path, await send('POST', path, attempt), 401);
    expectDocumented('POST', path, await send('POST', path, attempt), 429, 'IAM_RATE_LIMITED');
  });
});

describe('the browser login page', () => {
  const path = '/iam/login';
  const form = (fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> =>
    send('POST', path, { raw: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html', ...headers } });

  it('GET 200 the form; POST 303 with the session cookie', async () => {
    expectDocumented('GET', `${path}?returnTo=%2Fapi`, await send('GET', `${path}?returnTo=%2Fapi`), 200);
    const fields = { username: 'alice', password: 'alice-password', returnTo: '/api' };
    expect(validator.requestBodyErrors('POST', path, fields)).toEqual([]);
    expectDocumented('POST', path, await form(fields), 303);
  });

  it('400 the form (or the problem for an API client), 401 the form, 403 cross-site, 415 JSON', async () => {
    expect(validator.requestBodyErrors('POST', path, { username: 'alice' })).not.toEqual([]);
    expectDocumented('POST', path, await form({ username: 'alice', password: '' }), 400);
    expectDocumented('POST', path, await form({ username: 'alice' }, { accept: 'application/json' }), 400, 'IAM_VALIDATION_FAILED');
    expectDocumented('POST', path, await form({ username: 'alice', password: 'wrong' }), 401);
    expectDocumented('POST', path, await form({ username: 'alice', password: 'alice-password' }, { origin: 'https://evil.test' }), 403, 'IAM_CSRF_REJECTED');
    expectDocumented('POST', path, await send('POST', path, { json: { username: 'alice', password: 'alice-password' } }), 415, 'IAM_UNSUPPORTED_MEDIA_TYPE');
  });

  it('logout 403 for the session cookie from another site', async () => {
    const { accessToken } = await fresh('alice');
    const answer = await send('POST', '/iam/auth/logout', { headers: { cookie: `__Host-iam-session=${accessToken}`, origin: 'https://evil.test' } });
    expectDocumented('POST', '/iam/auth/logout', answer, 403, 'IAM_CSRF_REJECTED');
  });
});

describe('OpenID Connect (authenticator oidc, against a real provider)', () => {
  let op: TestOp;
  let oidcGateway: RunningGateway;
  let base: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    op = await startTestOp({
      clients: [{ client_id: 'gw', client_secret: 'gw-secret', redirect_uris: [`${base}/iam/auth/oidc/callback`], grant_types: ['authorization_code'], response_types: ['code'] }],
      accounts: { alice: { sub: 'u-alice', password: 'alice-password' } },
    });
    oidcGateway = await startTestGateway(upstream.url, {
      PORT: String(port),
      IAM_AUTHENTICATOR_TYPE: 'oidc',
      IAM_OIDC_ISSUER: op.issuer,
      IAM_OIDC_CLIENT_ID: 'gw',
      IAM_OIDC_CLIENT_SECRET: 'gw-secret',
      IAM_OIDC_REDIRECT_URI: `${base}/iam/auth/oidc/callback`,
    });
    // u-alice exists (the example provisioning); her provider account joins her because an admin linked it.
    await oidcGateway.services!.repository.applyProvisioning({ users: [{ userId: 'u-alice', identities: [{ identityId: 'oidc:u-alice', identityDomain: op.issuer }] }] });
  }, 60_000);
  afterAll(async () => {
    await oidcGateway?.close();
    await op?.close();
  });

  it('login 302, callback 303 (400 replayed, 401 refused), logout 302, back-channel 200 and 400', async () => {
    const started = await send('GET', '/iam/auth/oidc/login?returnTo=%2F', { base });
    expectDocumented('GET', '/iam/auth/oidc/login', started, 302);
    const stateCookie = /__Host-iam-oidc=([^;]+)/.exec(started.headers.get('set-cookie') ?? '')![1]!;
    const callback = new URL(await op.loginThrough(started.headers.get('location')!, 'alice', 'alice-password', `${base}/iam/auth/oidc/callback`));
    const path = `/iam/auth/oidc/callback${callback.search}`;
    const done = await send('GET', path, { base, headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
    expectDocumented('GET', path, done, 303);
    expectDocumented('GET', path, await send('GET', path, { base, headers: { cookie: `__Host-iam-oidc=${stateCookie}` } }), 400, 'IAM_OIDC_STATE_INVALID');

    const again = await send('GET', '/iam/auth/oidc/login', { base });
    const againCookie = /__Host-iam-oidc=([^;]+)/.exec(again.headers.get('set-cookie') ?? '')![1]!;
    const state = new URL(again.headers.get('location')!).searchParams.get('state')!;
    const refusedPath = `/iam/auth/oidc/callback?error=access_denied&state=${state}`;
    expectDocumented('GET', refusedPath, await send('GET', refusedPath, { base, headers: { cookie: `__Host-iam-oidc=${againCookie}` } }), 401, 'IAM_OIDC_LOGIN_FAILED');

    const session = /__Host-iam-session=([^;]+)/.exec(done.headers.get('set-cookie') ?? '')![1]!;
    expectDocumented('GET', '/iam/auth/oidc/logout', await send('GET', '/iam/auth/oidc/logout', { base, headers: { cookie: `__Host-iam-session=${session}` } }), 302);

    const form = (token: string): string => new URLSearchParams({ logout_token: token }).toString();
    const claims = { iss: op.issuer, aud: 'gw', iat: Math.floor(Date.now() / 1000), jti: 'openapi-1', sub: 'u-alice', events: { 'http://schemas.openid.net/event/backchannel-logout': {} } };
    const bcl = '/iam/auth/oidc/backchannel-logout';
    const formHeaders = { 'content-type': 'application/x-www-form-urlencoded' };
    expect(validator.requestBodyErrors('POST', bcl, { logout_token: 'x' })).toEqual([]);
    expectDocumented('POST', bcl, await send('POST', bcl, { base, raw: form(await op.sign(claims)), headers: formHeaders }), 200);
    expectDocumented('POST', bcl, await send('POST', bcl, { base, raw: form(await op.sign({ ...claims, aud: 'other' })), headers: formHeaders }), 400, 'IAM_LOGOUT_TOKEN_INVALID');
  });

  it('login 502 when the provider cannot be reached', async () => {
    const down = await startTestGateway(upstream.url, {
      IAM_AUTHENTICATOR_TYPE: 'oidc',
      IAM_OIDC_ISSUER: `http://127.0.0.1:${await freePort()}`,
      IAM_OIDC_CLIENT_ID: 'gw',
      IAM_OIDC_CLIENT_SECRET: 'gw-secret',
      IAM_OIDC_REDIRECT_URI: 'http://127.0.0.1:1/iam/auth/oidc/callback',
    });
    try {
      expectDocumented('GET', '/iam/auth/oidc/login', await send('GET', '/iam/auth/oidc/login', { base: down.url }), 502, 'IAM_IDP_UNAVAILABLE');
    } finally {
      await down.close();
    }
  });
});

describe('every operation that needs a token', () => {
  const guarded = validator
    .operations()
    .filter((o) => {
      const security = o.operation.security ?? openApiDocument.security;
      return security.length > 0 && !isOptional(security);
    })
    .map((o) => [o.operation.operationId, o.method.toUpperCase(), o.pathTemplate.replace(/\{([^}]+)\}/g, (_, name: string) => sampleOf(o.pathTemplate, name))] as const);

  it.each(guarded)('%s answers 401 with a Bearer challenge without a token', async (_id, method, path) => {
    const answer = await send(method, path);
    expectDocumented(method, path, answer, 401, 'IAM_UNAUTHENTICATED');
    expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="iam-gateway"');
  });

  it.each(guarded)('%s answers 401 invalid_token for an unknown token', async (_id, method, path) => {
    const answer = await send(method, path, { token: `iamt_${'Q'.repeat(43)}` });
    expectDocumented(method, path, answer, 401, 'IAM_UNAUTHENTICATED');
    expect(answer.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });
});

describe('auth and sessions', () => {
  it('GET /iam/auth/me 200; POST /iam/auth/logout 204, then 401 for the same token', async () => {
    const session = await fresh('bob');
    const me = await send('GET', '/iam/auth/me', { token: session.accessToken });
    expectDocumented('GET', '/iam/auth/me', me, 200);
    expect(me.body).toMatchObject({ userId: 'u-bob', displayName: 'Bob' });
    expectDocumented('POST', '/iam/auth/logout', await send('POST', '/iam/auth/logout', { token: session.accessToken }), 204);
    expectDocumented('GET', '/iam/auth/me', await send('GET', '/iam/auth/me', { token: session.accessToken }), 401, 'IAM_UNAUTHENTICATED');
  });

  it('GET /iam/sessions 200 lists active, logged-out and revoked sessions', async () => {
    const current = await fresh('alice');
    const loggedOut = await fresh('alice');
    const revoked = await fresh('alice');
    expect((await send('POST', '/iam/auth/logout', { token: loggedOut.accessToken })).status).toBe(204);
    expectDocumented('POST', `/iam/sessions/${revoked.sessionId}/revoke`, await send('POST', `/iam/sessions/${revoked.sessionId}/revoke`, { token: current.accessToken }), 204);
    const answer = await send('GET', '/iam/sessions', { token: current.accessToken });
    expectDocumented('GET', '/iam/sessions', answer, 200);
    const byId = new Map((answer.body as Array<{ sessionId: string; state: string; current: boolean }>).map((s) => [s.sessionId, s]));
    expect(byId.get(current.sessionId)).toMatchObject({ state: 'active', current: true });
    expect(byId.get(loggedOut.sessionId)).toMatchObject({ state: 'logged_out', current: false });
    expect(byId.get(revoked.sessionId)).toMatchObject({ state: 'revoked', current: false, revokeReason: 'revoked_by_user' });
  });

  it.each([
    ['an unknown session', async () => '00000000-0000-4000-8000-000000000000'],
    ["another user's session", async () => (await fresh('bob')).sessionId],
  ])('POST /iam/sessions/{sessionId}/revoke 404 for %s', async (_name, target) => {
    const alice = await fresh('alice');
    const path = `/iam/sessions/${await target()}/revoke`;
    expectDocumented('POST', path, await send('POST', path, { token: alice.accessToken }), 404, 'IAM_SESSION_NOT_FOUND');
  });

  it('POST /iam/sessions/revoke-others 204 ends the other sessions only', async () => {
    const other = await fresh('bob');
    const keeper = await fresh('bob');
    expectDocumented('POST', '/iam/sessions/revoke-others', await send('POST', '/iam/sessions/revoke-others', { token: keeper.accessToken }), 204);
    expect((await send('GET', '/iam/auth/me', { token: other.accessToken })).status).toBe(401);
    expectDocumented('GET', '/iam/auth/me', await send('GET', '/iam/auth/me', { token: keeper.accessToken }), 200);
  });
});

describe('authorization', () => {
  it('GET /iam/authorization/profiles 200', async () => {
    const alice = await fresh('alice');
    const answer = await send('GET', '/iam/authorization/profiles', { token: alice.accessToken });
    expectDocumented('GET', '/iam/authorization/profiles', answer, 200);
    expect((answer.body as Array<{ profileId: string }>).map((p) => p.profileId).sort()).toEqual(['p-alice-editor', 'p-alice-reader']);
  });

  it('POST /iam/authorization/profiles/{profileId}/switch 200, and 404 for a profile not available', async () => {
    const alice = await fresh('alice');
    const switched = await send('POST', '/iam/authorization/profiles/p-alice-reader/switch', { token: alice.accessToken });
    expectDocumented('POST', '/iam/authorization/profiles/p-alice-reader/switch', switched, 200);
    expect(switched.body).toMatchObject({ principal: { activeProfileId: 'p-alice-reader' } });
    for (const profileId of ['p-nobody', 'p-bob-editor']) {
      const path = `/iam/authorization/profiles/${profileId}/switch`;
      expectDocumented('POST', path, await send('POST', path, { token: alice.accessToken }), 404, 'IAM_PROFILE_NOT_FOUND');
    }
  });

  describe('POST /iam/authorization/check and /plan', () => {
    it('200: one result per check in order; the plan of a resource type', async () => {
      const alice = await fresh('alice');
      const checks = [{ permissionCode: 'project:list' }, { permissionCode: 'admin:write' }];
      const answer = await send('POST', '/iam/authorization/check', { token: alice.accessToken, json: { checks } });
      expectDocumented('POST', '/iam/authorization/check', answer, 200);
      expect((answer.body as { results: Array<{ allowed: boolean }> }).results.map((result) => result.allowed)).toEqual([true, false]);
      const plan = await send('POST', '/iam/authorization/plan', { token: alice.accessToken, json: { permissionCode: 'project:read', resourceType: 'PROJECT', access: 'READ' } });
      expectDocumented('POST', '/iam/authorization/plan', plan, 200);
    });

    it.each([
      ['no checks', { checks: [] }],
      ['101 checks', { checks: Array.from({ length: 101 }, () => ({ permissionCode: 'project:read' })) }],
      ['an unknown access mode', { checks: [{ permissionCode: 'project:read', resource: { type: 'PROJECT', id: '1', access: 'EXECUTE' } }] }],
      ['a malformed permission code', { checks: [{ permissionCode: 'not a code' }] }],
    ])('400 for %s', async (_name, json) => {
      const alice = await fresh('alice');
      expectDocumented('POST', '/iam/authorization/check', await send('POST', '/iam/authorization/check', { token: alice.accessToken, json }), 400, 'IAM_VALIDATION_FAILED');
    });

    it('401 without a credential; 403 naming a subject without iam.authorization.decisions:check', async () => {
      expectDocumented('POST', '/iam/authorization/check', await send('POST', '/iam/authorization/check', { json: { checks: [{ permissionCode: 'x:y' }] } }), 401, 'IAM_UNAUTHENTICATED');
      expectDocumented('POST', '/iam/authorization/plan', await send('POST', '/iam/authorization/plan', { json: { permissionCode: 'x:y', resourceType: 'X', access: 'READ' } }), 401, 'IAM_UNAUTHENTICATED');
      const alice = await fresh('alice');
      const named = await send('POST', '/iam/authorization/check', { token: alice.accessToken, json: { checks: [{ permissionCode: 'x:y' }], subject: { userId: 'u-bob' } } });
      expectDocumented('POST', '/iam/authorization/check', named, 403, 'IAM_ACCESS_DENIED');
      expectDocumented('POST', '/iam/authorization/plan', await send('POST', '/iam/authorization/plan', { token: alice.accessToken, json: { permissionCode: 'x:y', resourceType: 'X', access: 'READ', subject: { userId: 'u-bob' } } }), 403, 'IAM_ACCESS_DENIED');
      expectDocumented('POST', '/iam/authorization/plan', await send('POST', '/iam/authorization/plan', { token: alice.accessToken, json: { permissionCode: 'x', resourceType: 'X', access: 'READ' } }), 400, 'IAM_VALIDATION_FAILED');
    });
  });

  describe('POST /iam/authorization/diagnostics', () => {
    const path = '/iam/authorization/diagnostics';
    it.each([
      ['an administrator: a granted permission on a resource', 'admin', { permissionCode: 'admin:write', resourceType: 'PROJECT', resourceId: '1', scopeAccess: 'READ' }, true, 'SCOPE_GRANTED'],
      ['an administrator: a client type the profile does not serve', 'admin', { permissionCode: 'admin:write', clientType: 'KIOSK' }, false, 'CLIENT_TYPE_MISMATCH'],
      ['an administrator: another identity domain', 'admin', { permissionCode: 'admin:write', domain: 'elsewhere.org' }, false, 'DOMAIN_MISMATCH'],
      ['a declared host route', 'alice', { method: 'GET', path: '/api/projects/1' }, true, 'PERMISSION_GRANTED'],
      ['an undeclared host route', 'alice', { method: 'GET', path: '/nowhere' }, false, 'ROUTE_NOT_DECLARED'],
    ])('200 with the decision for %s', async (_name, user, body, allowed, lastStep) => {
      expect(validator.requestBodyErrors('POST', path, body)).toEqual([]);
      const caller = await fresh(user);
      const answer = await send('POST', path, { token: caller.accessToken, json: body });
      expectDocumented('POST', path, answer, 200);
      const decision = answer.body as { allowed: boolean; steps: Array<{ code: string }>; route?: unknown };
      expect(decision.allowed).toBe(allowed);
      expect(decision.steps.at(-1)?.code).toBe(lastStep);
      if ('method' in body && allowed) expect(decision.route).toMatchObject({ pattern: expect.any(String), line: expect.any(Number) });
    });

    it('#11.13: the permission form for the caller\'s own principal; a (permission, resource type) pair no route declares is ROUTE_NOT_DECLARED', async () => {
      const alice = await fresh('alice');
      const own = await send('POST', path, { token: alice.accessToken, json: { permissionCode: 'project:list' } });
      expectDocumented('POST', path, own, 200);
      expect(own.body).toMatchObject({ allowed: true, userId: 'u-alice' });
      const body = { permissionCode: 'project:read', resourceType: 'PROJECT', resourceId: '2' };
      const undeclared = await send('POST', path, { token: alice.accessToken, json: body });
      expectDocumented('POST', path, undeclared, 200);
      expect(undeclared.body).toMatchObject({ allowed: false, failedStep: 'ROUTE_NOT_DECLARED' });
    });

    it.each([
      ['both body shapes at once', { json: { method: 'GET', path: '/x', permissionCode: 'project:read' } }, 'IAM_VALIDATION_FAILED'],
      ['a resource without its id', { json: { permissionCode: 'project:read', resourceType: 'PROJECT' } }, 'IAM_VALIDATION_FAILED'],
      ['malformed JSON', { raw: '{' }, 'IAM_VALIDATION_FAILED'],
      ['a path the proxy would refuse', { json: { method: 'GET', path: '/api/projects/%2F..%2Fadmin' } }, 'IAM_BAD_REQUEST'],
    ])('400 for %s', async (_name, options, code) => {
      const alice = await fresh('alice');
      expectDocumented('POST', path, await send('POST', path, { token: alice.accessToken, ...options }), 400, code);
    });
  });

  it('GET /iam/authorization/decisions/{decisionId} 200 for the denied caller, 404 otherwise', async () => {
    const alice = await fresh('alice');
    const denied = await send('GET', '/api/admin/settings', { token: alice.accessToken });
    expect(denied.status).toBe(403);
    const decisionId = (denied.body as { decisionId: string }).decisionId;
    const path = `/iam/authorization/decisions/${decisionId}`;
    const answer = await send('GET', path, { token: alice.accessToken });
    expectDocumented('GET', path, answer, 200);
    expect(answer.body).toMatchObject({ decisionId, allowed: false, failedStep: 'PERMISSION_DENIED', userId: 'u-alice' });
    const bob = await fresh('bob');
    expectDocumented('GET', path, await send('GET', path, { token: bob.accessToken }), 404, 'IAM_DECISION_NOT_FOUND');
    const unknown = '/iam/authorization/decisions/00000000-0000-4000-8000-000000000000';
    expectDocumented('GET', unknown, await send('GET', unknown, { token: alice.accessToken }), 404, 'IAM_DECISION_NOT_FOUND');
  });

  describe('GET /iam/authorization/forward-auth', () => {
    const path = '/iam/authorization/forward-auth';
    const original = (method: string, uri: string): Record<string, string> => ({ 'x-forwarded-method': method, 'x-forwarded-uri': uri });

    it('200 with the identity headers for an allowed request', async () => {
      const alice = await fresh('alice');
      const answer = await send('GET', path, { token: alice.accessToken, headers: original('GET', '/api/projects?page=2') });
      expectDocumented('GET', path, answer, 200);
      expect(answer.headers.get('x-iam-user-id')).toBe('u-alice');
      expect(answer.headers.get('x-iam-profile-id')).toBe('p-alice-editor');
      expect(answer.headers.get('x-iam-permission')).toBe('project:list');
    });

    it('200 without identity headers for a public route and no token (X-Original-* headers)', async () => {
      const answer = await send('GET', path, { headers: { 'x-original-method': 'GET', 'x-original-uri': '/health' } });
      expectDocumented('GET', path, answer, 200);
      expect(answer.headers.get('x-iam-user-id')).toBeNull();
    });

    it('401 when the original request needs a token', async () => {
      const answer = await send('GET', path, { headers: original('GET', '/api/projects') });
      expectDocumented('GET', path, answer, 401, 'IAM_UNAUTHENTICATED');
    });

    it('403 with decisionId and step when the policy denies', async () => {
      const alice = await fresh('alice');
      const answer = await send('GET', path, { token: alice.accessToken, headers: original('DELETE', '/api/admin/users/1') });
      expectDocumented('GET', path, answer, 403, 'IAM_ACCESS_DENIED');
      expect(answer.body).toMatchObject({ step: 'PERMISSION_DENIED', decisionId: expect.any(String) });
    });

    it.each([
      ['no original URI', { 'x-forwarded-method': 'GET' }],
      ['a method that is not one', original('GE T', '/api/projects')],
      ['a target the proxy refuses', original('GET', '/api/%2e%2e%2Fadmin')],
    ])('400 IAM_BAD_REQUEST for %s', async (_name, headers) => {
      expectDocumented('GET', path, await send('GET', path, { headers }), 400, 'IAM_BAD_REQUEST');
    });
  });
});

describe('GET /iam/openapi.json and GET /iam/.well-known/jwks.json', () => {
  it('openapi.json 200 serves this document to anyone', async () => {
    const answer = await send('GET', '/iam/openapi.json');
    expectDocumented('GET', '/iam/openapi.json', answer, 200);
    expect(answer.body).toEqual(JSON.parse(JSON.stringify(openApiDocument)));
  });

  it('jwks.json 200 with no keys while assertions are off', async () => {
    const answer = await send('GET', '/iam/.well-known/jwks.json');
    expectDocumented('GET', '/iam/.well-known/jwks.json', answer, 200);
    expect(answer.body).toEqual({ keys: [] });
  });

  it('jwks.json 200 with one public key (no private member) while assertions are on', async () => {
    const signing = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), IAM_FORWARD_ASSERTION_ENABLED: 'true' });
    try {
      const response = await fetch(`${signing.url}/iam/.well-known/jwks.json`);
      const body = (await response.json()) as { keys: Array<Record<string, unknown>> };
      validator.assertMatches('GET', '/iam/.well-known/jwks.json', response.status, response.headers.get('content-type'), body, response.headers);
      expect(body.keys).toHaveLength(1);
      expect(body.keys[0]).not.toHaveProperty('d');
      const alice = await login(signing.url, 'alice');
      const allowed = await fetch(`${signing.url}/iam/authorization/forward-auth`, { headers: { ...bearer(alice.accessToken), 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/api/projects' } });
      validator.assertMatches('GET', '/iam/authorization/forward-auth', allowed.status, allowed.headers.get('content-type'), await allowed.text(), allowed.headers);
      expect(allowed.headers.get('x-iam-assertion')).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    } finally {
      await signing.close();
    }
  });
});

describe('admin endpoints', () => {
  let admin: string;
  const stamp = Date.now().toString(36);
  const userId = `u-oa-${stamp}`;
  const versionId = `oa-v-${stamp}`;
  const profileId = `p-oa-${stamp}`;

  beforeAll(async () => {
    admin = (await fresh('admin')).accessToken;
  });

  /** Sends as the admin and checks the answer against the document. */
  async function adminCall(method: string, path: string, status: number, options: { json?: unknown; headers?: Record<string, string>; code?: string } = {}): Promise<Answer> {
    if (options.json !== undefined) {
      const match = validator.operationFor(method, path);
      if (status < 300) expect(validator.requestBodyErrors(method, match!.pathTemplate, options.json)).toEqual([]);
    }
    const answer = await send(method, path, { token: admin, json: options.json, headers: options.headers });
    expectDocumented(method, path, answer, status, options.code);
    return answer;
  }

  it('403 AccessDenied for a caller without the admin permission', async () => {
    const alice = await fresh('alice');
    const answer = await send('GET', '/iam/admin/users', { token: alice.accessToken });
    expectDocumented('GET', '/iam/admin/users', answer, 403, 'IAM_ACCESS_DENIED');
    expect(answer.body).toMatchObject({ step: 'PERMISSION_DENIED' });
  });

  it('PUT /iam/admin/templates/{versionId} 201, 200, 400', async () => {
    const path = `/iam/admin/templates/${versionId}`;
    await adminCall('PUT', path, 201, { json: { name: 'OpenAPI check', permissions: ['project:read', 'project:list'] } });
    const updated = await adminCall('PUT', path, 200, { json: { name: 'OpenAPI check', description: 'Reads projects.', permissions: ['project:read'] } });
    expect(updated.body).toMatchObject({ versionId, description: 'Reads projects.', permissions: ['project:read'] });
    await adminCall('PUT', path, 400, { json: { name: 'x', permissions: ['not a code'] }, code: 'IAM_VALIDATION_FAILED' });
  });

  it('PUT /iam/admin/users/{userId} 201, 200; GET /iam/admin/users 200 paged, 400', async () => {
    await adminCall('PUT', `/iam/admin/users/${userId}`, 201, { json: { displayName: 'OpenAPI User', enabled: true } });
    await adminCall('PUT', `/iam/admin/users/${userId}`, 200, { json: { displayName: 'OpenAPI User', enabled: true } });
    const page = await adminCall('GET', '/iam/admin/users?limit=1', 200);
    const next = (page.body as { nextCursor: string | null }).nextCursor;
    expect(next).toEqual(expect.any(String));
    await adminCall('GET', `/iam/admin/users?limit=2&cursor=${encodeURIComponent(next!)}&q=u`, 200);
    await adminCall('GET', '/iam/admin/users?color=blue', 400, { code: 'IAM_VALIDATION_FAILED' });
  });

  it('PUT /iam/admin/identities/{identityId} 201, 200, 409; GET identities 200, 404', async () => {
    await adminCall('PUT', `/iam/admin/identities/id-oa-${stamp}`, 201, { json: { userId, identityDomain: 'openapi.example', enabled: true } });
    await adminCall('PUT', `/iam/admin/identities/id-oa-${stamp}`, 200, { json: { userId, identityDomain: 'openapi.example', enabled: false } });
    await adminCall('PUT', `/iam/admin/identities/id-oa-${stamp}`, 409, { json: { userId: 'u-bob', identityDomain: 'openapi.example', enabled: true }, code: 'IAM_CONFLICT' });
    const listed = await adminCall('GET', `/iam/admin/users/${userId}/identities`, 200);
    expect(listed.body).toEqual([{ identityId: `id-oa-${stamp}`, userId, identityDomain: 'openapi.example', enabled: false, version: 2 }]);
    await adminCall('GET', '/iam/admin/users/u-nobody-here/identities', 404, { code: 'IAM_NOT_FOUND' });
  });

  it('PUT /iam/admin/identities/{identityId} 404 for a body naming an unknown user', async () => {
    await adminCall('PUT', `/iam/admin/identities/id-oa-orphan-${stamp}`, 404, { json: { userId: 'u-nobody-here', identityDomain: 'openapi.example', enabled: true }, code: 'IAM_NOT_FOUND' });
  });

  it('PUT /iam/admin/profiles/{profileId} 201, 200 with If-Match, 409 stale, 422 unknown template; scopes 200, 404', async () => {
    const path = `/iam/admin/profiles/${profileId}`;
    const body = { userId, profileName: 'OpenAPI', templateVersionId: versionId, clientTypes: ['WEB'], enabled: true, revoked: false };
    const created = await adminCall('PUT', path, 201, { json: body });
    const etag = created.headers.get('etag')!;
    const updated = await adminCall('PUT', path, 200, { json: { ...body, profileName: 'OpenAPI renamed' }, headers: { 'if-match': etag } });
    await adminCall('PUT', path, 409, { json: body, headers: { 'if-match': etag }, code: 'IAM_CONFLICT' });
    await adminCall('PUT', path, 422, { json: { ...body, templateVersionId: 'no-such-template' }, code: 'IAM_VALIDATION_FAILED' });
    const scopes = [{ scopeType: 'PROJECT', scopeRefId: '7', accessMode: 'WRITE' }];
    const scoped = await adminCall('PUT', `${path}/scopes`, 200, { json: scopes, headers: { 'if-match': updated.headers.get('etag')! } });
    expect(scoped.body).toMatchObject({ profileId, scopes });
    await adminCall('PUT', '/iam/admin/profiles/p-no-such-profile/scopes', 404, { json: scopes, code: 'IAM_NOT_FOUND' });
  });

  it('GET templates (list, one) and profiles (per user, one with the ETag a write takes back): 200, 404, 400', async () => {
    const templates = await adminCall('GET', '/iam/admin/templates', 200);
    expect((templates.body as Array<{ versionId: string }>).map((t) => t.versionId)).toContain(versionId);
    const template = await adminCall('GET', `/iam/admin/templates/${versionId}`, 200);
    expect(template.body).toMatchObject({ versionId, permissions: ['project:read'] });
    await adminCall('GET', '/iam/admin/templates/no-such-template', 404, { code: 'IAM_NOT_FOUND' });
    await adminCall('GET', '/iam/admin/templates/%20space', 400, { code: 'IAM_VALIDATION_FAILED' });
    const profiles = await adminCall('GET', `/iam/admin/users/${userId}/profiles`, 200);
    expect(profiles.body).toEqual([expect.objectContaining({ profileId, userId })]);
    await adminCall('GET', '/iam/admin/users/u-nobody-here/profiles', 404, { code: 'IAM_NOT_FOUND' });
    const read = await adminCall('GET', `/iam/admin/profiles/${profileId}`, 200);
    expect(read.headers.get('etag')).toBe(`"${(read.body as { version: number }).version}"`);
    // Read, then edit with what was read: the ETag is current, so the write is accepted.
    const { profileId: _id, scopes: _scopes, version: _version, ...fields } = read.body as Record<string, unknown>;
    await adminCall('PUT', `/iam/admin/profiles/${profileId}`, 200, { json: fields, headers: { 'if-match': read.headers.get('etag')! } });
    await adminCall('GET', '/iam/admin/profiles/p-no-such-profile', 404, { code: 'IAM_NOT_FOUND' });
  });

  it('POST /iam/admin/users/{userId}/authorization-version 200, 404', async () => {
    const raised = await adminCall('POST', `/iam/admin/users/${userId}/authorization-version`, 200);
    expect(raised.body).toMatchObject({ userId, authorizationVersion: expect.any(Number) });
    await adminCall('POST', '/iam/admin/users/u-nobody-here/authorization-version', 404, { code: 'IAM_NOT_FOUND' });
  });

  it('POST /iam/admin/sessions/{sessionId}/revoke 204, 404; POST /iam/admin/users/{userId}/sessions/revoke 200', async () => {
    const victim = await fresh('bob');
    await adminCall('POST', `/iam/admin/sessions/${victim.sessionId}/revoke`, 204, { json: { reason: 'openapi check' } });
    expect((await send('GET', '/iam/auth/me', { token: victim.accessToken })).status).toBe(401);
    await adminCall('POST', '/iam/admin/sessions/00000000-0000-4000-8000-000000000000/revoke', 404, { code: 'IAM_SESSION_NOT_FOUND' });
    await fresh('bob');
    const revoked = await adminCall('POST', '/iam/admin/users/u-bob/sessions/revoke', 200);
    expect((revoked.body as { revoked: number }).revoked).toBeGreaterThanOrEqual(1);
  });

  it('GET /iam/admin/users/{userId} 200, 404', async () => {
    const user = await adminCall('GET', '/iam/admin/users/u-alice', 200);
    expect(user.body).toMatchObject({ userId: 'u-alice', enabled: true });
    await adminCall('GET', '/iam/admin/users/u-nobody-here', 404, { code: 'IAM_NOT_FOUND' });
  });

  it('GET /iam/admin/users/{userId}/sessions 200 (with a next link), 404, 400', async () => {
    await fresh('bob');
    await fresh('bob');
    const page = await adminCall('GET', '/iam/admin/users/u-bob/sessions?limit=1', 200);
    expect(page.body).toEqual([expect.objectContaining({ state: expect.any(String), current: false })]);
    const next = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')![1]!;
    const second = await adminCall('GET', next, 200);
    expect((second.body as Array<{ sessionId: string }>)[0]!.sessionId).not.toBe((page.body as Array<{ sessionId: string }>)[0]!.sessionId);
    await adminCall('GET', '/iam/admin/users/u-nobody-here/sessions', 404, { code: 'IAM_NOT_FOUND' });
    await adminCall('GET', '/iam/admin/users/u-bob/sessions?cursor=nonsense', 400, { code: 'IAM_VALIDATION_FAILED' });
  });

  it('GET /iam/admin/policy 200 (routes with file:line); POST /iam/admin/policy/coverage 200, 400', async () => {
    const policy = await adminCall('GET', '/iam/admin/policy', 200);
    const body = policy.body as { hash: string; lastError: unknown; routes: Array<{ pattern: string; file: string; line: number; mode: string }> };
    expect(body.hash).toMatch(/.{8,}/);
    expect(body.lastError).toBeNull();
    expect(body.routes.length).toBeGreaterThan(3);
    expect(body.routes.every((route) => route.file.endsWith('.yaml') && route.line >= 1)).toBe(true);
    const document = JSON.stringify({ openapi: '3.0.3', info: { title: 'host', version: '1' }, paths: { '/api/projects': { get: {} }, '/api/not-declared-anywhere': { delete: {} } } });
    const coverage = await adminCall('POST', '/iam/admin/policy/coverage', 200, { json: { document } });
    expect(coverage.body).toMatchObject({ operations: 2, uncovered: [{ method: 'DELETE', path: '/api/not-declared-anywhere' }] });
    await adminCall('POST', '/iam/admin/policy/coverage', 400, { json: { document: 'not: [an openapi' }, code: 'IAM_VALIDATION_FAILED' });
    // YAML, with its line breaks, and larger than the usual body limit (a real host description).
    const paths = Array.from({ length: 1500 }, (_, index) => `  /api/generated/${index}:\n    get:\n      summary: "generated operation number ${index} of a large description"\n`).join('');
    const yaml = `openapi: 3.0.3\ninfo:\n  title: host\n  version: "1"\npaths:\n  /api/projects:\n    get: {}\n${paths}`;
    expect(yaml.length).toBeGreaterThan(64 * 1024);
    const large = await adminCall('POST', '/iam/admin/policy/coverage', 200, { json: { document: yaml } });
    expect((large.body as { operations: number }).operations).toBe(1501);
  });

  it('diagnostics as another user needs iam.admin.diagnostics:read', async () => {
    const asAlice = await adminCall('POST', '/iam/authorization/diagnostics', 200, { json: { method: 'GET', path: '/api/admin/stats', userId: 'u-alice' } });
    expect(asAlice.body).toMatchObject({ userId: 'u-alice', allowed: false, failedStep: 'PERMISSION_DENIED' });
    const alice = await fresh('alice');
    const refused = await send('POST', '/iam/authorization/diagnostics', { token: alice.accessToken, json: { method: 'GET', path: '/api/projects', userId: 'u-admin' } });
    expectDocumented('POST', '/iam/authorization/diagnostics', refused, 403, 'IAM_ACCESS_DENIED');
  });

  it('GET /iam/admin/audit 200, 400', async () => {
    const page = await adminCall('GET', `/iam/admin/audit?userId=u-admin&limit=5&since=${encodeURIComponent('2020-01-01T00:00:00Z')}`, 200);
    expect((page.body as { items: unknown[] }).items.length).toBeGreaterThan(0);
    await adminCall('GET', '/iam/admin/audit?since=yesterday', 400, { code: 'IAM_VALIDATION_FAILED' });
  });
});

describe('the console', () => {
  it('GET /iam/console and a deep link 200 (a strict CSP), 302 for a browser without a session, 401 for others, 404 unknown page; assets 200, 304, 404', async () => {
    const alice = await fresh('alice');
    const cookie = { cookie: `__Host-iam-session=${alice.accessToken}` };
    const page = await send('GET', '/iam/console', { headers: cookie });
    expectDocumented('GET', '/iam/console', page, 200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).not.toContain('unsafe-inline');
    expectDocumented('GET', '/iam/console/explain?decisionId=x', await send('GET', '/iam/console/explain?decisionId=x', { headers: cookie }), 200);
    const redirected = await send('GET', '/iam/console/policy', { headers: { accept: 'text/html' } });
    expectDocumented('GET', '/iam/console/policy', redirected, 302);
    expect(redirected.headers.get('location')).toBe('/iam/login?returnTo=%2Fiam%2Fconsole%2Fpolicy');
    expectDocumented('GET', '/iam/console', await send('GET', '/iam/console'), 401, 'IAM_UNAUTHENTICATED');
    expectDocumented('GET', '/iam/console/nothing-here', await send('GET', '/iam/console/nothing-here', { headers: cookie }), 404, 'IAM_NOT_FOUND');
    const script = /<script type="module" src="\/iam\/console\/assets\/([^"]+)"/.exec(page.body as string)![1]!;
    const asset = await send('GET', `/iam/console/assets/${script}`);
    expectDocumented('GET', `/iam/console/assets/${script}`, asset, 200);
    expect(asset.contentType).toBe('text/javascript; charset=utf-8');
    expectDocumented('GET', `/iam/console/assets/${script}`, await send('GET', `/iam/console/assets/${script}`, { headers: { 'if-none-match': asset.headers.get('etag')! } }), 304);
    for (const name of ['nothing.js', '.hidden.js', 'index.html']) expectDocumented('GET', `/iam/console/assets/${name}`, await send('GET', `/iam/console/assets/${name}`), 404, 'IAM_NOT_FOUND');
    // A way out of the folder is not even a path the gateway reads.
    expect((await send('GET', '/iam/console/assets/..%2F..%2Fpackage.json')).status).toBe(400);
  });
});

describe('problems from the proxy use the same components', () => {
  it('a proxied 403 is an AccessDenied problem', async () => {
    const alice = await fresh('alice');
    const answer = await send('POST', '/api/admin/users', { token: alice.accessToken, json: {} });
    expect(answer.status).toBe(403);
    validator.assertMatchesComponent('AccessDenied', 403, answer.contentType, answer.body, answer.headers);
  });

  it('a proxied 401 is an Unauthenticated problem', async () => {
    await upstream.clear();
    const answer = await send('GET', '/api/projects');
    expect(answer.status).toBe(401);
    validator.assertMatchesComponent('Unauthenticated', 401, answer.contentType, answer.body, answer.headers);
    expect(await upstream.requests()).toEqual([]);
  });
});

describe('coverage of this file', () => {
  it('checked a success answer of every documented operation, and the main failures', () => {
    const withoutSuccess = validator
      .operations()
      .map((o) => o.operation.operationId)
      .filter((id) => ![...exercised].some((e) => e.startsWith(`${id} 2`) || e.startsWith(`${id} 30`)));
    expect(withoutSuccess).toEqual([]);
    const failures = [
      'login 400', 'login 401', 'login 413', 'login 429', 'submitLoginPage 400', 'submitLoginPage 401', 'submitLoginPage 403', 'submitLoginPage 415', 'logout 403', 'completeOidcLogin 400', 'completeOidcLogin 401', 'oidcBackchannelLogout 400', 'startOidcLogin 502', 'listUserSessions 404', 'checkPolicyCoverage 400', 'getCurrentPrincipal 401', 'revokeSession 404', 'switchProfile 404', 'diagnose 400',
      'getDecision 404', 'forwardAuth 401', 'forwardAuth 403', 'forwardAuth 400', 'listUsers 403', 'putProfile 409', 'putProfile 422', 'getTemplate 404', 'getProfile 404', 'listUserProfiles 404',
    ];
    expect(failures.filter((f) => !exercised.has(f))).toEqual([]);
  });
});
