/**
 * The declared `/iam` routes (src/api/route-declaration.ts): every route the /iam router registers is a declaration;
 * the permission of a declaration is the one its OpenAPI operation publishes (`x-permission`, the role of
 * `security`) and the one the guard the gateway registers asks the engine for; what the access generates cannot be
 * written a second time in the operation.
 */
import Router from '@koa/router';
import type { Layer } from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import { OPTIONAL_SESSION, sessionGranting } from '../../src/api/openapi-builders';
import { DECLARED_ROUTES, HTTP_METHODS, openApiDocument, type OperationObject } from '../../src/api/openapi-document';
import { bodyReaderOf, componentNameOf, declaredPaths, operationOf, permissionOf, registerDeclaredRoutes, responseSchemaOf, route, routerPath, type RouteDeclaration } from '../../src/api/route-declaration';
import { Type, type Static } from '@sinclair/typebox';
import { json } from '../../src/api/openapi-builders';
import type { ResponseObject } from '../../src/api/openapi-types';
import { AuditListQuery, ReturnToQuery, SessionListQuery, UserListQuery } from '../../src/api/schemas/queries';
import { RevokedCount, Session } from '../../src/api/schemas/responses';
import { queryReaderOf } from '../../src/api/validate-query';
import { TemplateInput, UserInput, type TemplateBody } from '../../src/api/schemas/requests';
import { ProblemError } from '../../src/domain/problem';
import { iamRouter } from '../support/iam-routes';

/** Thrown by the recording engine: the guard asked for a permission (and the handler never runs). */
class Asked extends Error {
  constructor(readonly code: string) {
    super(`asked for ${code}`);
  }
}

const SESSION = { record: { principal: { userId: 'u-1', activeProfileId: 'p-1' }, clientType: 'WEB', sessionId: 's-1' } };

/** The gateway's own registration (registerIamRoutes) with a session for any bearer and an engine that records. */
function registeredRouter(): Router {
  return iamRouter({
    engine: {
      decide: (query: { permissionCode: string }) => {
        throw new Asked(query.permissionCode);
      },
    } as never,
    callers: { callerOf: () => Promise.resolve({ session: SESSION, via: 'bearer' }) } as never,
  });
}

/** The layer the router matches for `method` and the declared `path`. */
function layerOf(router: Router, method: string, path: string): Layer {
  const koaPath = `/iam${routerPath(path)}`;
  const layer = router.stack.find((candidate) => candidate.path === koaPath && candidate.methods.includes(method.toUpperCase()));
  if (layer === undefined) throw new Error(`no route ${method.toUpperCase()} ${koaPath}`);
  return layer;
}

/**
 * Runs a route's guards (every middleware but its handler) on a bearer request: the code the engine was asked for,
 * 'none' when the guards let it through without asking, or what they threw.
 */
async function guardOutcome(layer: Layer, method: string): Promise<string> {
  const guards = layer.stack.slice(0, -1) as unknown as Middleware[];
  const ctx = { method: method.toUpperCase(), state: { prepared: { authorization: 'Bearer iamt_test', cookieSession: null } } } as unknown as Context;
  const run = async (index: number): Promise<void> => {
    if (index < guards.length) await guards[index]!(ctx, (() => run(index + 1)) as Next);
  };
  try {
    await run(0);
    return 'none';
  } catch (error) {
    if (error instanceof Asked) return error.code;
    throw error;
  }
}

const declared = DECLARED_ROUTES.map((declaration) => ({ declaration, name: `${declaration.method.toUpperCase()} ${declaration.path}` }));

/** `METHOD /iam/path/{param}` of each route the /iam router registers (HEAD follows GET), in registration order. */
function registeredRoutes(router: Router): string[] {
  return router.stack
    .filter((layer) => layer.methods.length > 0)
    .flatMap((layer) => layer.methods.filter((method) => !(method === 'HEAD' && layer.methods.includes('GET'))).map((method) => `${method} ${String(layer.path).replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`));
}

