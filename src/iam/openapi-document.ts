/**
 * The OpenAPI 3.1 description of every `/iam` endpoint (design.md §4, §9), served at `/iam/openapi.json`.
 * It is the contract the end-to-end tests check the real responses against (test/e2e/openapi.test.ts), so a
 * schema here is never loosened to fit a response: a mismatch is a bug in the handler or in this file.
 * Schemas use the JSON Schema 2020-12 dialect (OpenAPI 3.1 §4.8.24) and reject unknown properties wherever
 * the gateway controls the shape. Types are local and small on purpose: an excess-property check in this
 * object literal catches a misspelt keyword at compile time.
 */
import { IDENTIFIER_PATTERN } from '../auth/identity-validation';
import { PROBLEM_CATALOG, type ProblemCode } from '../problem';

/** The JSON Schema 2020-12 keywords this document uses. */
export interface JsonSchema {
  $ref?: string;
  title?: string;
  description?: string;
  type?: JsonType | JsonType[];
  enum?: readonly unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  properties?: Record<string, JsonSchema>;
  required?: readonly string[];
  additionalProperties?: boolean | JsonSchema;
  dependentRequired?: Record<string, readonly string[]>;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  allOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  not?: JsonSchema;
  if?: JsonSchema;
  then?: JsonSchema;
  else?: JsonSchema;
  default?: unknown;
  examples?: unknown[];
}
export type JsonType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean' | 'null';

export interface ReferenceObject {
  $ref: string;
}
export interface MediaTypeObject {
  schema: JsonSchema;
}
export interface HeaderObject {
  description?: string;
  required?: boolean;
  schema: JsonSchema;
}
export interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject | ReferenceObject>;
  content?: Record<string, MediaTypeObject>;
}
export interface ParameterObject {
  name: string;
  in: 'path' | 'query' | 'header';
  description?: string;
  required?: boolean;
  schema: JsonSchema;
}
export interface OperationObject {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** Absent: the document's default (a bearer token). `[]`: no token. `[{bearer: []}, {}]`: optional. */
  security?: Array<Record<string, string[]>>;
  parameters?: Array<ParameterObject | ReferenceObject>;
  requestBody?: { description?: string; required: boolean; content: Record<string, MediaTypeObject> };
  responses: Record<string, ResponseObject | ReferenceObject>;
  /** The `iam.admin.*` permission the caller's active profile must grant (design.md §4.1). */
  'x-permission'?: string;
}
export type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';
export type PathItemObject = { parameters?: Array<ParameterObject | ReferenceObject> } & Partial<Record<HttpMethod, OperationObject>>;
export interface OpenApiDocument {
  openapi: '3.1.0';
  jsonSchemaDialect: string;
  info: { title: string; version: string; summary?: string; description?: string; license?: { name: string; identifier: string } };
  tags: Array<{ name: string; description: string }>;
  security: Array<Record<string, string[]>>;
  paths: Record<string, PathItemObject>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, ResponseObject>;
    parameters: Record<string, ParameterObject>;
    headers: Record<string, HeaderObject>;
    securitySchemes: Record<string, { type: 'http'; scheme: 'bearer'; bearerFormat?: string; description?: string }>;
  };
}

/** Every method OpenAPI 3.1 can describe (§4.8.9). */
export const HTTP_METHODS: readonly HttpMethod[] = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const PROBLEM_MEDIA_TYPE = 'application/problem+json';
const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const header = (name: string): ReferenceObject => ({ $ref: `#/components/headers/${name}` });
const response = (name: string): ReferenceObject => ({ $ref: `#/components/responses/${name}` });
const param = (name: string): ReferenceObject => ({ $ref: `#/components/parameters/${name}` });
const identifier = (description: string): JsonSchema => ({ type: 'string', pattern: IDENTIFIER_PATTERN, description });
const nullable = (schema: JsonSchema): JsonSchema => ({ ...schema, type: [schema.type as JsonType, 'null'] });
const timestamp = (description: string): JsonSchema => ({ type: 'string', format: 'date-time', description });
const strictObject = (properties: Record<string, JsonSchema>, required: readonly string[] = Object.keys(properties)): JsonSchema => ({
  type: 'object',
  additionalProperties: false,
  required,
  properties,
});

const STEP_PASSED = ['AUTHENTICATED', 'PROFILE_ACTIVE', 'PERMISSION_GRANTED', 'RESOURCE_RESOLVED', 'SCOPE_GRANTED'];
// UNAUTHENTICATED appears only in decisions of the proxy path (an auditor may read those by id).
const STEP_FAILED = [
  'UNAUTHENTICATED',
  'NO_ACTIVE_PROFILE',
  'DOMAIN_MISMATCH',
  'CLIENT_TYPE_MISMATCH',
  'PERMISSION_DENIED',
  'RESOURCE_NOT_FOUND',
  'RESOURCE_RESOLUTION_UNAVAILABLE',
  'SCOPE_DENIED',
  'ROUTE_NOT_DECLARED',
];
const PERMISSION_CODE_PATTERN = '^(\\*:\\*|[A-Za-z0-9_.-]+:([A-Za-z0-9_.-]+|\\*))$';

/** A JSON success answer. */
function json(description: string, schema: JsonSchema, headers: ResponseObject['headers'] = {}): ResponseObject {
  return { description, headers: { 'X-Request-Id': header('RequestId'), ...headers }, content: { 'application/json': { schema } } };
}

