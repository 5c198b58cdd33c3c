import type { Context } from 'koa';
import type { IamRepository } from '../domain/iam-repository';
import { PROTECTED, type CallerAccepts, type CallerStep } from '../auth/caller';
import type { BackchannelLogout } from '../auth/oidc/backchannel-logout';
import { LOGIN_STATE_TTL_MS } from '../auth/oidc/login-state';
import type { OidcLogin } from '../auth/oidc/oidc-login';
import type { RelyingParty } from '../auth/oidc/relying-party';
import { ProblemError } from '../domain/problem';
import { requestCredential } from '../http/request-credential';
import type { PageBranding } from '../http/page-layout';
import { prefersHtml, problemPageHeaders, problemPageHtml } from '../http/problem-page';
import { safeReturnTo } from '../http/return-to';
import { clearedLoginStateCookie, clearedSessionCookie, loginStateCookie, loginStateCookieName, sessionCookie } from '../http/session-cookie';
import type { SessionService } from '../sessions/session-service';
import { factsOf, stateOf } from './iam-context';
import { redirect } from './login-page-routes';
import { BODY_FAILURES, empty, header, pageOrProblem, problem, response } from './openapi-builders';
import { route, type RouteDeclaration } from './route-declaration';
import { LogoutTokenForm } from './schemas/requests';
import { ReturnToQuery } from './schemas/queries';

export interface OidcRoutesDeps {
  login: OidcLogin;
  backchannel: BackchannelLogout;
  rp: RelyingParty;
  sessions: Pick<SessionService, 'logout'>;
  /** Where the login's ID token is kept (server side), for `id_token_hint` at sign-out. */
  repository: Pick<IamRepository, 'idTokenOfSession'>;
  /** The caller of the logout's credential, if any. */
  callers: Pick<CallerStep, 'callerOf'>;
  /** `iam.session-cookie.secure`. */
  secureCookie: boolean;
  trustedOrigins: ReadonlySet<string>;
  /** `iam.ui.*` for the failure pages (default: the gateway's own name, no logo). */
  branding?: PageBranding;
}

/**
 * What the OpenID Connect logout accepts: a gateway session only (never a provider token), and none is fine — any
 * credential that names no session just clears the cookie; like POST /iam/auth/logout, the durable record vouches
 * for the session while the token store is down (#11.35).
 */
const OIDC_LOGOUT: CallerAccepts = { ...PROTECTED, providerTokens: false, anonymous: true, optional: true, durableFallback: true };

/** The paths of the OpenID Connect endpoints (docs/oidc.md). */
export const OIDC_LOGIN_PATH = '/iam/auth/oidc/login';
/** The OpenID Connect logout (RP-initiated): ends the session here, then at the provider. */
export const OIDC_LOGOUT_PATH = '/iam/auth/oidc/logout';
export const OIDC_BACKCHANNEL_PATH = '/iam/auth/oidc/backchannel-logout';

/**
 * docs/oidc.md: `GET /iam/auth/oidc/login` (to the provider), `GET /iam/auth/oidc/callback` (back from it, with the
 * session cookie), `GET /iam/auth/oidc/logout` (ends the session here, then at the provider), and
 * `POST /iam/auth/oidc/backchannel-logout` (the provider ends sessions), each declared once (route-declaration.ts).
 * The browser endpoints answer a failure with a small HTML page when the client prefers HTML, else with the problem.
 */
