/**
 * One declaration per `/iam` route: its method, its OpenAPI path, who may call it, its OpenAPI operation and its
 * handler. The koa route (with its guard) and the OpenAPI operation (with its `security`, `x-permission`, 403 and
 * 401) are both generated from it, so the permission a route enforces and the one its document publishes are
 * written once and cannot differ.
 *
 * The operation is static data (the document is built without any dependency: it is served and tested as is);
 * the handler is a factory, called once per registration with the route group's context.
 */
import { Stream } from 'node:stream';
import type Router from '@koa/router';
import type { RouterMiddleware } from '@koa/router';
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import type { ValidateFunction } from 'ajv/dist/2020';
import type { DefaultContext, DefaultState, Context as KoaContext, Middleware } from 'koa';
import type { DecisionEngine } from '../authz/decision-engine';
import { parsePermissionCode } from '../domain/permission-code';
import { withSpan } from '../observability/tracing';
import { callerOf } from './iam-context';
import { problems } from '../domain/problem';
import { OPTIONAL_SESSION, PROBLEM_MEDIA_TYPE, PROTECTED_FAILURES, json, problem, ref, sessionGranting, type WithoutJsonBody } from './openapi-builders';
import type { JsonSchema, OperationObject, ParameterObject, PathItemObject, ReferenceObject, ResponseObject } from './openapi-types';
import { queryReaderOf, queryParametersOf, type QueryReader } from './validate-query';
import { requirePermission } from './require-session';
import { componentSchemas } from './schemas/components';
import { compileResponseSerializer } from './response-serializer';
import { assertValid, createBodyValidator } from './validate-body';

/**
 * Who may call a route. `{ permission }`: a session (bearer or cookie) whose active profile grants the code, else 403;
 * `'session'`: any valid session (either way no session is 401); `'public'`: anyone (no guard, `security: []`);
 * {@link OwnAccess}: the route checks its caller itself.
 */
export type RouteAccess = { readonly permission: string } | 'session' | 'public' | OwnAccess;

/**
 * A route that handles the caller's credential itself (its handler, or the `guard` of its declaration): the router
 * adds no guard, and its OpenAPI `security` is still generated from the declaration. `'session'`: a session is
 * needed (the document's default security, and the 401 of a protected route); `'optional-session'`: one is used when
 * sent, none is fine too (the anonymous alternative `{}`).
 */
export interface OwnAccess {
  readonly guard: 'own';
  readonly security: 'session' | 'optional-session';
}

/** The methods a declared route may have (HEAD follows GET, as @koa/router does). */
export type DeclaredMethod = 'get' | 'put' | 'post' | 'delete' | 'patch';

/** What a declaration generates itself: its access (`security`, `x-permission`), its body and its handler's permissions. */
type GeneratedFields = 'security' | 'x-permission' | 'x-permissions' | 'requestBody';

/** A parameter an operation still writes itself: a header (`If-Match`); query parameters come from its `query`. */
export type WrittenParameter = ReferenceObject | (ParameterObject & { readonly in: 'header' | 'path' });

/** A success answer an operation still writes itself: without a JSON body (a page, an empty answer); a JSON one comes from its `response`. */
export type WrittenSuccess = ReferenceObject | (ResponseObject & WithoutJsonBody & { readonly content?: Partial<Record<'application/json', never>> & Record<string, { schema: JsonSchema }> });

/**
 * The operation as written in a declaration: everything but what its access, `body`, `permissions`, `query` and
 * `response` generate. Setting one of those here is a type error (and refused when the document is built, for a
 * declaration that gets past the compiler).
 */
export type DeclaredOperation = Omit<OperationObject, GeneratedFields | 'parameters' | 'responses'> & { readonly [K in GeneratedFields]?: never } & {
  readonly parameters?: WrittenParameter[];
  readonly responses: Record<string, ResponseObject | ReferenceObject> & { readonly '200'?: WrittenSuccess; readonly '201'?: WrittenSuccess };
};

/**
 * What a handler may put in `ctx.body` for a declared response: what `JSON.stringify` turns into the schema's
 * `Static` type (a `Date` becomes its ISO string), so a handler answering another shape does not compile.
 */
export type Sendable<T> = T extends string ? T | (string extends T ? Date : never) : T extends ReadonlyArray<infer U> ? ReadonlyArray<Sendable<U>> : T extends object ? { readonly [K in keyof T]: Sendable<T[K]> } : T;