/** An answer without a body. */
function empty(description: string, headers: ResponseObject['headers'] = {}): ResponseObject {
  return { description, headers: { 'X-Request-Id': header('RequestId'), ...headers } };
}

/**
 * An RFC 9457 answer narrowed to `status` and the catalog `codes` this operation can give, so a test
 * catches a right status with a wrong code as well as a wrong shape.
 */
function problem(status: number, codes: ProblemCode[], description: string, options: { headers?: ResponseObject['headers']; require?: string[] } = {}): ResponseObject {
  for (const code of codes) {
    const catalog: number = PROBLEM_CATALOG[code].status;
    // 422 is the documented override of IAM_VALIDATION_FAILED for well-formed bodies naming unknown things.
    if (catalog !== status && !(status === 422 && code === 'IAM_VALIDATION_FAILED')) throw new Error(`${code} is not a ${status} problem`);
  }
  const narrowed: JsonSchema = { type: 'object', properties: { status: { const: status }, code: { enum: codes } } };
  if (options.require) {
    narrowed.required = options.require;
    for (const key of options.require) narrowed.properties![key] = { type: 'string' };
  }
  return {
    description,
    headers: { 'X-Request-Id': header('RequestId'), 'Cache-Control': header('NoStore'), ...options.headers },
    content: { [PROBLEM_MEDIA_TYPE]: { schema: { allOf: [ref('Problem'), narrowed] } } },
  };
}

const jsonBody = (schema: JsonSchema, description?: string, required = true): OperationObject['requestBody'] => ({
  ...(description ? { description } : {}),
  required,
  content: { 'application/json': { schema } },
});

/** The answers every protected operation can give besides its own. */
const PROTECTED_FAILURES = {
  '401': response('Unauthenticated'),
  '500': response('InternalError'),
  '503': response('Unavailable'),
};
const BODY_FAILURES = { '413': response('PayloadTooLarge') };

/** Admin operations (design.md §4.1 and the admin issue): a token whose active profile grants `permission`. */
function admin(permission: string, operation: Omit<OperationObject, 'tags' | 'security' | 'x-permission'>): OperationObject {
  return {
    ...operation,
    tags: ['admin'],
    description: `${operation.description ? `${operation.description} ` : ''}Needs \`${permission}\` in the caller's active profile.`,
    // OpenAPI 3.1 §4.8.30: for non-OAuth schemes the array lists the roles required.
    security: [{ bearer: [permission] }],
    'x-permission': permission,
    responses: { ...operation.responses, '403': response('AccessDenied'), ...PROTECTED_FAILURES },
  };
}

/** Admin answers are never cached (they may name users and sessions). */
const NO_STORE: ResponseObject['headers'] = { 'Cache-Control': header('NoStore') };

const upserted = (schema: JsonSchema, what: string, headers: ResponseObject['headers'] = {}): OperationObject['responses'] => ({
  '200': json(`The ${what} existed and was updated (or was already so).`, schema, { ...NO_STORE, ...headers }),
  '201': json(`The ${what} did not exist and was created.`, schema, { ...NO_STORE, ...headers }),
});

const page = (item: string): JsonSchema =>
  strictObject({
    items: { type: 'array', items: ref(item) },
    nextCursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last page.' },
  });

