/**
 * The OpenAPI 3.1 description of every `/iam` endpoint (docs/http-contract.md), served at `/iam/openapi.json`.
 * It is the contract the end-to-end tests check the real responses against (test/e2e/openapi.test.ts), so a
 * schema here is never loosened to fit a response: a mismatch is a bug in the handler or in the document.
 * Schemas use the JSON Schema 2020-12 dialect (OpenAPI 3.1 §4.8.24) and reject unknown properties wherever
 * the gateway controls the shape. This file assembles the parts: types (openapi-types.ts), builders
 * (openapi-builders.ts), component schemas (schemas/: the same TypeBox schemas the routes validate with) and paths: the
 * operations of the declared routes (route-declaration.ts: every `/iam` route, each with who may call it, declared once
 * next to its handler).
 */
import { IDENTIFIER_PATTERN } from '../auth/identity-validation';
import { REQUEST_ID_PATTERN } from '../http/prepare-request';
import { adminRoutes } from './admin-routes';
import { authRoutes } from './auth-routes';
import { authorizationRoutes } from './authorization-routes';
import { consoleRoutes } from './console-routes';
import { decisionRoutes } from './decision-routes';
import { forwardAuthRoutes } from './forward-auth-route';
import { loginPageRoutes } from './login-page-routes';
import { metaRoutes } from './meta-routes';
import { oidcRoutes } from './oidc-routes';
import { header, problem, SESSION, withRefusalsBeforeRouting } from './openapi-builders';
import { policyRoutes } from './policy-routes';
import { sessionRoutes } from './session-routes';
import { declaredPaths, type RouteDeclaration } from './route-declaration';
import { componentSchemas } from './schemas/components';
import type { JsonSchema, OpenApiDocument } from './openapi-types';

// The document's types stay importable from here (the e2e tests).
export type {
  HeaderObject,
  HttpMethod,
  JsonSchema,
  JsonType,
  MediaTypeObject,
  OpenApiDocument,
  OperationObject,
  ParameterObject,
  PathItemObject,
  ReferenceObject,
  ResponseObject,
  SecurityRequirement,
  SecuritySchemeObject,
} from './openapi-types';
export { HTTP_METHODS } from './openapi-types';

const components: OpenApiDocument['components'] = {
  // TypeBox schemas are JSON Schema; their symbol-keyed metadata does not serialize.
  schemas: componentSchemas as Record<string, JsonSchema>,
  // docs/http-contract.md, Authentication: the gateway reads the bearer token, or without one the session cookie.
  securitySchemes: {
    bearer: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'iamt_<43 base64url characters>',
      description:
        'The `accessToken` of login or profile switch (`iamt_` and 256 random bits in base64url), in the Authorization header only ' +
        '(never the query string; RFC 6750 §2.1). With `iam.oidc.accept-access-tokens`, also a JWT access token of the OpenID ' +
        'Provider; for `/iam/authorization/check` and `/plan`, also an `X-IAM-Assertion` the gateway issued. A bearer wins over the cookie.',
    },
    sessionCookie: {
      type: 'apiKey',
      in: 'cookie',
      name: '__Host-iam-session',
      description:
        'The session cookie of a browser login (the same token; `iam-session` when `iam.session-cookie.secure` is false). Read only ' +
        'without a bearer token and when the request carries exactly one; a cookie-authenticated unsafe request from another site ' +
        '(Sec-Fetch-Site, Origin) is 403 IAM_CSRF_REJECTED.',
    },
  },
  headers: {
    RequestId: {
      description: 'The request id (a UUID, or the X-Request-Id of a trusted proxy), also in problem bodies and the log.',
      required: true,
      schema: { type: 'string', pattern: REQUEST_ID_PATTERN },
    },
    NoStore: { description: 'Tokens and errors are never cached.', required: true, schema: { const: 'no-store' } },
    WwwAuthenticate: {
      description: 'RFC 6750 §3: `Bearer realm="iam-gateway"`, with `error="invalid_token"` when a token was sent.',
      required: true,
      schema: { type: 'string', pattern: '^Bearer realm="iam-gateway"' },
    },
    RetryAfter: { description: 'Seconds to wait (RFC 9110 §10.2.3).', required: true, schema: { type: 'string', pattern: '^[0-9]+$' } },
    PageCsp: {
      description: "The page's Content-Security-Policy: no script or style, forms post only to the gateway, never framed.",
      required: true,
      schema: { type: 'string', pattern: "default-src 'none'" },
    },
    SessionCookie: {
      description:
        'The session cookie: `__Host-iam-session=<token>; Path=/; HttpOnly; SameSite=Lax; Secure` (`iam-session` without `Secure` when `iam.session-cookie.secure` is false).',
      required: true,
      schema: { type: 'string', pattern: '^(__Host-)?iam-session=iamt_[A-Za-z0-9_-]+; Path=/; HttpOnly; SameSite=Lax' },
    },
    ClearedSessionCookie: {
      description: 'Removes the session cookie: `__Host-iam-session=; Max-Age=0; …` (or `iam-session`).',
      required: true,
      schema: { type: 'string', pattern: '^(__Host-)?iam-session=; Max-Age=0;' },
    },
    LoginStateCookie: {
      description: 'The sealed login state (AES-GCM): `__Host-iam-oidc=…; Max-Age=600; Path=/; HttpOnly; SameSite=Lax; Secure` (`iam-oidc` without `Secure` in development).',
      required: true,
      schema: { type: 'string', pattern: '^(__Host-)?iam-oidc=v1\\.' },
    },
    Location: { description: 'Where the browser goes next.', required: true, schema: { type: 'string', minLength: 1 } },
    ETag: { description: "The object's version as a strong entity tag (RFC 9110 §8.8.3); send it back in If-Match.", required: true, schema: { type: 'string', pattern: '^"[0-9]+"$' } },
  },
  parameters: {
    UserId: { name: 'userId', in: 'path', required: true, schema: { type: 'string', pattern: IDENTIFIER_PATTERN } },
    ProfileId: { name: 'profileId', in: 'path', required: true, schema: { type: 'string', minLength: 1 } },
    SessionId: { name: 'sessionId', in: 'path', required: true, schema: { type: 'string', minLength: 1 } },
    IfMatch: {
      name: 'If-Match',
      in: 'header',
      description: '`*` or the ETag last read (RFC 9110 §13.1.1); a stale one gets 409 IAM_CONFLICT, a malformed one 400.',
      schema: { type: 'string' },
    },
    IfNoneMatch: {
      name: 'If-None-Match',
      in: 'header',
      description: '`*`: create only (RFC 9110 §13.1.2); when the object exists the write is refused with 409 IAM_CONFLICT and nothing is replaced. Not together with If-Match (400).',
      schema: { type: 'string', enum: ['*'] },
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
    UnsupportedMediaType: problem(415, ['IAM_UNSUPPORTED_MEDIA_TYPE'], 'The body is not `application/json` (or has no Content-Type).'),
    UriTooLong: problem(414, ['IAM_URI_TOO_LONG'], 'The request target is longer than `server.max-url-length`: refused before routing, whatever it names.'),
    InternalError: problem(500, ['IAM_INTERNAL_ERROR'], 'Unexpected failure; the body reveals nothing, the log has the cause.'),
    Unavailable: problem(503, ['IAM_STORE_UNAVAILABLE', 'IAM_DATABASE_UNAVAILABLE'], 'The token store or the database cannot be reached (fail closed).', {
      headers: { 'Retry-After': header('RetryAfter') },
    }),
  },
};

