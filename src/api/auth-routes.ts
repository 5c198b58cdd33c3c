import type { Middleware } from 'koa';
import type { LoginService } from '../auth/login-service';
import type { SessionService } from '../sessions/session-service';
import { clearedSessionCookie } from '../http/session-cookie';
import { callerOf, factsOf } from './iam-context';
import { BODY_FAILURES, empty, header, problem, response } from './openapi-builders';
import { route, type RouteDeclaration } from './route-declaration';
import { LoginRequest, loginRequest } from './schemas/requests';
import { AuthenticationResult, Principal } from './schemas/responses';

export interface AuthRoutesDeps {
  login: LoginService;
  sessions: SessionService;
  clientTypes: string[];
  /** The session guard for logout: also answered from the durable record while the token store is down. */
  endingGuard: Middleware;
  /** `iam.session-cookie.secure`: which session cookie logout clears. */
  secureCookie: boolean;
}

/** docs/http-contract.md: login (public), logout (its own guard), me (a session), each declared once (route-declaration.ts). */
export const authRoutes: ReadonlyArray<RouteDeclaration<AuthRoutesDeps>> = [
  route({
    method: 'post',
    path: '/iam/auth/login',
    access: 'public',
    body: { schema: LoginRequest, configured: ({ clientTypes }) => loginRequest(clientTypes) },
    response: { schema: AuthenticationResult, description: 'Logged in.', headers: { 'Cache-Control': header('NoStore') } },
    operation: {
      operationId: 'login',
      summary: 'Log in and receive a bearer token',
      description: 'The active profile is the user\'s first enabled, non-revoked profile (lowest profileId) whose clientTypes include the clientType, or null.',
      tags: ['auth'],
      responses: {
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
    handler: (deps, request) => async (ctx) => {
      ctx.body = await deps.login.login(request.read(ctx), factsOf(ctx));
      ctx.set('Cache-Control', 'no-store');
    },
   }),
  {
    method: 'post',
    path: '/iam/auth/logout',
    // Logout only ends the caller's session: while the token store is down, the durable record vouches for it (#11.35).
    access: { guard: 'own', security: 'session' },
    guard: ({ endingGuard }) => endingGuard,
    operation: {
      operationId: 'logout',
      summary: 'End the current session',
      description:
        'Authenticated by the bearer token or, without one, the session cookie (a cross-site request with the cookie is 403 IAM_CSRF_REJECTED). 204 while either the token store or the database can be reached (the other records it when it is back, also across a restart); 503 only when neither can.',
      tags: ['auth'],
      responses: {
        '204': empty('The token no longer works, on every instance; the session cookie is cleared.', { 'Set-Cookie': header('ClearedSessionCookie') }),
        '403': problem(403, ['IAM_CSRF_REJECTED'], 'Authenticated by the session cookie from another site (Sec-Fetch-Site or Origin).'),
      },
    },
    handler: (deps) => async (ctx) => {
      await deps.sessions.logout(callerOf(ctx), factsOf(ctx));
      // A browser session ends in the browser too (the token is already revoked everywhere).
      ctx.set('Set-Cookie', clearedSessionCookie(deps.secureCookie));
      ctx.status = 204;
    },
  },
  route({
    method: 'get',
    path: '/iam/auth/me',
    access: 'session',
    response: { schema: Principal, description: 'The principal.' },
    operation: {
      operationId: 'getCurrentPrincipal',
      summary: 'The principal of the current token',
      tags: ['auth'],
      responses: {},
    },
    handler: () => (ctx) => {
      ctx.body = callerOf(ctx).record.principal;
    },
  }),
];