const schemas: Record<string, JsonSchema> = {
  Problem: {
    description: 'RFC 9457 problem details (design.md §4.2). Never carries a stack trace or an internal cause.',
    type: 'object',
    additionalProperties: false,
    required: ['type', 'title', 'status', 'detail', 'instance', 'code', 'requestId'],
    properties: {
      type: { type: 'string', format: 'uri', pattern: '^https://iam-gateway\\.dev/problems/[a-z-]+$' },
      title: { type: 'string', minLength: 1 },
      status: { type: 'integer', minimum: 400, maximum: 599 },
      detail: { type: 'string' },
      instance: { type: 'string', description: 'The (normalized) request path.' },
      code: { enum: Object.keys(PROBLEM_CATALOG), description: 'Stable code from the catalog; match on this, never on `detail`.' },
      requestId: { type: 'string', format: 'uuid', description: 'Also in the `X-Request-Id` header and the log.' },
      decisionId: { type: 'string', format: 'uuid', description: 'Find the full decision with GET /iam/authorization/decisions/{decisionId}.' },
      step: { enum: STEP_FAILED, description: 'The decision step that failed.' },
      errors: {
        type: 'array',
        minItems: 1,
        items: strictObject({ pointer: { type: 'string', format: 'json-pointer' }, message: { type: 'string', minLength: 1 } }),
      },
    },
    if: { type: 'object', properties: { code: { const: 'IAM_VALIDATION_FAILED' } } },
    then: { type: 'object', required: ['errors'], properties: { errors: { type: 'array' } } },
  },
  Principal: strictObject(
    {
      userId: identifier('The user (the host\'s id, never renumbered).'),
      identityId: identifier('The identity the user logged in with.'),
      identityDomain: identifier('The domain of that identity.'),
      activeProfileId: nullable(identifier('The profile whose permissions this session carries; null when none applies to the client type.')),
      displayName: { type: 'string' },
      authorizationVersion: { type: 'integer', minimum: 0 },
    },
    ['userId', 'identityId', 'identityDomain', 'activeProfileId', 'authorizationVersion'],
  ),
  AuthenticationResult: strictObject({
    accessToken: { type: 'string', pattern: '^iamt_[A-Za-z0-9_-]{43}$', description: 'Send as `Authorization: Bearer <accessToken>` (design.md §7: 256 random bits, base64url).' },
    sessionId: { type: 'string', format: 'uuid' },
    expiresAt: timestamp('Absolute expiry of the session (ISO 8601 UTC).'),
    principal: ref('Principal'),
  }),
  Session: {
    ...strictObject({
      sessionId: { type: 'string', format: 'uuid' },
      clientType: { type: 'string', minLength: 1 },
      activeProfileId: nullable(identifier('The profile the session acts under.')),
      createdAt: timestamp('When the session was issued.'),
      expiresAt: timestamp('Absolute expiry.'),
      lastSeenAt: nullable(timestamp('Last authenticated request (recorded with a short delay).')),
      state: { enum: ['active', 'revoked', 'logged_out', 'expired'] },
      revokedAt: nullable(timestamp('When it was revoked.')),
      logoutAt: nullable(timestamp('When it logged out.')),
      revokeReason: { type: ['string', 'null'] },
      current: { type: 'boolean', description: 'True for the session of the token that asked.' },
    }),
    allOf: [
      { if: { type: 'object', properties: { state: { const: 'revoked' } } }, then: { type: 'object', properties: { revokedAt: { type: 'string' } } } },
      { if: { type: 'object', properties: { state: { const: 'logged_out' } } }, then: { type: 'object', properties: { logoutAt: { type: 'string' } } } },
    ],
  },
  Scope: strictObject({
    scopeType: identifier('Resource type, e.g. PROJECT.'),
    scopeRefId: identifier('Resource id; `*` = every resource of the type.'),
    accessMode: { enum: ['READ', 'WRITE'], description: 'WRITE also covers READ.' },
  }),
  Profile: strictObject({
    profileId: identifier('Chosen by the host or the admin.'),
    userId: identifier('Owner.'),
    profileName: { type: 'string', minLength: 1 },
    templateVersionId: identifier('The permission template version the profile aggregates.'),
    clientTypes: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
    scopes: { type: 'array', items: ref('Scope'), description: 'Empty = unscoped (every resource).' },
    version: { type: 'integer', minimum: 0, description: 'Raised on every change; the admin API\'s ETag.' },
  }),
  DecisionStep: {
    ...strictObject({ code: { enum: [...STEP_PASSED, ...STEP_FAILED] }, passed: { type: 'boolean' }, reason: { type: 'string', minLength: 1 } }),
    if: { type: 'object', properties: { passed: { const: true } } },
    then: { type: 'object', properties: { code: { enum: STEP_PASSED } } },
    else: { type: 'object', properties: { code: { enum: STEP_FAILED } } },
  },
  DecisionRoute: strictObject({
    id: { type: 'string', minLength: 1 },
    pattern: { type: 'string', minLength: 1 },
    file: { type: 'string', minLength: 1 },
    line: { type: 'integer', minimum: 1 },
    mode: { enum: ['enforce', 'shadow'] },
    public: { type: 'boolean' },
  }),
  DecisionResource: strictObject(
    {
      type: { type: 'string', minLength: 1 },
      id: { type: 'string' },
      access: { enum: ['READ', 'WRITE'] },
      scopeRefs: { type: 'array', items: strictObject({ type: { type: 'string' }, id: { type: 'string' } }) },
    },
    ['type', 'id', 'access'],
  ),
  Decision: {
    description: 'The one decision the proxy, forward-auth and diagnostics share (design.md §4.1, §9). Steps stop at the first failure.',
    ...strictObject(
      {
        decisionId: { type: 'string', format: 'uuid' },
        allowed: { type: 'boolean' },
        permissionCode: { type: ['string', 'null'] },
        profileId: nullable(identifier('The profile that was evaluated.')),
        userId: nullable(identifier('The user the decision is about.')),
        route: { anyOf: [ref('DecisionRoute'), { type: 'null' }], description: 'The matched policy route (file:line); null when none.' },
        resource: { anyOf: [ref('DecisionResource'), { type: 'null' }] },
        steps: { type: 'array', items: ref('DecisionStep') },
        status: { type: 'integer', description: 'What enforcement answers: 200, or the problem status.' },
        problemCode: { anyOf: [{ enum: Object.keys(PROBLEM_CATALOG) }, { type: 'null' }] },
        failedStep: { anyOf: [{ enum: STEP_FAILED }, { type: 'null' }] },
        shadowed: { type: 'boolean', description: 'A shadow-mode route that would deny: enforcement lets it through.' },
        evaluatedAt: timestamp('When the decision was made.'),
      },
      ['decisionId', 'allowed', 'permissionCode', 'profileId', 'userId', 'steps', 'status', 'problemCode', 'failedStep', 'shadowed', 'evaluatedAt'],
    ),
    allOf: [
      {
        if: { type: 'object', properties: { failedStep: { type: 'null' } } },
        then: { type: 'object', properties: { allowed: { const: true }, problemCode: { type: 'null' }, status: { const: 200 } } },
        else: { type: 'object', properties: { problemCode: { type: 'string' }, status: { type: 'integer', minimum: 400 } } },
      },
    ],
  },
  LoginRequest: strictObject({
    username: { type: 'string', minLength: 1, maxLength: 200 },
    password: { type: 'string', minLength: 1, maxLength: 1024, description: 'Write-only; never logged or stored.' },
    clientType: { type: 'string', description: 'One of `iam.client-types` (default WEB, MOBILE, DESKTOP, API); others get 400.' },
  }),
  DiagnosticsRequest: {
    description: 'The specification\'s body, or `{method, path}` to explain a host request exactly as the proxy would.',
    oneOf: [ref('DiagnosticsPermissionCheck'), ref('DiagnosticsRequestTarget')],
  },
  DiagnosticsPermissionCheck: {
    ...strictObject(
      {
        permissionCode: { type: 'string', minLength: 3, maxLength: 200, description: 'e.g. `project:read`.' },
        domain: { type: 'string', maxLength: 200, description: 'Identity domain the principal must have.' },
        clientType: { type: 'string', maxLength: 50, description: 'Checked against the profile instead of the session\'s own.' },
        resourceType: { type: 'string', minLength: 1, maxLength: 100, description: 'Scope type.' },
        resourceId: { type: 'string', minLength: 1, maxLength: 200, description: 'Scope reference id.' },
        scopeAccess: { enum: ['READ', 'WRITE'], default: 'READ' },
      },
      ['permissionCode'],
    ),
    dependentRequired: { resourceType: ['resourceId'], resourceId: ['resourceType'], scopeAccess: ['resourceType'] },
  },
  DiagnosticsRequestTarget: strictObject({
    method: { type: 'string', pattern: '^[A-Za-z]{1,20}$' },
    path: { type: 'string', minLength: 1, maxLength: 8192, description: 'Normalized as the proxy would (design.md §7); a refused path is a 400.' },
  }),
  JwkSet: strictObject({ keys: { type: 'array', items: ref('Jwk'), description: 'Empty when `iam.forward.assertion` is off.' } }),
  Jwk: {
    description: 'A public key (RFC 7517 §4). Private members (`d`, `p`, `q`, `k`…) are not allowed.',
    ...strictObject(
      {
        kty: { enum: ['EC', 'RSA', 'OKP'] },
        kid: { type: 'string', minLength: 1 },
        use: { const: 'sig' },
        alg: { type: 'string' },
        key_ops: { type: 'array', items: { const: 'verify' } },
        crv: { type: 'string' },
        x: { type: 'string' },
        y: { type: 'string' },
        n: { type: 'string' },
        e: { type: 'string' },
      },
      ['kty', 'kid'],
    ),
  },
  OpenApi: {
    description: 'This document.',
    type: 'object',
    required: ['openapi', 'info', 'paths'],
    properties: {
      openapi: { const: '3.1.0' },
      info: { type: 'object', required: ['title', 'version'], properties: { title: { type: 'string' }, version: { type: 'string' } } },
      paths: { type: 'object' },
    },
  },
  TemplateInput: strictObject(
    {
      name: { type: 'string', minLength: 1, maxLength: 200 },
      description: { type: 'string', maxLength: 2000 },
      permissions: { type: 'array', uniqueItems: true, maxItems: 1000, items: { type: 'string', pattern: PERMISSION_CODE_PATTERN, maxLength: 200 } },
    },
    ['name', 'permissions'],
  ),
  Template: strictObject({
    versionId: identifier('From the path.'),
    name: { type: 'string' },
    description: { type: ['string', 'null'] },
    permissions: { type: 'array', items: { type: 'string', pattern: PERMISSION_CODE_PATTERN } },
  }),
  User: strictObject(
    {
      userId: identifier('The host\'s user id.'),
      displayName: { type: ['string', 'null'] },
      enabled: { type: 'boolean' },
      authorizationVersion: { type: 'integer', minimum: 0 },
      createdAt: timestamp('First seen.'),
      updatedAt: timestamp('Last changed.'),
    },
    ['userId', 'displayName', 'enabled', 'authorizationVersion'],
  ),
  UserInput: strictObject({ displayName: { type: 'string', maxLength: 200 }, enabled: { type: 'boolean' } }, ['enabled']),
  Identity: strictObject({
    identityId: identifier('From the path.'),
    userId: identifier('Owner.'),
    identityDomain: identifier('Domain.'),
    enabled: { type: 'boolean' },
  }),
  IdentityInput: strictObject({ userId: identifier('An existing user (else 422).'), identityDomain: identifier('Domain.'), enabled: { type: 'boolean' } }),
  ProfileInput: strictObject({
    userId: identifier('An existing user (else 422).'),
    profileName: { type: 'string', minLength: 1, maxLength: 200 },
    templateVersionId: identifier('An existing template version (else 422).'),
    clientTypes: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 50 }, uniqueItems: true, maxItems: 50 },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
  }),
  ScopesInput: {
    type: 'array',
    items: ref('Scope'),
    maxItems: 1000,
    description: 'Replaces every scope of the profile; [] = unscoped. One entry per (scopeType, scopeRefId), else 400.',
  },
  AuthorizationVersion: strictObject({ userId: identifier('The user.'), authorizationVersion: { type: 'integer', minimum: 0 } }),
  RevokeInput: strictObject({ reason: { type: 'string', pattern: '^[\\x20-\\x7E]{1,200}$', description: 'Printable ASCII.' } }, []),
  RevokedCount: strictObject({ revoked: { type: 'integer', minimum: 0, description: 'How many sessions ended.' } }),
  AuditEvent: strictObject({
    id: { type: 'string', minLength: 1 },
    occurredAt: timestamp('When.'),
    actorUserId: { type: ['string', 'null'] },
    action: { type: 'string', minLength: 1, description: 'e.g. auth.login, session.revoke, authz.deny, admin.profile.update.' },
    targetType: { type: ['string', 'null'] },
    targetId: { type: ['string', 'null'] },
    outcome: { enum: ['success', 'failure', 'denied', 'shadow_denied'] },
    requestId: { type: ['string', 'null'] },
    decisionId: { type: ['string', 'null'] },
    clientAddress: { type: ['string', 'null'] },
    details: { type: ['object', 'null'] },
  }),
  UserPage: page('User'),
  AuditPage: page('AuditEvent'),
};