export const oidcRoutes: ReadonlyArray<RouteDeclaration<OidcRoutesDeps>> = [
  route({
    method: 'get',
    path: '/iam/auth/oidc/login',
    access: 'public',
    query: ReturnToQuery,
    operation: {
      operationId: 'startOidcLogin',
      summary: 'Sign in at the OpenID Provider (authenticator `oidc`)',
      description:
        'Redirects the browser to the provider (authorization code flow with PKCE, `state` and `nonce`), with a sealed `__Host-iam-oidc` cookie binding the callback to this browser for 10 minutes.',
      tags: ['oidc'],
      responses: {
        '302': empty("To the provider's authorization endpoint.", { Location: header('Location'), 'Set-Cookie': header('LoginStateCookie') }),
        '500': response('InternalError'),
        '502': pageOrProblem(502, ['IAM_IDP_UNAVAILABLE'], 'The provider cannot be discovered (down, or not an OpenID Provider).'),
        '504': pageOrProblem(504, ['IAM_IDP_TIMEOUT'], 'The provider did not answer within `iam.oidc.timeout`.'),
      },
    },
    handler: (deps, _body, query) => {
      const secure = deps.secureCookie;
      return async (ctx) => {
        await forBrowser(ctx, deps.branding, async () => {
          const { location, stateCookie } = await deps.login.begin(safeReturnTo(query.read(ctx).returnTo));
          ctx.set('Set-Cookie', loginStateCookie(secure, stateCookie, LOGIN_STATE_TTL_MS / 1000));
          redirect(ctx, 302, location);
        });
      };
    },
  }),
  {
    method: 'get',
    path: '/iam/auth/oidc/callback',
    access: 'public',
    operation: {
      operationId: 'completeOidcLogin',
      summary: 'Back from the OpenID Provider: sets the session cookie',
      description:
        "Checks `state` against the sealed cookie (once: a replayed state is refused on every instance), redeems the code with the PKCE verifier, validates the id token (signature, `iss`, `aud`, `exp`, `nonce`), maps its claims to the user and logs in as client type `WEB`.",
      tags: ['oidc'],
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
    handler: (deps) => {
      const secure = deps.secureCookie;
      return async (ctx) => {
        await forBrowser(ctx, deps.branding, async () => {
          // The state cookie is spent whatever happens next.
          ctx.append('Set-Cookie', clearedLoginStateCookie(secure));
          const query = new URLSearchParams(ctx.querystring);
          const { result, returnTo } = await deps.login.complete(query, ctx.cookies.get(loginStateCookieName(secure)) ?? null, factsOf(ctx));
          ctx.append('Set-Cookie', sessionCookie(secure, result.accessToken));
          redirect(ctx, 303, returnTo);
        });
      };
    },
  },
  {
    method: 'get',
    path: OIDC_LOGOUT_PATH,
    access: { guard: 'own', security: 'optional-session' },
    operation: {
      operationId: 'oidcLogout',
      summary: 'End the session here, then at the OpenID Provider',
      description:
        "Ends the caller's session (bearer or cookie; none is fine), clears the cookie and redirects to the provider's `end_session_endpoint` (RP-initiated logout, with the login's ID token as `id_token_hint`) when it offers one, else to `/`.",
      tags: ['oidc'],
      responses: {
        '302': empty("To the provider's end-session endpoint, or `/`.", { Location: header('Location'), 'Set-Cookie': header('ClearedSessionCookie') }),
        '403': pageOrProblem(403, ['IAM_CSRF_REJECTED'], 'A navigation from another site carrying the session cookie: nothing is ended.'),
        '500': response('InternalError'),
        '503': pageOrProblem(503, ['IAM_STORE_UNAVAILABLE', 'IAM_DATABASE_UNAVAILABLE'], 'The session could not be ended (neither store answers).'),
      },
    },
    handler: (deps) => {
      const secure = deps.secureCookie;
      return async (ctx) => {
        await forBrowser(ctx, deps.branding, async () => {
          // Another site may not end the user's session (logout CSRF): checked as for an unsafe method, though it is a GET.
          const credential = requestCredential(stateOf(ctx).prepared, { method: ctx.method, unsafe: true, trustedOrigins: deps.trustedOrigins });
          const caller = await deps.callers.callerOf(credential, OIDC_LOGOUT);
          if (caller instanceof ProblemError) throw caller;
          // The login's ID token (kept server side) goes to the provider as id_token_hint; read before the session ends.
          const idTokenHint = caller ? await deps.repository.idTokenOfSession(caller.session.record.sessionId).catch(() => null) : null;
          if (caller) await deps.sessions.logout(caller.session, factsOf(ctx));
          ctx.set('Set-Cookie', clearedSessionCookie(secure));
          // RP-initiated logout at the provider when it offers it; if it cannot be reached, the gateway session is
          // ended anyway and the browser goes home.
          const endSession = await deps.rp.endSessionUrl(idTokenHint).catch(() => null);
          redirect(ctx, 302, endSession ?? '/');
        });
      };
    },
  },
  route({
    method: 'post',
    path: '/iam/auth/oidc/backchannel-logout',
    access: 'public',
    body: { schema: LogoutTokenForm, media: 'application/x-www-form-urlencoded' },
    operation: {
      operationId: 'oidcBackchannelLogout',
      summary: 'OpenID Connect Back-Channel Logout: the provider ends sessions',
      description:
        "Form-encoded `logout_token` (OpenID Connect Back-Channel Logout 1.0). Verified: signature by the provider's JWKS with an allowed algorithm, `iss`, `aud` (the client id), `iat`, `events`, no `nonce`, `sid` or `sub`, `jti` used once. Every session of that provider session (`sid`), or of that user (`sub` alone), is revoked on every instance.",
      tags: ['oidc'],
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
    handler: (deps) => async (ctx) => {
      const body = ctx.request.body as Record<string, unknown> | undefined;
      await deps.backchannel.handle(body?.logout_token, factsOf(ctx));
      // §2.8: 200 on success, with no caching.
      ctx.set('Cache-Control', 'no-store');
      ctx.status = 200;
      ctx.body = '';
    },
   }),
];

/** Runs a browser endpoint: a problem becomes an HTML page for a browser, problem+json for anyone else. */
async function forBrowser(ctx: Context, branding: PageBranding | undefined, handler: () => Promise<void>): Promise<void> {
  try {
    await handler();
  } catch (error) {
    if (!(error instanceof ProblemError) || !prefersHtml(ctx.get('accept'))) throw error;
    const requestId = stateOf(ctx).prepared.requestId;
    ctx.status = error.status;
    ctx.set(problemPageHeaders(error, requestId, branding));
    const signInAgain = error.code === 'IAM_OIDC_STATE_INVALID' || error.code === 'IAM_OIDC_LOGIN_FAILED';
    ctx.body = problemPageHtml(error, ctx.method, ctx.path, requestId, { signInAgain, ...(branding === undefined ? {} : { branding }) });
  }
}