/**
 * A route's JSON success answer: a component schema of `schemas/` (or a `Type.Array` of one, or a `Type.Union` of
 * several). The document's 200 (and 201) are generated from it, and the handler's `ctx.body` is typed by it.
 */
export interface DeclaredResponse<Schema extends TSchema> {
  readonly schema: Schema;
  readonly description: string;
  readonly headers?: ResponseObject['headers'];
  /** The route also answers 201 with the same body (an upsert that created): the 201's description. */
  readonly created?: string;
}

/**
 * A route's request body: a component schema of `schemas/` (the document names it by its component, the router
 * validates with it, the handler reads its `Static` type).
 */
export interface DeclaredBody<Schema extends TSchema, Context> {
  readonly schema: Schema;
  /** Default `application/json`; a form is parsed into an object of the same schema. */
  readonly media?: 'application/json' | 'application/x-www-form-urlencoded';
  readonly description?: string;
  /** An optional body: without one the handler reads this value (validated like a sent one). */
  readonly absent?: Static<Schema>;
  /**
   * The schema as this deployment configures it (the configured client types), stricter than the documented one
   * and of the same type: the document is written for every deployment, the validator for this one.
   */
  readonly configured?: (context: Context) => TSchema;
}

/** The body a handler reads: validated by the validator the router compiled from the declaration. */
export interface BodyReader<Body> {
  /** The request's body, or 400 IAM_VALIDATION_FAILED naming every failing JSON pointer. */
  read(ctx: KoaContext): Body;
  /** Whether `value` is a valid body, without throwing (a page that answers a bad form with the form again). */
  accepts(value: unknown): value is Body;
}

export interface RouteDeclaration<Context, Schema extends TSchema = TSchema, Response extends TSchema = TSchema, Query extends TObject = TObject> {
  readonly method: DeclaredMethod;
  /** The OpenAPI path (`/iam/admin/users/{userId}`); the router gets it without `/iam` and with `:userId`. */
  readonly path: `/iam/${string}`;
  readonly access: RouteAccess;
  /** The path item's `parameters`; every declaration of one path gives the same ones (or none). */
  readonly pathParameters?: PathItemObject['parameters'];
  readonly operation: DeclaredOperation;
  /** The request body: its `requestBody` and its validator are generated from it. */
  readonly body?: DeclaredBody<Schema, Context>;
  /**
   * The query parameters (an object schema of `schemas/queries.ts`, each property a string or an integer): the
   * operation's `parameters` (in: query) and the router's check of the query are generated from it.
   */
  readonly query?: Query;
  /** The JSON success answer: the operation's 200 (and 201) and the type of the handler's `ctx.body`. */
  readonly response?: DeclaredResponse<Response>;
  /**
   * The permission codes the handler decides itself, beyond its access (an administrator's wider view, a subject
   * named in the body): published as the operation's `x-permissions`.
   */
  readonly permissions?: readonly string[];
  /**
   * Only with an {@link OwnAccess}: the middleware that checks the caller before the handler (logout's session guard,
   * which also answers while the token store is down). Without it the handler does it.
   */
  readonly guard?: (context: Context) => Middleware;
  /**
   * Called once when the group is registered (never to build the document), with the group's context and the readers
   * of its declared body and query (typed by the declared schemas: reading another type is a compile error); the
   * middleware's `ctx.body` is typed by the declared response.
   */
  readonly handler: (context: Context, body: BodyReader<Static<Schema>>, query: QueryReader<Static<Query>>) => RouterMiddleware<DefaultState, DefaultContext, Sendable<Static<Response>>>;
}

/**
 * A declaration with its body, query and response types checked against its handler; what it returns goes in a route
 * group's list (whose element type cannot carry each route's own types).
 */
export function route<Context, Schema extends TSchema = TSchema, Response extends TSchema = TSchema, Query extends TObject = TObject>(
  declaration: RouteDeclaration<Context, Schema, Response, Query>,
): RouteDeclaration<Context> {
  return declaration as unknown as RouteDeclaration<Context>;
}

/** The component name of a schema of `schemas/components.ts`, the one way the document refers to it. */
const componentNames = new Map<TSchema, string>(Object.entries(componentSchemas).map(([name, schema]) => [schema, name]));
export function componentNameOf(schema: TSchema, where: string): string {
  const name = componentNames.get(schema);
  if (name === undefined) throw new Error(`route ${where}: its body schema is not a component of schemas/components.ts`);
  return name;
}

