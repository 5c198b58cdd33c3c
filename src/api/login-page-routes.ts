import type { Context } from 'koa';
import type { LoginService } from '../auth/login-service';
import { ProblemError, problems } from '../domain/problem';
import { isCrossSiteRequest } from '../http/csrf';
import { loginPageHeaders, loginPageHtml, type LoginPage } from '../http/login-page';
import type { PageBranding } from '../http/page-layout';
import { prefersHtml } from '../http/problem-page';
import { safeReturnTo } from '../http/return-to';
import { sessionCookie } from '../http/session-cookie';
import { factsOf, stateOf } from './iam-context';
import { BODY_FAILURES, empty, header, html, problem, response } from './openapi-builders';
import { route, type RouteDeclaration } from './route-declaration';
import { LoginForm } from './schemas/requests';
import { ReturnToQuery } from './schemas/queries';

export interface LoginPageDeps {
  login: LoginService;
  /** The client type of a browser login: `WEB` when configured, else the first of `iam.client-types`. */
  clientType: string;
  /** `iam.session-cookie.secure`. */
  secureCookie: boolean;
  trustedOrigins: ReadonlySet<string>;
  /** Set with `iam.authenticator.type: oidc`: the page sends the browser to the identity provider instead. */
  oidcLoginPath: string | null;
  /** `iam.ui.*` (default: the gateway's own name, no logo). */
  branding?: PageBranding;
}

/** What the form says for each refusal (the problem's own detail for the rest). */
const FORM_ERRORS: Record<string, string> = {
  IAM_INVALID_CREDENTIALS: 'The username or password is wrong.',
  IAM_RATE_LIMITED: 'Too many attempts. Wait a moment and try again.',
};

/**
 * docs/http-contract.md, the browser login: `GET /iam/login` shows the form, `POST /iam/login` (form-encoded) logs
 * in with the configured authenticator, sets the session cookie and answers 303 to `returnTo` (same-origin relative
 * paths only). A refusal shows the form again with the error, with the problem's status (401, 429, 502...). Both are
 * public, each declared once (route-declaration.ts).
 */
export const loginPageRoutes: ReadonlyArray<RouteDeclaration<LoginPageDeps>> = [
  route({
    method: 'get',
    path: '/iam/login',
    access: 'public',
    query: ReturnToQuery,
    operation: {
      operationId: 'showLoginPage',
      summary: 'The browser login form',
      description:
        'An HTML form posting to `POST /iam/login`. With `iam.authenticator.type: oidc` the browser is sent to `/iam/auth/oidc/login` instead (302).',
      tags: ['auth'],
      responses: {
        '200': html('The login form.'),
        '302': empty('To the OpenID Connect login (authenticator `oidc`).', { Location: header('Location') }),
      },
    },
    handler: (deps, _body, query) => (ctx) => {
      const returnTo = safeReturnTo(query.read(ctx).returnTo);
      if (deps.oidcLoginPath !== null) {
        redirect(ctx, 302, `${deps.oidcLoginPath}?returnTo=${encodeURIComponent(returnTo)}`);
        return;
      }
      render(ctx, 200, { returnTo }, deps.branding);
    },
  }),
  route({
    method: 'post',
    path: '/iam/login',
    access: 'public',
    body: { schema: LoginForm, media: 'application/x-www-form-urlencoded' },
    operation: {
      operationId: 'submitLoginPage',
      summary: 'Log a browser in: sets the session cookie',
      description:
        'Form-encoded `username`, `password`, `returnTo`; the session has the client type `WEB` (or the first configured one). A refusal shows the form again, with the error and the status the API login would give.',
      tags: ['auth'],
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
    handler: (deps, form) => {
      return async (ctx) => {
        // Login CSRF: another site must not sign the browser in to an account of its choosing.
        // The gateway's own origin by the proxy's rule (X-Forwarded-Host from a trusted proxy, else Host).
        const browser = { origin: ctx.get('origin') || null, fetchSite: ctx.get('sec-fetch-site') || null, host: stateOf(ctx).prepared.host };
        if (isCrossSiteRequest(browser, 'POST', false, deps.trustedOrigins)) throw problems.crossSiteCookie();
        const body: unknown = ctx.request.body;
        if (!form.accepts(body)) {
          const returnTo = safeReturnTo(isRecord(body) ? body.returnTo : undefined);
          if (!prefersHtml(ctx.get('accept'))) throw problems.validation([{ pointer: '/', message: 'username and password are required form fields' }]);
          render(ctx, 400, { returnTo, error: 'Enter a username and a password.' }, deps.branding);
          return;
        }
        const returnTo = safeReturnTo(body.returnTo);
        try {
          const result = await deps.login.login({ username: body.username, password: body.password, clientType: deps.clientType }, factsOf(ctx));
          ctx.set('Set-Cookie', sessionCookie(deps.secureCookie, result.accessToken));
          redirect(ctx, 303, returnTo);
        } catch (error) {
          // Every refusal the user can act on is shown on the form; an internal error stays a problem (and is logged).
          if (!(error instanceof ProblemError) || error.status === 500) throw error;
          for (const [name, value] of Object.entries(error.headers)) ctx.set(name, value);
          render(ctx, error.status, { returnTo, username: body.username, error: FORM_ERRORS[error.code] ?? error.message }, deps.branding);
        }
      };
    },
   }),
];

/**
 * A redirect without a body (Koa's `redirect()` would add a "Redirecting to…" text). A string is a path on the
 * gateway's own origin and is checked in the exact form it is emitted (`safeReturnTo`: anything that would leave the
 * origin becomes `/`), whoever computed it; a `URL` is an address the configuration or the provider's discovery
 * named (the OpenID Provider's authorization and end-session endpoints), never one a client chose.
 */
export function redirect(ctx: Context, status: 302 | 303, location: string | URL): void {
  ctx.status = status;
  ctx.set('Location', typeof location === 'string' ? safeReturnTo(location) : location.href);
  ctx.set('Cache-Control', 'no-store');
  ctx.body = '';
}

function render(ctx: Context, status: number, page: LoginPage, branding?: PageBranding): void {
  ctx.status = status;
  ctx.set(loginPageHeaders(branding));
  ctx.body = loginPageHtml(page, branding);
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;
