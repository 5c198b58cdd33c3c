import type Router from '@koa/router';
import type { Context } from 'koa';
import type { BackchannelLogout } from '../auth/oidc/backchannel-logout';
import { LOGIN_STATE_TTL_MS } from '../auth/oidc/login-state';
import type { OidcLogin } from '../auth/oidc/oidc-login';
import type { RelyingParty } from '../auth/oidc/relying-party';
import { ProblemError, problems } from '../domain/problem';
import { credentialToken, requestCredential } from '../http/request-credential';
import type { PageBranding } from '../http/page-layout';
import { prefersHtml, problemPageHeaders, problemPageHtml } from '../http/problem-page';
import { safeReturnTo } from '../http/return-to';
import { clearedLoginStateCookie, clearedSessionCookie, loginStateCookie, loginStateCookieName, sessionCookie } from '../http/session-cookie';
import type { SessionService } from '../sessions/session-service';
import { factsOf, stateOf } from './iam-context';
import { redirect } from './login-page-routes';

export interface OidcRoutesDeps {
  login: OidcLogin;
  backchannel: BackchannelLogout;
  rp: RelyingParty;
  sessions: Pick<SessionService, 'verify' | 'verifyFromRecord' | 'logout'>;
  /** `iam.session-cookie.secure`. */
  secureCookie: boolean;
  trustedOrigins: ReadonlySet<string>;
  /** `iam.ui.*` for the failure pages (default: the gateway's own name, no logo). */
  branding?: PageBranding;
}

/** The paths of the OpenID Connect endpoints (docs/oidc.md). */
export const OIDC_LOGIN_PATH = '/iam/auth/oidc/login';
export const OIDC_BACKCHANNEL_PATH = '/iam/auth/oidc/backchannel-logout';

/**
 * docs/oidc.md: `GET /iam/auth/oidc/login` (to the provider), `GET /iam/auth/oidc/callback` (back from it, with the
 * session cookie), `GET /iam/auth/oidc/logout` (ends the session here, then at the provider), and
 * `POST /iam/auth/oidc/backchannel-logout` (the provider ends sessions). The browser endpoints answer a failure with
 * a small HTML page when the client prefers HTML, else with the problem.
 */
export function registerOidcRoutes(router: Router, deps: OidcRoutesDeps): void {
  const secure = deps.secureCookie;

  router.get('/auth/oidc/login', async (ctx) => {
    await forBrowser(ctx, deps.branding, async () => {
      const { location, stateCookie } = await deps.login.begin(safeReturnTo(ctx.query.returnTo));
      ctx.set('Set-Cookie', loginStateCookie(secure, stateCookie, LOGIN_STATE_TTL_MS / 1000));
      redirect(ctx, 302, location);
    });
  });

  router.get('/auth/oidc/callback', async (ctx) => {
    await forBrowser(ctx, deps.branding, async () => {
      // The state cookie is spent whatever happens next.
      ctx.append('Set-Cookie', clearedLoginStateCookie(secure));
      const query = new URLSearchParams(ctx.querystring);
      const { result, returnTo } = await deps.login.complete(query, ctx.cookies.get(loginStateCookieName(secure)) ?? null, factsOf(ctx));
      ctx.append('Set-Cookie', sessionCookie(secure, result.accessToken));
      redirect(ctx, 303, returnTo);
    });
  });

  router.get('/auth/oidc/logout', async (ctx) => {
    await forBrowser(ctx, deps.branding, async () => {
      // Another site may not end the user's session (logout CSRF): checked as for an unsafe method, though it is a GET.
      const credential = requestCredential(stateOf(ctx).prepared, { method: ctx.method, unsafe: true, trustedOrigins: deps.trustedOrigins });
      if (credential.kind === 'cookie' && credential.crossSite) throw problems.crossSiteCookie();
      const token = credentialToken(credential);
      // Like POST /iam/auth/logout: while the token store is down, the durable record vouches for the session (#11.35).
      const session = token === null ? null : await deps.sessions.verify(token).catch((error: unknown) => deps.sessions.verifyFromRecord(token, error));
      if (session) await deps.sessions.logout(session, factsOf(ctx));
      ctx.set('Set-Cookie', clearedSessionCookie(secure));
      // RP-initiated logout at the provider when it offers it; if it cannot be reached, the gateway session is
      // ended anyway and the browser goes home.
      const endSession = await deps.rp.endSessionUrl().catch(() => null);
      redirect(ctx, 302, endSession ?? '/');
    });
  });

  router.post('/auth/oidc/backchannel-logout', async (ctx) => {
    const body = ctx.request.body as Record<string, unknown> | undefined;
    await deps.backchannel.handle(body?.logout_token, factsOf(ctx));
    // §2.8: 200 on success, with no caching.
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 200;
    ctx.body = '';
  });
}

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