/** The document's schema of a declared response: a component's `$ref`, an array of one, or a union of them. */
export function responseSchemaOf(schema: TSchema, where: string): JsonSchema {
  const name = componentNames.get(schema);
  if (name !== undefined) return ref(name);
  const { items, anyOf } = schema as { items?: TSchema; anyOf?: TSchema[] };
  if ((schema as { type?: unknown }).type === 'array' && items !== undefined) return { type: 'array', items: ref(componentNameOf(items, where)) };
  if (anyOf !== undefined) return { anyOf: anyOf.map((member) => ref(componentNameOf(member, where))) };
  throw new Error(`route ${where}: its response is not a component of schemas/components.ts, an array of one or a union of them`);
}

/** One form of a `oneOf` body: its required properties, its `title` (what the client meant), its validator. */
interface BodyForm {
  keys: string[];
  title: string | undefined;
  validate: ValidateFunction;
}

/**
 * The validators of a `oneOf` of objects, one per form: a mistake gets the errors of the form the client meant only,
 * not both forms' plus "must match exactly one schema".
 */
function formsOf(schema: TSchema): BodyForm[] | null {
  const forms = (schema as { oneOf?: TSchema[] }).oneOf;
  if (forms === undefined || !forms.every((form) => Array.isArray((form as { required?: unknown }).required))) return null;
  const ajv = createBodyValidator();
  return forms.map((form) => ({ keys: (form as unknown as { required: string[] }).required, title: (form as { title?: string }).title, validate: ajv.compile(form) }));
}

/**
 * The form a body means: the one with the largest share of its required properties present (`{permissionCode, method}`
 * is a permission check with a stray member, not a request missing its path); the first on a tie; none when the body
 * has no required property of any form.
 */
function meantForm(forms: BodyForm[], record: object): BodyForm | undefined {
  let meant: BodyForm | undefined;
  let best = 0;
  for (const form of forms) {
    const share = form.keys.filter((key) => key in record).length / form.keys.length;
    if (share > best) [meant, best] = [form, share];
  }
  return meant;
}

/** "must be an object with method and path (a request to explain) or with permissionCode (a permission check)". */
function noFormMessage(forms: BodyForm[]): string {
  return `must be an object ${forms.map(({ keys, title }) => `with ${keys.join(' and ')}${title === undefined ? '' : ` (${title})`}`).join(' or ')}`;
}

/** Compiles the declared body's validator (the configured schema when there is one) into the handler's reader. */
export function bodyReaderOf<Context>(declaration: RouteDeclaration<Context>, context: Context): BodyReader<unknown> {
  const where = `${declaration.method.toUpperCase()} ${declaration.path}`;
  const declared = declaration.body;
  if (declared === undefined) {
    // A handler reading a body its route does not declare is a bug, not a client's mistake.
    const none = (): never => {
      throw new Error(`route ${where} declares no body`);
    };
    return { read: none, accepts: (value: unknown): value is unknown => none() || value === undefined };
  }
  const schema = declared.configured?.(context) ?? declared.schema;
  const validate = createBodyValidator().compile(schema);
  const forms = formsOf(schema);
  const present = (body: unknown): unknown => (body === undefined && declared.absent !== undefined ? declared.absent : body);
  return {
    accepts: (value: unknown): value is unknown => validate(present(value)),
    read: (ctx) => {
      const body = present(ctx.request.body);
      if (forms === null) return assertValid(validate, body);
      if (validate(body)) return body;
      const record = typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {};
      const form = meantForm(forms, record);
      if (form !== undefined) return assertValid(form.validate, body);
      throw problems.validation([{ pointer: '/', message: noFormMessage(forms) }]);
    },
  };
}

/**
 * What the generated guards need: the session check (401; a group without a session or permission route needs none)
 * and the engine that decides a permission (403; a group without a permission route needs none).
 */
export interface RouteGuards {
  requireSession?: Middleware;
  engine?: Pick<DecisionEngine, 'decide'>;
}

/** The prefix the /iam router is mounted with (iam-app.ts: `new Router({ prefix: '/iam' })`). */
export const IAM_PREFIX = '/iam';

/** The permission a declaration's access requires, or null for a route without one. */
export const permissionOf = (access: RouteAccess): string | null => (typeof access === 'object' && 'permission' in access ? access.permission : null);

/** Whether the router guards a declaration (`'session'`, `{ permission }`), or not (`'public'`, {@link OwnAccess}). */
const isGuarded = (access: RouteAccess): access is 'session' | { readonly permission: string } => access === 'session' || permissionOf(access) !== null;

