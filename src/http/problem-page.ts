import type { ServerResponse } from 'node:http';
import type { ProblemError } from '../domain/problem';
import { escapeHtml, htmlPageHeaders } from './html';
import { DEFAULT_BRANDING, pageCsp, renderPage, type PageBranding } from './page-layout';

/**
 * True when the client's `Accept` (RFC 9110 §12.5.1) prefers `text/html` to JSON: a browser navigating, not an
 * API client. Browsers send `text/html,application/xhtml+xml,…,*\/*;q=0.8`; `curl` and `fetch()` send `*\/*`, which
 * prefers neither and keeps the problem+json answer.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (!accept || !accept.includes('html')) return false;
  let html = 0;
  let json = 0;
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.trim().toLowerCase().split(';');
    const qParam = params.map((param) => param.trim()).find((param) => param.startsWith('q='));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (!(q >= 0 && q <= 1)) continue;
    if (range === 'text/html' || range === 'application/xhtml+xml') html = Math.max(html, q);
    else if (range === 'application/json' || range === 'application/problem+json' || range === 'application/*') json = Math.max(json, q);
  }
  return html > 0 && html > json;
}

/** What a problem page may add: the branding, and a "Sign in" link (an OpenID Connect login that failed, a 401). */
export interface ProblemPageOptions {
  signInAgain?: boolean;
  /** Where "Sign in" goes (default `/iam/login`). */
  loginPath?: string;
  /**
   * A refusal of a signed-in browser (the proxy's 403): a link back to the start page, and "Sign out" to this path when
   * signing out is a navigation (the OpenID Connect logout, a same-origin GET that passes its CSRF check); null: no
   * sign-out link (a password login signs out with a POST from a script, which this page has none of).
   */
  refusedSignedIn?: { signOutPath: string | null };
  branding?: PageBranding;
}

/**
 * The pages' stylesheet (and the logo's origin, when there is one); no script, frame, form or base: the page is inert
 * text, whatever a detail or path contains. (docs/http-contract.md: browsers denied with 403 get this page; API
 * clients keep problem+json.)
 */
export const problemPageCsp = (branding: PageBranding = DEFAULT_BRANDING): string => pageCsp(branding, "'none'");

/** The policy of a problem page without a logo. */
export const PROBLEM_PAGE_CSP = problemPageCsp();

/** The HTML of a problem for a browser: what was refused, the step that failed and the `decisionId` when it is a
 * denial, the request id, and what to do next. Every value is escaped. */
export function problemPageHtml(problem: ProblemError, method: string, path: string, requestId: string, options: ProblemPageOptions = {}): string {
  const body = problem.toBody(path, requestId);
  const rows: Array<[string, string]> = [
    ['Request', `${method} ${path}`],
    ['Code', body.code],
    ...(body.step ? [['Step that failed', body.step] as [string, string]] : []),
    ...(body.decisionId ? [['Decision id', body.decisionId] as [string, string]] : []),
    ['Request id', requestId],
  ];
  const next = body.decisionId
    ? `<p><a href="/iam/console/explain?decisionId=${encodeURIComponent(body.decisionId)}">Explain this decision</a></p>
<p>If you need this access, ask your administrator and quote the decision id: it shows them exactly which rule
refused the request and why.</p>`
    : options.signInAgain
      ? `<p><a href="${escapeHtml(options.loginPath ?? '/iam/login')}">Sign in again</a></p>`
      : '<p>If this keeps happening, tell your administrator the request id.</p>';
  const refused = options.refusedSignedIn;
  const navigation =
    refused === undefined
      ? ''
      : `<p class="actions"><a href="/" rel="nofollow">Back to the start page</a>${
          refused.signOutPath === null ? '' : ` · <a href="${escapeHtml(refused.signOutPath)}" rel="nofollow">Sign out</a> (to sign in as someone else)`
        }</p>
`;
  return renderPage(options.branding ?? DEFAULT_BRANDING, {
    heading: body.title,
    body: `<p class="detail">${escapeHtml(body.detail)}</p>
<dl>
${rows.map(([term, value]) => `<dt>${escapeHtml(term)}</dt><dd><code>${escapeHtml(value)}</code></dd>`).join('\n')}
</dl>
${next}
${navigation}`,
  });
}

/** The headers of {@link problemPageHtml}'s page (with the problem's own, e.g. `Retry-After`). */
export function problemPageHeaders(problem: ProblemError, requestId: string, branding: PageBranding = DEFAULT_BRANDING): Record<string, string> {
  return { ...htmlPageHeaders(problemPageCsp(branding)), 'x-request-id': requestId, vary: 'Accept', ...problem.headers };
}

/** Writes a problem as a small HTML page for a browser (the proxy's 403, a browser's 401). */
export function sendProblemPage(res: ServerResponse, problem: ProblemError, method: string, path: string, requestId: string, options: ProblemPageOptions = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const html = problemPageHtml(problem, method, path, requestId, options);
  res.writeHead(problem.status, { ...problemPageHeaders(problem, requestId, options.branding), 'content-length': Buffer.byteLength(html) });
  res.end(html);
}