const components: OpenApiDocument['components'] = {
  schemas,
  securitySchemes: {
    bearer: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'iamt_<43 base64url characters>',
      description: 'The `accessToken` of login or profile switch, in the Authorization header only (never the query string; RFC 6750 §2.1).',
    },
  },
  headers: {
    RequestId: { description: 'The request id, also in problem bodies and the log.', required: true, schema: { type: 'string', format: 'uuid' } },
    NoStore: { description: 'Tokens and errors are never cached.', required: true, schema: { const: 'no-store' } },
    WwwAuthenticate: {
      description: 'RFC 6750 §3: `Bearer realm="iam-gateway"`, with `error="invalid_token"` when a token was sent.',
      required: true,
      schema: { type: 'string', pattern: '^Bearer realm="iam-gateway"' },
    },
    RetryAfter: { description: 'Seconds to wait (RFC 9110 §10.2.3).', required: true, schema: { type: 'string', pattern: '^[0-9]+$' } },
    ETag: { description: 'The profile version as a strong entity tag (RFC 9110 §8.8.3); send it back in If-Match.', required: true, schema: { type: 'string', pattern: '^"[0-9]+"$' } },
  },
  parameters: {
    Limit: { name: 'limit', in: 'query', description: 'Page size; larger values are capped at 200.', schema: { type: 'integer', minimum: 1, default: 50 } },
    Cursor: { name: 'cursor', in: 'query', description: 'The `nextCursor` of the previous page (opaque); another value is a 400.', schema: { type: 'string', minLength: 1 } },
    UserId: { name: 'userId', in: 'path', required: true, schema: { type: 'string', pattern: IDENTIFIER_PATTERN } },
    ProfileId: { name: 'profileId', in: 'path', required: true, schema: { type: 'string', minLength: 1 } },
    SessionId: { name: 'sessionId', in: 'path', required: true, schema: { type: 'string', minLength: 1 } },
    IfMatch: {
      name: 'If-Match',
      in: 'header',
      description: '`*` or the ETag last read (RFC 9110 §13.1.1); a stale one gets 409 IAM_CONFLICT, a malformed one 400.',
      schema: { type: 'string' },
    },
  },
  responses: {
    Unauthenticated: problem(401, ['IAM_UNAUTHENTICATED'], 'No token, or an invalid, expired or revoked one.', {
      headers: { 'WWW-Authenticate': header('WwwAuthenticate') },
    }),
    AccessDenied: problem(403, ['IAM_ACCESS_DENIED'], 'The permission or scope condition is not met; `decisionId` and `step` explain why.', {
      require: ['decisionId', 'step'],
    }),
    ValidationFailed: problem(400, ['IAM_VALIDATION_FAILED'], 'The body is not valid JSON or not of the documented shape; `errors` names every JSON pointer.'),
    PayloadTooLarge: problem(413, ['IAM_PAYLOAD_TOO_LARGE'], 'The body is larger than `server.iam-body-limit`.'),
    InternalError: problem(500, ['IAM_INTERNAL_ERROR'], 'Unexpected failure; the body reveals nothing, the log has the cause.'),
    Unavailable: problem(503, ['IAM_STORE_UNAVAILABLE', 'IAM_DATABASE_UNAVAILABLE'], 'The token store or the database cannot be reached (fail closed).', {
      headers: { 'Retry-After': header('RetryAfter') },
    }),
  },
};