/** `/iam/admin/users/{userId}` → `/admin/users/:userId` (the router is mounted under {@link IAM_PREFIX}). */
export function routerPath(path: string): string {
  if (!path.startsWith(`${IAM_PREFIX}/`)) throw new Error(`route ${path}: a declared path starts with ${IAM_PREFIX}/`);
  return path.slice(IAM_PREFIX.length).replace(/\{([A-Za-z0-9_]+)\}/g, ':$1');
}

/** The middleware a declaration's access puts before its handler: the session, then the permission and its span. */
export function guardsFor(access: RouteAccess, method: DeclaredMethod, guards: RouteGuards): Middleware[] {
  if (!isGuarded(access)) return [];
  if (guards.requireSession === undefined) throw new Error('a route needing a session is registered without the session guard');
  const permission = permissionOf(access);
  if (permission === null) return [guards.requireSession];
  if (guards.engine === undefined) throw new Error(`a route needing ${permission} is registered without a decision engine`);
  const chain = [guards.requireSession, requirePermission(guards.engine, permission)];
  // A guarded write is a span of its own when tracing is on (under the request's), named by its permission.
  if (method !== 'get') {
    chain.push((ctx, next) => withSpan('admin write', { 'iam.permission': permission, 'http.request.method': ctx.method, 'enduser.id': callerOf(ctx).record.principal.userId }, () => next()));
  }
  return chain;
}

/**
 * The handler of a declaration with a `response`, its JSON success answer (200 or 201) written from the declared
 * schema (response-serializer.ts): a property the schema does not declare is not sent. Anything else it answers (a
 * problem, a 304, a page, a stream) is left as it is.
 */
function serializedBy(declaration: Pick<RouteDeclaration<never>, 'method' | 'path' | 'response'>, handler: RouterMiddleware): RouterMiddleware {
  const serialize = compileResponseSerializer(declaration.response!.schema, `${declaration.method.toUpperCase()} ${declaration.path}`);
  return async (ctx, next) => {
    await handler(ctx, next);
    const body: unknown = ctx.body;
    if ((ctx.status !== 200 && ctx.status !== 201) || body === null || typeof body !== 'object' || Buffer.isBuffer(body) || body instanceof Stream) return;
    const type = ctx.response.get('Content-Type');
    ctx.body = serialize(body);
    ctx.set('Content-Type', type === '' ? 'application/json; charset=utf-8' : type);
  };
}

/**
 * Registers each declaration on `router` (mounted under `/iam`), its guard generated from its access (or, for an
 * {@link OwnAccess}, the declaration's own `guard` if it has one).
 */
export function registerDeclaredRoutes<Context>(router: Router, declarations: ReadonlyArray<RouteDeclaration<Context>>, context: Context, guards: RouteGuards = {}): void {
  for (const declaration of declarations) {
    const { access, guard } = declaration;
    if (guard !== undefined && (typeof access !== 'object' || !('guard' in access))) {
      throw new Error(`route ${declaration.method.toUpperCase()} ${declaration.path}: only a route that checks its caller itself brings its own guard`);
    }
    const checks = guard === undefined ? guardsFor(access, declaration.method, guards) : [guard(context)];
    const handler = declaration.handler(context, bodyReaderOf(declaration, context), queryReaderOf(declaration.query, declaration.path)) as RouterMiddleware;
    const middleware = [...checks, declaration.response === undefined ? handler : serializedBy(declaration, handler)] as RouterMiddleware[];
    router[declaration.method](routerPath(declaration.path), ...middleware);
  }
}

/**
 * The 403 of a route with a permission: the caller's profile lacks it (`decisionId`, `step`), or — an admin write —
 * it would grant what the caller does not hold (`rule: ESCALATION_PREVENTION`, `errors`).
 */
const PERMISSION_DENIED: ResponseObject = (() => {
  const denied = problem(403, ['IAM_ACCESS_DENIED'], 'The caller lacks the permission (`decisionId`, `step`), or the write would grant codes or scopes the caller does not hold (`rule`, `errors`).');
  const schema = denied.content![PROBLEM_MEDIA_TYPE]!.schema as { allOf: JsonSchema[] };
  schema.allOf.push({ type: 'object', anyOf: [{ type: 'object', required: ['decisionId', 'step'] }, { type: 'object', required: ['rule', 'errors'] }] });
  return denied;
})();