describe('declared /iam routes', () => {
  it('declares each method and path once', () => {
    expect(declared.length).toBeGreaterThanOrEqual(43);
    expect(new Set(declared.map((route) => route.name)).size).toBe(declared.length);
  });

  it('registers every route of the /iam router from a declaration, and every declaration once', () => {
    // No route is registered plainly (router.get and the like): each is a declaration, so each has its operation.
    const registered = registeredRoutes(registeredRouter());
    expect([...registered].sort()).toEqual(declared.map((route) => route.name).sort());
  });

  it.each(declared)('$name: the served operation publishes the declared access', ({ declaration }) => {
    const served = openApiDocument.paths[declaration.path]?.[declaration.method];
    expect(served).toBeDefined();
    const { access } = declaration;
    const permission = permissionOf(access);
    const optional = typeof access === 'object' && 'guard' in access && access.security === 'optional-session';
    if (permission !== null) {
      expect(served!['x-permission']).toBe(permission);
      expect(served!.security).toEqual(sessionGranting(permission));
      expect(served!.security).toEqual([{ bearer: [permission] }, { sessionCookie: [permission] }]);
      expect(served!.responses['403']).toBeDefined();
    } else {
      expect(served!['x-permission']).toBeUndefined();
      if (access === 'public') expect(served!.security).toEqual([]);
      else if (optional) expect(served!.security).toEqual(OPTIONAL_SESSION);
      else expect(served!.security).toBeUndefined(); // the document's default: the bearer or the cookie
    }
    // A session is needed (401 without one) unless the route is public or takes a session only when one is sent.
    if (access !== 'public' && !optional) expect(served!.responses['401']).toBeDefined();
    // The served operation is the generated one (plus the refusals every operation lists).
    expect({ ...served, responses: { ...served!.responses, '414': undefined } }).toEqual({ ...operationOf(declaration), responses: { ...operationOf(declaration).responses, '414': undefined } });
  });

  it.each(declared)('$name: the registered guard asks for the declared permission', async ({ declaration }) => {
    const router = registeredRouter();
    const outcome = await guardOutcome(layerOf(router, declaration.method, declaration.path), declaration.method);
    expect(outcome).toBe(permissionOf(declaration.access) ?? 'none');
  });

  it('publishes each declared body, by its component, as the operation\'s requestBody, and nothing else has one', () => {
    for (const { declaration, name } of declared) {
      const served = openApiDocument.paths[declaration.path]![declaration.method]!;
      if (declaration.body === undefined) {
        expect([name, served.requestBody]).toEqual([name, undefined]);
        continue;
      }
      const media = declaration.body.media ?? 'application/json';
      expect([name, served.requestBody!.content[media]!.schema]).toEqual([name, { $ref: `#/components/schemas/${componentNameOf(declaration.body.schema, name)}` }]);
      expect(openApiDocument.components.schemas![componentNameOf(declaration.body.schema, name)]).toBe(declaration.body.schema);
    }
  });

  it('publishes the permissions a handler decides itself as x-permissions', () => {
    const published = Object.fromEntries(declared.filter(({ declaration }) => declaration.permissions !== undefined).map(({ declaration, name }) => [name, openApiDocument.paths[declaration.path]![declaration.method]!['x-permissions']]));
    expect(published).toEqual({
      'POST /iam/authorization/check': ['iam.authorization.decisions:check'],
      'POST /iam/authorization/plan': ['iam.authorization.decisions:check'],
      'POST /iam/authorization/diagnostics': ['iam.admin.diagnostics:read'],
      'GET /iam/authorization/decisions/{decisionId}': ['iam.admin.audit:read'],
    });
  });

  it('every x-permission in the served document comes from a declaration', () => {
    const published: string[] = [];
    for (const [path, item] of Object.entries(openApiDocument.paths)) {
      for (const method of HTTP_METHODS) {
        const operation: OperationObject | undefined = item[method];
        if (operation?.['x-permission'] !== undefined || operation?.security?.some((requirement) => Object.values(requirement).some((roles) => roles.length > 0))) {
          published.push(`${method.toUpperCase()} ${path}`);
        }
      }
    }
    const withPermission = declared.filter(({ declaration }) => permissionOf(declaration.access) !== null).map((route) => route.name);
    expect(published.sort()).toEqual(withPermission.sort());
  });
});