const authenticationTags = [
  { name: 'auth', description: 'Login, logout, the current principal (specification §4.1).' },
  { name: 'sessions', description: 'The caller\'s own sessions (specification §4.1).' },
  { name: 'authorization', description: 'Profiles, switch, diagnostics, decisions, forward-auth (specification §4.2, design.md §4.4, §9).' },
  { name: 'admin', description: 'Administration (specification §4.3); each operation names its `iam.admin.*` permission.' },
  { name: 'meta', description: 'This document and the assertion signing keys.' },
];

const nonAdminPaths: Record<string, PathItemObject> = {
  '/iam/auth/login': {
    post: {
      operationId: 'login',
      summary: 'Log in and receive a bearer token',
      description: 'The active profile is the user\'s first enabled, non-revoked profile (lowest profileId) whose clientTypes include the clientType, or null.',
      tags: ['auth'],
      security: [],
      requestBody: jsonBody(ref('LoginRequest')),
      responses: {
        '200': json('Logged in.', ref('AuthenticationResult'), { 'Cache-Control': header('NoStore') }),
        '400': response('ValidationFailed'),
        '401': problem(401, ['IAM_INVALID_CREDENTIALS'], 'Wrong username or password, or a disabled user or identity.', {
          headers: { 'WWW-Authenticate': header('WwwAuthenticate') },
        }),
        ...BODY_FAILURES,
        '429': problem(429, ['IAM_RATE_LIMITED'], 'Too many failures for this username and address.', { headers: { 'Retry-After': header('RetryAfter') } }),
        '500': response('InternalError'),
        '502': problem(502, ['IAM_AUTHENTICATOR_UNAVAILABLE'], 'The host\'s credential check did not answer usefully; never a login.'),
        '503': response('Unavailable'),
      },
    },
  },
  '/iam/auth/logout': {
    post: {
      operationId: 'logout',
      summary: 'End the current session',
      tags: ['auth'],
      responses: { '204': empty('The token no longer works, on every instance.'), ...PROTECTED_FAILURES },
    },
  },
  '/iam/auth/me': {
    get: {
      operationId: 'getCurrentPrincipal',
      summary: 'The principal of the current token',
      tags: ['auth'],
      responses: { '200': json('The principal.', ref('Principal')), ...PROTECTED_FAILURES },
    },
  },
  '/iam/sessions': {
    get: {
      operationId: 'listSessions',
      summary: 'The caller\'s sessions, every state',
      tags: ['sessions'],
      responses: { '200': json('Sessions of the caller\'s user.', { type: 'array', items: ref('Session') }), ...PROTECTED_FAILURES },
    },
  },
  '/iam/sessions/{sessionId}/revoke': {
    parameters: [param('SessionId')],
    post: {
      operationId: 'revokeSession',
      summary: 'Revoke one of the caller\'s own sessions',
      tags: ['sessions'],
      responses: {
        '204': empty('Revoked (or already ended).'),
        '404': problem(404, ['IAM_SESSION_NOT_FOUND'], 'Unknown, or another user\'s: never revealed.'),
        ...PROTECTED_FAILURES,
      },
    },
  },
  '/iam/sessions/revoke-others': {
    post: {
      operationId: 'revokeOtherSessions',
      summary: 'Revoke every session of the caller\'s user except the current one',
      tags: ['sessions'],
      responses: { '204': empty('Revoked.'), ...PROTECTED_FAILURES },
    },
  },
  '/iam/authorization/profiles': {
    get: {
      operationId: 'listProfiles',
      summary: 'The caller\'s enabled, non-revoked profiles with their scopes',
      tags: ['authorization'],
      responses: {
        '200': json('Available profiles.', {
          type: 'array',
          items: { allOf: [ref('Profile'), { type: 'object', properties: { enabled: { const: true }, revoked: { const: false } } }] },
        }),
        ...PROTECTED_FAILURES,
      },
    },
  },
  '/iam/authorization/profiles/{profileId}/switch': {
    parameters: [param('ProfileId')],
    post: {
      operationId: 'switchProfile',
      summary: 'Issue a new token acting under another of the caller\'s profiles',
      description: 'The original token keeps its own profile, unchanged.',
      tags: ['authorization'],
      responses: {
        '200': json('A new session under that profile.', ref('AuthenticationResult'), { 'Cache-Control': header('NoStore') }),
        '404': problem(404, ['IAM_PROFILE_NOT_FOUND'], 'Unknown, another user\'s, disabled or revoked.'),
        ...PROTECTED_FAILURES,
      },
    },
  },
  '/iam/authorization/diagnostics': {
    post: {
      operationId: 'diagnose',
      summary: 'Explain a decision with the real engine',
      description: 'Runs the same decision the proxy enforces, for the caller\'s session, and returns it whatever the outcome.',
      tags: ['authorization'],
      requestBody: jsonBody(ref('DiagnosticsRequest')),
      responses: {
        '200': json('The decision (allowed or not).', ref('Decision')),
        '400': problem(400, ['IAM_VALIDATION_FAILED', 'IAM_BAD_REQUEST'], 'An invalid body, or a `path` the proxy would refuse to interpret.'),
        ...BODY_FAILURES,
        ...PROTECTED_FAILURES,
      },
    },
  },
  '/iam/authorization/decisions/{decisionId}': {
    parameters: [{ name: 'decisionId', in: 'path', required: true, schema: { type: 'string', minLength: 1 } }],
    get: {
      operationId: 'getDecision',
      summary: 'The decision behind a denial',
      description: 'Visible to the user it concerns, and to callers granted `iam.admin.audit:read`.',
      tags: ['authorization'],
      responses: {
        '200': json('The decision as it was made.', ref('Decision')),
        '404': problem(404, ['IAM_DECISION_NOT_FOUND'], 'Unknown, or not visible to the caller.'),
        ...PROTECTED_FAILURES,
      },
    },
  },
  '/iam/authorization/forward-auth': {
    get: {
      operationId: 'forwardAuth',
      summary: 'Authorize a request for nginx auth_request, Traefik ForwardAuth, Caddy forward_auth, Envoy',
      description:
        'Reads the original method and URI from X-Forwarded-Method/X-Forwarded-Uri (or X-Original-Method/X-Original-URI) and decides with the proxy\'s own engine and policy. ' +
        'Any HTTP method is accepted (auth_request keeps the original one); the bearer token is needed when the matched route needs one.',
      tags: ['authorization'],
      security: [{ bearer: [] }, {}],
      parameters: [
        { name: 'X-Forwarded-Uri', in: 'header', description: 'The original request target (or X-Original-URI).', schema: { type: 'string' } },
        { name: 'X-Forwarded-Method', in: 'header', description: 'The original method (or X-Original-Method); default GET.', schema: { type: 'string' } },
      ],
      responses: {
        '200': empty('Allowed. Carries the identity headers the host would receive (design.md §4.3) when a session was presented.', {
          'X-IAM-User-Id': { schema: { type: 'string' } },
          'X-IAM-Identity-Id': { schema: { type: 'string' } },
          'X-IAM-Identity-Domain': { schema: { type: 'string' } },
          'X-IAM-Session-Id': { schema: { type: 'string' } },
          'X-IAM-Profile-Id': { schema: { type: 'string' } },
          'X-IAM-Permission': { schema: { type: 'string' } },
          'X-IAM-Assertion': { description: 'When `iam.forward.assertion` is on: an EdDSA JWT, keys at /iam/.well-known/jwks.json.', schema: { type: 'string' } },
        }),
        '400': problem(400, ['IAM_BAD_REQUEST'], 'No original URI, a method that is not one, or a target the proxy would refuse.'),
        '401': response('Unauthenticated'),
        '403': response('AccessDenied'),
        '404': problem(404, ['IAM_RESOURCE_NOT_FOUND'], 'The host\'s resolver knows no such resource (not a lack of rights).'),
        '500': problem(500, ['IAM_RESOURCE_RESOLUTION_UNAVAILABLE', 'IAM_INTERNAL_ERROR'], 'The route needs resolution and no resolver is configured, or an unexpected failure.'),
        '502': problem(502, ['IAM_UPSTREAM_UNAVAILABLE'], 'The resolver could not be reached.'),
        '503': response('Unavailable'),
      },
    },
  },
  '/iam/openapi.json': {
    get: {
      operationId: 'getOpenApiDocument',
      summary: 'This OpenAPI description',
      tags: ['meta'],
      security: [],
      responses: { '200': json('OpenAPI 3.1.', ref('OpenApi')) },
    },
  },
  '/iam/.well-known/jwks.json': {
    get: {
      operationId: 'getJwks',
      summary: 'Public keys of the X-IAM-Assertion signatures',
      description: 'Present even when `iam.forward.assertion` is off (then `keys` is empty), so hosts can configure verification ahead.',
      tags: ['meta'],
      security: [],
      responses: { '200': json('JWK set (RFC 7517 §5).', ref('JwkSet')) },
    },
  },
};