/**
 * Every `/iam` route (route-declaration.ts), in the document's order: their operations, `security`, `x-permission`
 * and guards all come from these declarations (test/unit/route-declaration.test.ts: the router registers no other).
 */
export const DECLARED_ROUTES: ReadonlyArray<RouteDeclaration<never>> = [
  ...authRoutes,
  ...loginPageRoutes,
  ...oidcRoutes,
  ...decisionRoutes,
  ...forwardAuthRoutes,
  ...consoleRoutes,
  ...metaRoutes,
  ...sessionRoutes,
  ...authorizationRoutes,
  ...adminRoutes,
  ...policyRoutes,
];

const authenticationTags = [
  { name: 'auth', description: 'Login, logout, the current principal (docs/http-contract.md).' },
  { name: 'console', description: 'The web console served by the gateway (docs/console.md); it uses only this API.' },
  { name: 'oidc', description: 'OpenID Connect login, logout and back-channel logout (docs/oidc.md).' },
  { name: 'sessions', description: 'The caller\'s own sessions (docs/http-contract.md).' },
  { name: 'authorization', description: 'Profiles, switch, diagnostics, decisions, forward-auth (docs/http-contract.md).' },
  { name: 'admin', description: 'Administration (docs/http-contract.md); each operation names its `iam.admin.*` permission.' },
  { name: 'meta', description: 'This document and the assertion signing keys.' },
];
/** The OpenAPI 3.1 document of the gateway's own `/iam` endpoints. */
export const openApiDocument: OpenApiDocument = {
  openapi: '3.1.0',
  jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
  info: {
    title: 'iam-gateway /iam API',
    version: '0.1.0',
    summary: 'Login sessions, central revocation, profile/permission/scope authorization and explained denials.',
    description:
      'Every error is `application/problem+json` (RFC 9457) with a stable `code`. Besides the answers listed per operation (each lists ' +
      '414 IAM_URI_TOO_LONG), any request may be refused before routing: 400 IAM_BAD_REQUEST (a target or header set the gateway will ' +
      'not interpret), 405 IAM_METHOD_NOT_ALLOWED, 431 IAM_HEADERS_TOO_LARGE. Credentials: the bearer token, or without one the session ' +
      'cookie (`security` of each operation; `[]` marks the public ones).',
    license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
  },
  // Relative: the gateway serves its `/iam` endpoints at its own origin, whatever name clients reach it by.
  servers: [{ url: '/', description: 'This gateway: the origin that served this document.' }],
  tags: authenticationTags,
  security: SESSION,
  paths: withRefusalsBeforeRouting(declaredPaths(DECLARED_ROUTES)),
  components,
};
