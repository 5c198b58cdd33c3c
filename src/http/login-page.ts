import type { ServerResponse } from 'node:http';
import { escapeHtml, htmlPageHeaders } from './html';
import { DEFAULT_BRANDING, pageCsp, renderPage, type PageBranding } from './page-layout';

/**
 * The login form's policy: the pages' stylesheet (and the logo's origin), no script at all, the form may post only to
 * the gateway, nothing may frame it.
 */
export const loginPageCsp = (branding: PageBranding = DEFAULT_BRANDING): string => pageCsp(branding, "'self'");

export interface LoginPage {
  /** The same-origin path to go back to after the login (already checked by `safeReturnTo`). */
  returnTo: string;
  /** Shown above the form, announced to screen readers. */
  error?: string;
  /** Kept in the username field after a failed attempt (never the password). */
  username?: string;
}

/** The HTML of `GET /iam/login` and of a refused `POST /iam/login`: a plain, accessible form; every value escaped. */
export function loginPageHtml(page: LoginPage, branding: PageBranding = DEFAULT_BRANDING): string {
  const error = page.error
    ? `<p id="login-error" class="alert" role="alert"><strong>${escapeHtml(page.error)}</strong></p>\n`
    : '';
  const describedBy = page.error ? ' aria-describedby="login-error" aria-invalid="true"' : '';
  return renderPage(branding, {
    heading: 'Sign in',
    body: `${error}<form method="post" action="/iam/login">
<input type="hidden" name="returnTo" value="${escapeHtml(page.returnTo)}">
<p><label for="username">Username</label><br>
<input id="username" name="username" type="text" autocomplete="username" required maxlength="200" value="${escapeHtml(page.username ?? '')}"${describedBy} autofocus></p>
<p><label for="password">Password</label><br>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024"${describedBy}></p>
<p><button type="submit">Sign in</button></p>
</form>
`,
  });
}

/** Headers of the login page. */
export const loginPageHeaders = (branding: PageBranding = DEFAULT_BRANDING): Record<string, string> => ({ ...htmlPageHeaders(loginPageCsp(branding)), vary: 'Accept' });


/**
 * A browser navigation without a session, to a route that needs one: `302` to the login (`loginPath?returnTo=`), so
 * the user lands back on the page after signing in. A session cookie that no longer works is cleared on the way.
 */
export function sendLoginRedirect(res: ServerResponse, loginPath: string, returnTo: string, requestId: string, clearCookie: string | null): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(302, {
    location: `${loginPath}?returnTo=${encodeURIComponent(returnTo)}`,
    'cache-control': 'no-store',
    'content-length': '0',
    'x-request-id': requestId,
    vary: 'Accept',
    ...(clearCookie === null ? {} : { 'set-cookie': clearCookie }),
  });
  res.end();
}