/** Every admin write: the path id and the body are checked (400) before anything is written. */
const ADMIN_WRITE_FAILURES = { '400': response('ValidationFailed'), ...BODY_FAILURES };
const conflict = (description: string): ResponseObject => problem(409, ['IAM_CONFLICT'], description);
const unknownUser = problem(404, ['IAM_NOT_FOUND'], 'No such user.');

const adminPaths: Record<string, PathItemObject> = {
  '/iam/admin/templates/{versionId}': {
    parameters: [{ name: 'versionId', in: 'path', required: true, schema: { type: 'string', pattern: IDENTIFIER_PATTERN } }],
    put: admin('iam.admin.templates:write', {
      operationId: 'putTemplate',
      summary: 'Create or update a permission template version',
      description: 'Changing the permissions raises the authorization version of every user with a profile on it.',
      requestBody: jsonBody(ref('TemplateInput')),
      responses: {
        ...upserted(ref('Template'), 'template version'),
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('Created concurrently by another request; retry.'),
      },
    }),
  },
  '/iam/admin/users': {
    get: admin('iam.admin.users:read', {
      operationId: 'listUsers',
      summary: 'List users, by userId',
      parameters: [
        param('Limit'),
        param('Cursor'),
        { name: 'q', in: 'query', description: 'Matches userId or displayName.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
        { name: 'domain', in: 'query', description: 'Only users with an identity in this domain.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
      ],
      responses: { '200': json('One page.', ref('UserPage'), NO_STORE), '400': response('ValidationFailed') },
    }),
  },
  '/iam/admin/users/{userId}': {
    parameters: [param('UserId')],
    put: admin('iam.admin.users:write', {
      operationId: 'putUser',
      summary: 'Create or update a user',
      description: 'Disabling a user ends every session of the user at once.',
      requestBody: jsonBody(ref('UserInput')),
      responses: { ...upserted(ref('User'), 'user'), ...ADMIN_WRITE_FAILURES, '409': conflict('Created concurrently by another request; retry.') },
    }),
  },
  '/iam/admin/users/{userId}/identities': {
    parameters: [param('UserId')],
    get: admin('iam.admin.users:read', {
      operationId: 'listUserIdentities',
      summary: 'List a user\'s identities',
      responses: { '200': json('Identities, by identityId.', { type: 'array', items: ref('Identity') }, NO_STORE), '400': response('ValidationFailed'), '404': unknownUser },
    }),
  },
  '/iam/admin/identities/{identityId}': {
    parameters: [{ name: 'identityId', in: 'path', required: true, schema: { type: 'string', pattern: IDENTIFIER_PATTERN } }],
    put: admin('iam.admin.identities:write', {
      operationId: 'putIdentity',
      summary: 'Create or update an identity',
      requestBody: jsonBody(ref('IdentityInput')),
      responses: {
        ...upserted(ref('Identity'), 'identity'),
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('The identity belongs to another user (identities are never moved), or a concurrent write.'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'The body names an unknown user (issue 5: "404 for an unknown user").'),
      },
    }),
  },
  '/iam/admin/profiles/{profileId}': {
    parameters: [param('ProfileId')],
    put: admin('iam.admin.profiles:write', {
      operationId: 'putProfile',
      summary: 'Create or update a profile (optimistic locking with If-Match)',
      description: 'A disabled or revoked profile stops granting on the next request of every session using it.',
      parameters: [param('IfMatch')],
      requestBody: jsonBody(ref('ProfileInput')),
      responses: {
        ...upserted(ref('Profile'), 'profile', { ETag: header('ETag') }),
        ...ADMIN_WRITE_FAILURES,
        '409': conflict('If-Match names a version that is no longer current, the profile belongs to another user, or a concurrent write.'),
        '422': problem(422, ['IAM_VALIDATION_FAILED'], 'A well-formed body naming an unknown user or template version (RFC 9110 §15.5.21).'),
      },
    }),
  },
  '/iam/admin/profiles/{profileId}/scopes': {
    parameters: [param('ProfileId')],
    put: admin('iam.admin.profiles:write', {
      operationId: 'putProfileScopes',
      summary: 'Replace a profile\'s scopes',
      parameters: [param('IfMatch')],
      requestBody: jsonBody(ref('ScopesInput')),
      responses: {
        '200': json('The profile with its new scopes.', ref('Profile'), { ...NO_STORE, ETag: header('ETag') }),
        ...ADMIN_WRITE_FAILURES,
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such profile.'),
        '409': conflict('If-Match names a version that is no longer current, or a concurrent write.'),
      },
    }),
  },
  '/iam/admin/users/{userId}/authorization-version': {
    parameters: [param('UserId')],
    post: admin('iam.admin.users:write', {
      operationId: 'raiseAuthorizationVersion',
      summary: 'Raise a user\'s authorization version (live sessions pick up fresh permissions)',
      responses: { '200': json('The new version.', ref('AuthorizationVersion'), NO_STORE), '400': response('ValidationFailed'), '404': unknownUser },
    }),
  },
  '/iam/admin/sessions/{sessionId}/revoke': {
    parameters: [param('SessionId')],
    post: admin('iam.admin.sessions:revoke', {
      operationId: 'adminRevokeSession',
      summary: 'Revoke any session',
      requestBody: jsonBody(ref('RevokeInput'), 'Optional reason (default `revoked_by_admin`), kept with the session and in the audit trail.', false),
      responses: { '204': empty('Revoked (or already ended).'), ...ADMIN_WRITE_FAILURES, '404': problem(404, ['IAM_SESSION_NOT_FOUND'], 'No such session.') },
    }),
  },
  '/iam/admin/users/{userId}/sessions/revoke': {
    parameters: [param('UserId')],
    post: admin('iam.admin.sessions:revoke', {
      operationId: 'revokeUserSessions',
      summary: 'Revoke every session of a user',
      requestBody: jsonBody(ref('RevokeInput'), 'Optional reason (default `revoked_by_admin`).', false),
      responses: { '200': json('How many sessions ended.', ref('RevokedCount'), NO_STORE), ...ADMIN_WRITE_FAILURES, '404': unknownUser },
    }),
  },
  '/iam/admin/audit': {
    get: admin('iam.admin.audit:read', {
      operationId: 'listAuditEvents',
      summary: 'Read the audit trail, newest first',
      parameters: [
        { name: 'userId', in: 'query', description: 'Acting user.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
        { name: 'action', in: 'query', description: 'e.g. authz.deny.', schema: { type: 'string', minLength: 1, maxLength: 200 } },
        { name: 'since', in: 'query', description: 'ISO 8601 timestamp with a zone.', schema: { type: 'string', format: 'date-time' } },
        param('Limit'),
        param('Cursor'),
      ],
      responses: { '200': json('One page.', ref('AuditPage'), NO_STORE), '400': response('ValidationFailed') },
    }),
  },
};

/** The OpenAPI 3.1 document of the gateway's own `/iam` endpoints. */
export const openApiDocument: OpenApiDocument = {
  openapi: '3.1.0',
  jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
  info: {
    title: 'iam-gateway /iam API',
    version: '0.1.0',
    summary: 'Login sessions, central revocation, profile/permission/scope authorization and explained denials.',
    description:
      'Every error is `application/problem+json` (RFC 9457) with a stable `code`. Besides the answers listed per operation, any request may be ' +
      'refused before routing: 400 IAM_BAD_REQUEST (a target or header set the gateway will not interpret), 405 IAM_METHOD_NOT_ALLOWED, ' +
      '414 IAM_URI_TOO_LONG, 431 IAM_HEADERS_TOO_LARGE.',
    license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
  },
  tags: authenticationTags,
  security: [{ bearer: [] }],
  paths: { ...nonAdminPaths, ...adminPaths },
  components,
};