describe('a route declaration', () => {
  const handler = () => () => undefined;
  const base = {
    method: 'get',
    path: '/iam/admin/things/{thingId}',
    access: { permission: 'iam.admin.things:read' },
    operation: { operationId: 'getThing', summary: 'A thing', tags: ['admin'], responses: {} },
    handler,
  } satisfies RouteDeclaration<unknown>;

  it('generates x-permission, security, the 403 and the 401 from its permission', () => {
    const operation = declaredPaths([base])['/iam/admin/things/{thingId}']!.get!;
    expect(operation['x-permission']).toBe('iam.admin.things:read');
    expect(operation.security).toEqual([{ bearer: ['iam.admin.things:read'] }, { sessionCookie: ['iam.admin.things:read'] }]);
    expect(Object.keys(operation.responses)).toEqual(['401', '403', '500', '503']);
    expect(operation.description).toBe("Needs `iam.admin.things:read` in the caller's active profile.");
  });

  it('cannot set its own x-permission or security in its operation (a type error, and refused when built)', () => {
    const mismatched: RouteDeclaration<unknown> = {
      ...base,
      operation: {
        ...base.operation,
        // @ts-expect-error -- x-permission is generated from the declaration's access, never written in the operation
        'x-permission': 'iam.admin.other:read',
      },
    };
    expect(() => declaredPaths([mismatched])).toThrow(/x-permission come from its access/);
    const secured: RouteDeclaration<unknown> = {
      ...base,
      operation: {
        ...base.operation,
        // @ts-expect-error -- security is generated from the declaration's access too
        security: [],
      },
    };
    expect(() => declaredPaths([secured])).toThrow(/security and x-permission come from its access/);
  });

  it('types its handler\'s body by its declared schema: reading another is a type error', () => {
    const put = { ...base, method: 'put', access: { permission: 'iam.admin.things:write' } } as const;
    route<unknown, typeof UserInput>({
      ...put,
      body: { schema: UserInput },
      handler: (_context, request) => (ctx) => {
        // @ts-expect-error -- the handler reads a UserInput body, not a template's
        const body: TemplateBody = request.read(ctx);
        return body;
      },
    });
    route({
      ...put,
      body: { schema: TemplateInput },
      handler: (_context, request) => (ctx) => {
        const body: TemplateBody = request.read(ctx);
        return body;
      },
    });
  });

  it('generates its requestBody and x-permissions, which its operation cannot write', () => {
    const put = { ...base, method: 'put' as const, access: { permission: 'iam.admin.things:write' }, body: { schema: UserInput }, permissions: ['iam.admin.audit:read'] };
    const operation = declaredPaths([put])['/iam/admin/things/{thingId}']!.put!;
    expect(operation.requestBody).toEqual({ required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/UserInput' } } } });
    expect(operation['x-permissions']).toEqual(['iam.admin.audit:read']);
    // @ts-expect-error -- the request body comes from the declaration's body
    expect(() => declaredPaths([{ ...put, operation: { ...put.operation, requestBody: operation.requestBody } }])).toThrow(/requestBody and x-permissions come from/);
    expect(() => declaredPaths([{ ...put, permissions: ['not a code'] }])).toThrow(/not a permission code/);
    expect(() => declaredPaths([{ ...put, body: { schema: { ...UserInput } } }])).toThrow(/not a component/);
  });

  it('validates the body its handler reads with the declared schema (400 IAM_VALIDATION_FAILED otherwise)', () => {
    const reader = bodyReaderOf({ ...base, method: 'put', body: { schema: UserInput } } as RouteDeclaration<unknown>, undefined);
    const read = (body: unknown) => reader.read({ request: { body } } as never);
    expect(read({ enabled: true })).toEqual({ enabled: true });
    let refused: unknown;
    try {
      read({ enabled: 'yes' });
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ProblemError);
    expect((refused as ProblemError).code).toBe('IAM_VALIDATION_FAILED');
  });

  it('types its handler\'s ctx.body by its declared response: answering another shape is a type error', () => {
    route({
      ...base,
      response: { schema: Type.Array(Session), description: 'Sessions.' },
      handler: () => (ctx) => {
        // @ts-expect-error -- the declared response is a list of sessions, not a page of users
        ctx.body = { items: [], nextCursor: null };
      },
    });
    route({
      ...base,
      response: { schema: RevokedCount, description: 'How many.' },
      handler: () => (ctx) => {
        // @ts-expect-error -- `revoked` is a number in the declared response
        ctx.body = { revoked: 'three' };
      },
    });
    route({
      ...base,
      response: { schema: RevokedCount, description: 'How many.' },
      handler: () => (ctx) => {
        ctx.body = { revoked: 3 };
      },
    });
  });

  it('generates its query parameters and JSON success answer, which its operation cannot write', () => {
    const listed = { ...base, query: SessionListQuery, response: { schema: Type.Array(Session), description: 'Sessions.', created: 'Made.' } };
    const operation = declaredPaths([listed])['/iam/admin/things/{thingId}']!.get!;
    expect(operation.parameters).toEqual([
      { name: 'limit', in: 'query', description: expect.any(String), schema: { type: 'integer', minimum: 1, default: 200 } },
      { name: 'cursor', in: 'query', description: expect.any(String), schema: { type: 'string' } },
    ]);
    expect((operation.responses['200'] as ResponseObject).content).toEqual({ 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/Session' } } } });
    expect((operation.responses['201'] as ResponseObject).description).toBe('Made.');
    const limit = { name: 'limit', in: 'query' as const, schema: { type: 'integer' } };
    // @ts-expect-error -- a query parameter comes from the declaration's query
    expect(() => declaredPaths([{ ...base, operation: { ...base.operation, parameters: [limit] } }])).toThrow(/query parameters come from its query/);
    // @ts-expect-error -- a JSON success answer comes from the declaration's response
    expect(() => declaredPaths([{ ...base, operation: { ...base.operation, responses: { '200': json('Mine.', { type: 'object' }) } } }])).toThrow(/JSON 200 comes from its response/);
    const literal = { description: 'Mine.', content: { 'application/json': { schema: { type: 'object' } } } };
    // @ts-expect-error -- written out by hand too
    expect(() => declaredPaths([{ ...base, operation: { ...base.operation, responses: { '201': literal } } }])).toThrow(/JSON 201 comes from its response/);
    expect(() => declaredPaths([{ ...base, response: { schema: Type.Object({ a: Type.String() }), description: 'x' } }])).toThrow(/not a component/);
  });

  it('checks the declared query before its handler reads it (400 IAM_VALIDATION_FAILED naming each bad parameter)', () => {
    const reader = queryReaderOf<Static<typeof UserListQuery>>(UserListQuery, 'GET /iam/admin/users');
    const read = (query: Record<string, string | string[]>) => reader.read({ query } as never);
    const refusal = (query: Record<string, string | string[]>): { code: string; pointers: string[] } => {
      try {
        read(query);
      } catch (error) {
        const problem = error as ProblemError;
        return { code: problem.code, pointers: (problem.extensions?.errors as Array<{ pointer: string }>).map(({ pointer }) => pointer) };
      }
      throw new Error('accepted');
    };
    expect(read({})).toEqual({ limit: 50 });
    expect(read({ limit: '7', q: 'bob' })).toEqual({ limit: 7, q: 'bob' });
    for (const limit of ['0', 'abc', '-1', '1e3', ' 5', '']) expect(refusal({ limit })).toEqual({ code: 'IAM_VALIDATION_FAILED', pointers: ['/limit'] });
    expect(refusal({ q: ['a', 'b'] })).toEqual({ code: 'IAM_VALIDATION_FAILED', pointers: ['/q'] });
    expect(refusal({ sort: 'name', limit: '0' })).toEqual({ code: 'IAM_VALIDATION_FAILED', pointers: ['/sort', '/limit'] });
    expect(refusal({ q: 'x'.repeat(201) })).toEqual({ code: 'IAM_VALIDATION_FAILED', pointers: ['/q'] });
    expect(refusal({ q: 'a\u0000b' })).toEqual({ code: 'IAM_VALIDATION_FAILED', pointers: ['/q'] });
    const audit = queryReaderOf<Static<typeof AuditListQuery>>(AuditListQuery, 'GET /iam/admin/audit');
    expect(() => audit.read({ query: { since: 'yesterday' } } as never)).toThrow(ProblemError);
    expect(audit.read({ query: { since: '2026-01-31T12:00:00Z' } } as never)).toEqual({ since: '2026-01-31T12:00:00Z', limit: 50 });
  });

  it('never refuses the open query of a browser page: an unknown, repeated or bad parameter reads as absent', () => {
    const reader = queryReaderOf<Static<typeof ReturnToQuery>>(ReturnToQuery, 'GET /iam/login');
    expect(reader.read({ query: { returnTo: '/x', other: '1' } } as never)).toEqual({ returnTo: '/x' });
    expect(reader.read({ query: { returnTo: ['/a', '/b'] } } as never)).toEqual({});
  });

  it('every declared response is the success answer of its operation in the served document, by its component', () => {
    const withResponse = DECLARED_ROUTES.filter((declaration) => declaration.response !== undefined);
    expect(withResponse.length).toBeGreaterThanOrEqual(25);
    for (const declaration of withResponse) {
      const served = openApiDocument.paths[declaration.path]![declaration.method]!;
      const success = served.responses['200'] as ResponseObject;
      expect({ route: `${declaration.method} ${declaration.path}`, schema: success.content?.['application/json']?.schema }).toEqual({
        route: `${declaration.method} ${declaration.path}`,
        schema: responseSchemaOf(declaration.response!.schema, declaration.path),
      });
      expect(JSON.stringify(success.content)).toContain('#/components/schemas/');
    }
    // Every JSON success answer of the document comes from a declared response.
    for (const declaration of DECLARED_ROUTES) {
      const served = openApiDocument.paths[declaration.path]![declaration.method]!;
      const json200 = (served.responses['200'] as ResponseObject | undefined)?.content?.['application/json'];
      expect({ route: `${declaration.method} ${declaration.path}`, declared: json200 === undefined || declaration.response !== undefined }).toEqual({ route: `${declaration.method} ${declaration.path}`, declared: true });
    }
  });

  it('cannot write the 403 of its permission, name a malformed code, or declare a route twice', () => {
    expect(() => declaredPaths([{ ...base, operation: { ...base.operation, responses: { '403': { description: 'mine' } } } }])).toThrow(/403/);
    expect(() => declaredPaths([{ ...base, access: { permission: 'not a code' } }])).toThrow(/not a permission code/);
    expect(() => declaredPaths([base, base])).toThrow(/declared twice/);
    expect(() => declaredPaths([{ ...base, path: '/admin/things' as never }])).toThrow(/starts with \/iam\//);
  });

  it('generates the security of a public route, and of one that checks its caller itself', () => {
    const operation = { ...base.operation, responses: { '200': { description: 'ok' } } };
    const public_ = operationOf({ ...base, access: 'public', operation });
    expect(public_.security).toEqual([]);
    expect(Object.keys(public_.responses)).toEqual(['200']);
    expect(public_['x-permission']).toBeUndefined();
    const own = operationOf({ ...base, access: { guard: 'own', security: 'session' }, operation });
    expect(own.security).toBeUndefined();
    expect(Object.keys(own.responses)).toEqual(['200', '401', '500', '503']);
    const optional = operationOf({ ...base, access: { guard: 'own', security: 'optional-session' }, operation });
    expect(optional.security).toEqual([{ bearer: [] }, { sessionCookie: [] }, {}]);
    expect(Object.keys(optional.responses)).toEqual(['200']);
  });

  it('registers no guard for a public route or one that checks its caller itself, except the guard it brings', async () => {
    const router = new Router({ prefix: '/iam' });
    const order: string[] = [];
    const requireSession: Middleware = () => {
      throw new Error('the generated session guard ran');
    };
    const declarations: Array<RouteDeclaration<{ tag: string }>> = [
      { ...base, access: 'public', handler: ({ tag }) => () => void order.push(`public ${tag}`) },
      { ...base, path: '/iam/admin/own', access: { guard: 'own', security: 'session' }, handler: ({ tag }) => () => void order.push(`own ${tag}`) },
      {
        ...base,
        path: '/iam/admin/guarded',
        access: { guard: 'own', security: 'session' },
        guard: ({ tag }) => async (_ctx, next) => {
          order.push(`guard ${tag}`);
          await next();
        },
        handler: ({ tag }) => () => void order.push(`guarded ${tag}`),
      },
    ];
    registerDeclaredRoutes(router, declarations, { tag: 'ctx' }, { requireSession });
    expect(router.stack.map((layer) => layer.stack.length)).toEqual([1, 1, 2]);
    for (const layer of router.stack) {
      const stack = layer.stack as unknown as Middleware[];
      const ctx = { method: 'GET', state: {} } as unknown as Context;
      const run = async (index: number): Promise<void> => {
        if (index < stack.length) await stack[index]!(ctx, (() => run(index + 1)) as Next);
      };
      await run(0);
    }
    expect(order).toEqual(['public ctx', 'own ctx', 'guard ctx', 'guarded ctx']);
    // Only a route that checks its caller itself brings a guard: another would have two.
    const guarded = declarations[2]!;
    expect(() => registerDeclaredRoutes(new Router(), [{ ...guarded, access: 'session' }], { tag: 'x' }, { requireSession })).toThrow(/brings its own guard/);
    expect(() => registerDeclaredRoutes(new Router(), [{ ...base, access: 'session' }], { tag: 'x' })).toThrow(/without the session guard/);
  });

  it('gives one path the same path parameters in every declaration', () => {
    const parameter = { name: 'thingId', in: 'path' as const, required: true, schema: { type: 'string' as const } };
    const item = declaredPaths([{ ...base, pathParameters: [parameter] }, { ...base, method: 'put', pathParameters: [parameter] }])['/iam/admin/things/{thingId}']!;
    expect(item.parameters).toEqual([parameter]);
    expect(Object.keys(item)).toEqual(['parameters', 'get', 'put']);
    expect(() => declaredPaths([{ ...base, pathParameters: [parameter] }, { ...base, method: 'put' }])).toThrow(/path parameters differ/);
  });

  it('registers under /iam with :params, the session guard first, then the permission, then the handler', async () => {
    const router = new Router({ prefix: '/iam' });
    const order: string[] = [];
    const requireSession: Middleware = async (ctx, next) => {
      order.push('session');
      (ctx.state as { session: unknown }).session = SESSION;
      await next();
    };
    const engine = {
      decide: (query: { permissionCode: string }) => {
        order.push(`permission ${query.permissionCode}`);
        return Promise.resolve({ allowed: true } as never);
      },
    };
    const declarations: Array<RouteDeclaration<{ tag: string }>> = [
      { ...base, handler: ({ tag }) => () => void order.push(`handler ${tag}`) },
      { ...base, method: 'post', path: '/iam/admin/things/{thingId}/touch', access: 'session', handler: ({ tag }) => () => void order.push(`touch ${tag}`) },
    ];
    registerDeclaredRoutes(router, declarations, { tag: 'ctx' }, { requireSession, engine });
    expect(router.stack.map((layer) => `${layer.methods.join(',')} ${String(layer.path)}`)).toEqual(['HEAD,GET /iam/admin/things/:thingId', 'POST /iam/admin/things/:thingId/touch']);
    for (const layer of router.stack) {
      const stack = layer.stack as unknown as Middleware[];
      const ctx = { method: layer.methods.at(-1), state: {} } as unknown as Context;
      const run = async (index: number): Promise<void> => {
        if (index < stack.length) await stack[index]!(ctx, (() => run(index + 1)) as Next);
      };
      await run(0);
    }
    expect(order).toEqual(['session', 'permission iam.admin.things:read', 'handler ctx', 'session', 'touch ctx']);
  });
});