/** The OpenAPI operation of a declaration: its own, with what its access generates. */
export function operationOf(declaration: Pick<RouteDeclaration<never>, 'method' | 'path' | 'access' | 'operation' | 'body' | 'permissions' | 'query' | 'response'>): OperationObject {
  const { access } = declaration;
  const where = `${declaration.method.toUpperCase()} ${declaration.path}`;
  const written = declaration.operation as OperationObject;
  // What the declaration generates is never written by hand: a second place for it is how the two drift apart.
  if (written.security !== undefined || written['x-permission'] !== undefined) throw new Error(`route ${where}: security and x-permission come from its access, not from its operation`);
  if (written.requestBody !== undefined || written['x-permissions'] !== undefined) throw new Error(`route ${where}: requestBody and x-permissions come from its body and permissions, not from its operation`);
  if (written.parameters?.some((parameter) => 'in' in parameter && parameter.in === 'query')) throw new Error(`route ${where}: query parameters come from its query, not from its operation`);
  for (const status of ['200', '201']) {
    const success = written.responses[status];
    if (success !== undefined && !('$ref' in success) && success.content?.['application/json'] !== undefined) throw new Error(`route ${where}: a JSON ${status} comes from its response, not from its operation`);
  }
  const operation: OperationObject = { ...written };
  if (declaration.query !== undefined) operation.parameters = [...(written.parameters ?? []), ...queryParametersOf(declaration.query)];
  const answer = declaration.response;
  if (answer !== undefined) {
    const schema = responseSchemaOf(answer.schema, where);
    const generated: OperationObject['responses'] = { '200': json(answer.description, schema, answer.headers) };
    if (answer.created !== undefined) generated['201'] = json(answer.created, schema, answer.headers);
    operation.responses = { ...generated, ...written.responses };
  }
  const body = declaration.body;
  if (body !== undefined) {
    operation.requestBody = {
      ...(body.description ? { description: body.description } : {}),
      required: body.absent === undefined,
      content: { [body.media ?? 'application/json']: { schema: ref(componentNameOf(body.schema, where)) } },
    };
  }
  if (declaration.permissions !== undefined && declaration.permissions.length > 0) {
    for (const code of declaration.permissions) if (parsePermissionCode(code) === null) throw new Error(`route ${where}: ${JSON.stringify(code)} is not a permission code`);
    operation['x-permissions'] = [...declaration.permissions];
  }
  if (access === 'public') return { ...operation, security: [] };
  if (typeof access === 'object' && 'guard' in access) {
    // A session it checks itself is documented as one the router checks; an optional one has no 401 of its own.
    if (access.security === 'optional-session') return { ...operation, security: OPTIONAL_SESSION };
    return { ...operation, responses: { ...operation.responses, ...PROTECTED_FAILURES } };
  }
  const permission = permissionOf(access);
  if (permission === null) return { ...operation, responses: { ...operation.responses, ...PROTECTED_FAILURES } };
  if (parsePermissionCode(permission) === null) throw new Error(`route ${where}: ${JSON.stringify(permission)} is not a permission code`);
  if (operation.responses['403'] !== undefined) throw new Error(`route ${where}: the 403 of a route with a permission comes from its access`);
  return {
    ...operation,
    description: `${operation.description ? `${operation.description} ` : ''}Needs \`${permission}\` in the caller's active profile.`,
    // OpenAPI 3.1 §4.8.30: for non-OAuth schemes the array lists the roles required (bearer or cookie alike).
    security: sessionGranting(permission),
    'x-permission': permission,
    responses: { ...operation.responses, '403': PERMISSION_DENIED, ...PROTECTED_FAILURES },
  };
}

/** The OpenAPI path items of `declarations`, in their order (a path's operations in the order declared). */
export function declaredPaths(declarations: ReadonlyArray<RouteDeclaration<never>>): Record<string, PathItemObject> {
  const paths: Record<string, PathItemObject> = {};
  const parametersOf = new Map<string, string>();
  for (const declaration of declarations) {
    const where = `${declaration.method.toUpperCase()} ${declaration.path}`;
    routerPath(declaration.path);
    const item = (paths[declaration.path] ??= {});
    if (item[declaration.method] !== undefined) throw new Error(`route ${where} is declared twice`);
    const parameters = JSON.stringify(declaration.pathParameters ?? null);
    const earlier = parametersOf.get(declaration.path);
    if (earlier !== undefined && earlier !== parameters) throw new Error(`route ${where}: its path parameters differ from another declaration of the same path`);
    parametersOf.set(declaration.path, parameters);
    if (declaration.pathParameters !== undefined && item.parameters === undefined) item.parameters = declaration.pathParameters;
    item[declaration.method] = operationOf(declaration);
  }
  return paths;
}
