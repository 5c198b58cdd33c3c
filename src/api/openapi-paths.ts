/**
 * The paths of the `/iam` OpenAPI document that are not declared routes (route-declaration.ts): login, logout and
 * OpenID Connect, the host decisions (check, plan: their own credentials), forward-auth, the console and meta.
 */
import { BODY_FAILURES, NO_STORE, OPTIONAL_SESSION, PROTECTED_FAILURES, empty, formBody, header, html, json, jsonBody, pageOrProblem, problem, ref, response } from './openapi-builders';
import type { PathItemObject } from './openapi-types';

/** What check and plan answer besides their result: the subject's refusals, then the body's and the session's. */
const SUBJECT_FAILURES = {
  '403': problem(403, ['IAM_ACCESS_DENIED', 'IAM_CSRF_REJECTED'], 'A `subject` named without `iam.authorization.decisions:check`, or a cross-site cookie request.'),
  '404': problem(404, ['IAM_SESSION_NOT_FOUND', 'IAM_NOT_FOUND'], 'The `subject` session is not live, or its user unknown.'),
  ...BODY_FAILURES,
  ...PROTECTED_FAILURES,
};

/** The path items of the routes registered without a declaration. */
export const nonAdminPaths: Record<string, PathItemObject> = {
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
        '429': problem(429, ['IAM_RATE_LIMITED'], 'Too many failures for this username and client address, or from this client address.', { headers: { 'Retry-After': header('RetryAfter') } }),
        '500': response('InternalError'),
        '501': problem(501, ['IAM_LOGIN_NOT_CONFIGURED'], 'No authenticator is configured (`iam.authenticator.type: none`, the default): logins are off.'),
        '502': problem(502, ['IAM_AUTHENTICATOR_UNAVAILABLE'], 'The host\'s credential check did not answer usefully; never a login.'),
        '503': problem(503, ['IAM_STORE_UNAVAILABLE', 'IAM_DATABASE_UNAVAILABLE', 'IAM_BUSY'], 'A store cannot be reached, or too many password checks are queued (IAM_BUSY).', {
          headers: { 'Retry-After': header('RetryAfter') },
        }),
      },
    },
  },
  '/iam/auth/logout': {
    post: {
      operationId: 'logout',
      summary: 'End the current session',
      description:
        'Authenticated by the bearer token or, without one, the session cookie (a cross-site request with the cookie is 403 IAM_CSRF_REJECTED). 204 while either the token store or the database can be reached (the other records it when it is back, also across a restart); 503 only when neither can.',
      tags: ['auth'],
      responses: {
        '204': empty('The token no longer works, on every instance; the session cookie is cleared.', { 'Set-Cookie': header('ClearedSessionCookie') }),
        '403': problem(403, ['IAM_CSRF_REJECTED'], 'Authenticated by the session cookie from another site (Sec-Fetch-Site or Origin).'),
        ...PROTECTED_FAILURES,
      },
    },
  },
  '/iam/login': {
    get: {
      operationId: 'showLoginPage',
      summary: 'The browser login form',
      description:
        'An HTML form posting to `POST /iam/login`. With `iam.authenticator.type: oidc` the browser is sent to `/iam/auth/oidc/login` instead (302).',
      tags: ['auth'],
      security: [],
      parameters: [
        { name: 'returnTo', in: 'query', description: 'A same-origin relative path to go back to after the login; anything else becomes `/`.', schema: { type: 'string' } },
      ],
      responses: {
        '200': html('The login form.'),
        '302': empty('To the OpenID Connect login (authenticator `oidc`).', { Location: header('Location') }),
      },
    },
    post: {
      operationId: 'submitLoginPage',
      summary: 'Log a browser in: sets the session cookie',
      description:
        'Form-encoded `username`, `password`, `returnTo`; the session has the client type `WEB` (or the first configured one). A refusal shows the form again, with the error and the status the API login would give.',
      tags: ['auth'],
      security: [],
      requestBody: formBody(ref('LoginForm')),
      responses: {
        '303': empty('Logged in: to `returnTo` (same-origin relative paths only, else `/`), with the session cookie.', {
          Location: header('Location'),
          'Set-Cookie': header('SessionCookie'),
        }),
        '400': {
          description: 'A missing or empty field: the form again for a browser (Accept prefers text/html), else the validation problem.',
          headers: { 'X-Request-Id': header('RequestId') },
          content: { ...html('').content, ...problem(400, ['IAM_VALIDATION_FAILED'], '').content },
        },
        '401': html('Wrong username or password (or a disabled user): the form again, with the error.'),
        '403': problem(403, ['IAM_CSRF_REJECTED'], 'Posted from another site (login CSRF): `Sec-Fetch-Site: cross-site` or a foreign `Origin`.'),
        ...BODY_FAILURES,
        '429': html('Too many attempts: the form again, with `Retry-After`.', { 'Retry-After': header('RetryAfter') }),
        '500': response('InternalError'),
        '501': html('No authenticator is configured: the form again, saying so.'),
        '502': html('The host\'s credential check did not answer usefully: the form again, saying so.'),
        '503': html('A store cannot be reached, or too many password checks are queued: the form again, saying so.'),
      },
    },
  },
  '/iam/auth/oidc/login': {
    get: {
      operationId: 'startOidcLogin',
      summary: 'Sign in at the OpenID Provider (authenticator `oidc`)',
      description:
        'Redirects the browser to the provider (authorization code flow with PKCE, `state` and `nonce`), with a sealed `__Host-iam-oidc` cookie binding the callback to this browser for 10 minutes.',
      tags: ['oidc'],
      security: [],
      parameters: [{ name: 'returnTo', in: 'query', description: 'A same-origin relative path to come back to; anything else becomes `/`.', schema: { type: 'string' } }],
      responses: {
        '302': empty("To the provider's authorization endpoint.", { Location: header('Location'), 'Set-Cookie': header('LoginStateCookie') }),
        '500': response('InternalError'),
        '502': pageOrProblem(502, ['IAM_IDP_UNAVAILABLE'], 'The provider cannot be discovered (down, or not an OpenID Provider).'),
        '504': pageOrProblem(504, ['IAM_IDP_TIMEOUT'], 'The provider did not answer within `iam.oidc.timeout`.'),
      },
    },
  },
  '/iam/auth/oidc/callback': {
    get: {
      operationId: 'completeOidcLogin',
      summary: 'Back from the OpenID Provider: sets the session cookie',
      description:
        "Checks `state` against the sealed cookie (once: a replayed state is refused on every instance), redeems the code with the PKCE verifier, validates the id token (signature, `iss`, `aud`, `exp`, `nonce`), maps its claims to the user and logs in as client type `WEB`.",
      tags: ['oidc'],
      security: [],
      responses: {
        '303': empty('Logged in: to the `returnTo` of the login, with the session cookie.', { Location: header('Location'), 'Set-Cookie': header('SessionCookie') }),
        '400': pageOrProblem(400, ['IAM_OIDC_STATE_INVALID'], 'No login state from this browser, a tampered, expired or foreign one, or a replayed callback.'),
        '401': pageOrProblem(401, ['IAM_OIDC_LOGIN_FAILED', 'IAM_INVALID_CREDENTIALS'], 'The provider refused, its answer failed a check, or the user may not log in (unknown with `users: existing`, disabled, or a provider account not linked to the existing user its claims name: `iam.oidc.link-by`).'),
        '429': pageOrProblem(429, ['IAM_RATE_LIMITED'], 'Too many failed logins from this client address (`iam.login.rate-limit.max-failures-per-address`); a callback with a matching state counts as an attempt.', {
          headers: { 'Retry-After': header('RetryAfter') },
        }),
        '500': response('InternalError'),
        '502': pageOrProblem(502, ['IAM_IDP_UNAVAILABLE'], 'The provider cannot be reached.'),
        '503': pageOrProblem(503, ['IAM_STORE_UNAVAILABLE', 'IAM_DATABASE_UNAVAILABLE'], 'A store cannot be reached; no session was created.'),
        '504': pageOrProblem(504, ['IAM_IDP_TIMEOUT'], 'The provider did not answer within `iam.oidc.timeout`.'),
      },
    },
  },
  '/iam/auth/oidc/logout': {
    get: {
      operationId: 'oidcLogout',
      summary: 'End the session here, then at the OpenID Provider',
      description:
        "Ends the caller's session (bearer or cookie; none is fine), clears the cookie and redirects to the provider's `end_session_endpoint` (RP-initiated logout) when it offers one, else to `/`.",
      tags: ['oidc'],
      security: OPTIONAL_SESSION,
      responses: {
        '302': empty("To the provider's end-session endpoint, or `/`.", { Location: header('Location'), 'Set-Cookie': header('ClearedSessionCookie') }),
        '403': pageOrProblem(403, ['IAM_CSRF_REJECTED'], 'A navigation from another site carrying the session cookie: nothing is ended.'),
        '500': response('InternalError'),
        '503': pageOrProblem(503, ['IAM_STORE_UNAVAILABLE', 'IAM_DATABASE_UNAVAILABLE'], 'The session could not be ended (neither store answers).'),
      },
    },
  },
  '/iam/auth/oidc/backchannel-logout': {
    post: {
      operationId: 'oidcBackchannelLogout',
      summary: 'OpenID Connect Back-Channel Logout: the provider ends sessions',
      description:
        "Form-encoded `logout_token` (OpenID Connect Back-Channel Logout 1.0). Verified: signature by the provider's JWKS with an allowed algorithm, `iss`, `aud` (the client id), `iat`, `events`, no `nonce`, `sid` or `sub`, `jti` used once. Every session of that provider session (`sid`), or of that user (`sub` alone), is revoked on every instance.",
      tags: ['oidc'],
      security: [],
      requestBody: formBody(ref('LogoutTokenForm')),
      responses: {
        '200': empty('The sessions are revoked (or there were none).', { 'Cache-Control': header('NoStore') }),
        '400': problem(400, ['IAM_LOGOUT_TOKEN_INVALID'], 'The logout token is missing, or fails a check (signature, issuer, audience, age, events, nonce, replayed jti).'),
        ...BODY_FAILURES,
        '500': response('InternalError'),
        '502': problem(502, ['IAM_IDP_UNAVAILABLE'], "The provider's keys cannot be fetched."),
        '503': response('Unavailable'),
        '504': problem(504, ['IAM_IDP_TIMEOUT'], "The provider's keys did not arrive within `iam.oidc.timeout`."),
      },
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
  '/iam/authorization/check': {
    post: {
      operationId: 'checkDecisions',
      summary: 'Decisions for the host: 1–100 checks, answered in order',
      description:
        'Each answer is exactly the decision the proxy makes for a route with that permission and resource (same steps, resolvers and `resolve: optional` semantics; ' +
        '`status` is what the proxy would answer), recorded with its `decisionId`. A resource named twice is resolved once. The subject: the caller (their bearer or cookie), ' +
        'the user of an `X-IAM-Assertion` a host sends back as the bearer (its session must still live), or, for a caller granted `iam.authorization.decisions:check`, the ' +
        '`subject` of the body. With the caller\'s own credential a resource is resolved only for a (permission, resource type) pair some policy route declares; any other ' +
        'pair is answered `ROUTE_NOT_DECLARED` without asking a resolver. A resolver that is down makes that result 502; the others still answer.',
      tags: ['authorization'],
      requestBody: jsonBody(ref('CheckRequest')),
      responses: {
        '200': json('One result per check, in order.', ref('CheckResponse'), NO_STORE),
        '400': response('ValidationFailed'),
        ...SUBJECT_FAILURES,
      },
    },
  },
  '/iam/authorization/plan': {
    post: {
      operationId: 'planResources',
      summary: 'Which resources of a type the subject reaches, to filter a list in the host\'s own query',
      description:
        '`ALL` (an unscoped profile, or a `*` scope of the type covering the access), `NONE` (the permission not granted, no valid profile, or no covering scope), or `SOME` ' +
        'with the covering scopes\' `scopeRefId`s (a WRITE scope covers READ). Only scopes of `resourceType` count. The subject as for `/iam/authorization/check`. No resolver is asked.',
      tags: ['authorization'],
      requestBody: jsonBody(ref('PlanRequest')),
      responses: {
        '200': json('The plan.', ref('PlanResponse'), NO_STORE),
        '400': response('ValidationFailed'),
        ...SUBJECT_FAILURES,
      },
    },
  },
  '/iam/authorization/forward-auth': {
    get: {
      operationId: 'forwardAuth',
      summary: 'Authorize a request for nginx auth_request, Traefik ForwardAuth, Caddy forward_auth, Envoy',
      description:
        'Reads the original method and URI from X-Forwarded-Method/X-Forwarded-Uri (or X-Original-Method/X-Original-URI) and decides with the proxy\'s own engine and policy. ' +
        'Fails closed: a missing, unknown or conflicting method or URI header, a URI not in the proxy\'s normal form, or client X-IAM-* headers are a 400. ' +
        'The bearer token (or the session cookie) is needed when the matched route needs one. ' +
        'The 200 carries the Cookie the host may see, which the proxy forwards instead of the client\'s.',
      tags: ['authorization'],
      security: OPTIONAL_SESSION,
      parameters: [
        { name: 'X-Forwarded-Uri', in: 'header', description: 'The original request target (or X-Original-URI); required.', schema: { type: 'string' } },
        { name: 'X-Forwarded-Method', in: 'header', description: 'The original method (or X-Original-Method); required, never guessed.', schema: { type: 'string' } },
        {
          name: 'X-Forwarded-Host',
          in: 'header',
          description: 'The host the client addressed, read only from a proxy in `iam.forward.trusted-proxies`: the gateway\'s own origin for the CSRF check of a cookie-authenticated write (else the Host header).',
          schema: { type: 'string' },
        },
      ],
      responses: {
        '200': empty('Allowed. Carries the identity headers the host would receive (docs/http-contract.md) when a session was presented.', {
          'X-IAM-User-Id': { schema: { type: 'string' } },
          'X-IAM-Identity-Id': { schema: { type: 'string' } },
          'X-IAM-Identity-Domain': { schema: { type: 'string' } },
          'X-IAM-Session-Id': { schema: { type: 'string' } },
          'X-IAM-Profile-Id': { schema: { type: 'string' } },
          'X-IAM-Permission': { description: 'Only when the permission was granted (never on a shadow denial).', schema: { type: 'string' } },
          'X-IAM-Shadow-Denied': { description: 'The failed step of a shadow route that let the request through although it would deny.', schema: { type: 'string' } },
          'X-IAM-Assertion': { description: 'When `iam.forward.assertion` is on: an EdDSA JWT, keys at /iam/.well-known/jwks.json.', schema: { type: 'string' } },
          Cookie: {
            description:
              'The cookies the host may see: the request\'s Cookie without the gateway\'s own (session, OpenID Connect state); absent when none is left. ' +
              'The proxy sends it to the host instead of the client\'s Cookie, and no Cookie when it is absent.',
            schema: { type: 'string' },
          },
        }),
        '400': problem(400, ['IAM_BAD_REQUEST'], 'No original method or URI, a method the proxy would not accept, a target the proxy would refuse or would rewrite, or client X-IAM-* headers.'),
        '401': response('Unauthenticated'),
        '403': response('AccessDenied'),
        '404': problem(404, ['IAM_RESOURCE_NOT_FOUND'], 'The host\'s resolver knows no such resource (not a lack of rights).'),
        '500': problem(500, ['IAM_RESOURCE_RESOLUTION_UNAVAILABLE', 'IAM_INTERNAL_ERROR'], 'The route needs resolution and no resolver is configured, or an unexpected failure.'),
        '502': problem(502, ['IAM_UPSTREAM_UNAVAILABLE'], 'The resolver could not be reached.'),
        '503': response('Unavailable'),
      },
    },
  },
  '/iam/console': {
    get: {
      operationId: 'showConsole',
      summary: 'The console (HTML) for a signed-in browser',
      description:
        'The console page; its script calls only this API with the session cookie. Without a session a browser is sent to the login (302), anyone else gets 401.',
      tags: ['console'],
      responses: {
        '200': html('The console page (`Content-Security-Policy` with `script-src \'self\'`, no inline script or style).'),
        '302': empty('No session: to the login, coming back here.', { Location: header('Location') }),
        '401': response('Unauthenticated'),
        '500': response('InternalError'),
        '503': response('Unavailable'),
      },
    },
  },
  '/iam/console/{page}': {
    parameters: [{ name: 'page', in: 'path', required: true, schema: { type: 'string', enum: ['explain', 'policy', 'sessions', 'access', 'audit', 'me'] } }],
    get: {
      operationId: 'showConsolePage',
      summary: 'A console page by its deep link (the same HTML; the script shows the page)',
      tags: ['console'],
      responses: {
        '200': html('The console page.'),
        '302': empty('No session: to the login, coming back here.', { Location: header('Location') }),
        '401': response('Unauthenticated'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such console page.'),
        '500': response('InternalError'),
        '503': response('Unavailable'),
      },
    },
  },
  '/iam/console/assets/{name}': {
    parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,80}$' } }],
    get: {
      operationId: 'getConsoleAsset',
      summary: "A console script, style or image (public: they hold no data)",
      tags: ['console'],
      security: [],
      responses: {
        '200': {
          description: 'The file (`Cache-Control: no-cache`, with an `ETag`).',
          headers: { 'X-Request-Id': header('RequestId') },
          content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } }, 'image/svg+xml': { schema: { type: 'string' } } },
        },
        '304': empty('Not modified (`If-None-Match`).'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such asset.'),
        '500': response('InternalError'),
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
