/**
 * A browser denied with 403 gets an HTML page (docs/http-contract.md); which clients count as browsers, and that
 * the page is inert whatever the problem carries.
 */
import { ServerResponse, IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { ProblemError } from '../../src/domain/problem';
import { PROBLEM_PAGE_CSP, prefersHtml, problemPageHtml, sendProblemPage } from '../../src/http/problem-page';

describe('prefersHtml', () => {
  it.each([
    ['Chromium navigation', 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8', true],
    ['Firefox navigation', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', true],
    ['curl / fetch()', '*/*', false],
    ['no Accept', undefined, false],
    ['an API client', 'application/json', false],
    ['JSON preferred over HTML', 'application/json, text/html;q=0.5', false],
    ['problem+json preferred', 'application/problem+json, text/html;q=0.9', false],
    ['HTML refused', 'text/html;q=0', false],
    ['a broken q', 'text/html;q=abc', false],
    ['HTML preferred over JSON', 'text/html, application/json;q=0.9', true],
  ])('%s → %s', (_name, accept, expected) => {
    expect(prefersHtml(accept)).toBe(expected);
  });
});

describe('sendProblemPage', () => {
  function render(problem: ProblemError, path: string): { status: number; headers: Record<string, unknown>; body: string } {
    const res = new ServerResponse(new IncomingMessage(new Socket()));
    let body = '';
    let status = 0;
    let headers: Record<string, unknown> = {};
    res.writeHead = ((code: number, values: Record<string, unknown>) => ((status = code), (headers = values), res)) as typeof res.writeHead;
    res.end = ((chunk: string) => ((body = chunk), res)) as typeof res.end;
    sendProblemPage(res, problem, 'GET', path, 'req-1');
    return { status, headers, body };
  }

  it('shows the step, the decision id and the request id, with a CSP that allows nothing', () => {
    const problem = new ProblemError('IAM_ACCESS_DENIED', 'Your profile does not grant admin:write.', { extensions: { decisionId: 'd-123', step: 'PERMISSION_DENIED' } });
    const page = render(problem, '/api/admin/stats');
    expect(page.status).toBe(403);
    expect(page.headers).toMatchObject({ 'content-type': 'text/html; charset=utf-8', 'content-security-policy': PROBLEM_PAGE_CSP, 'cache-control': 'no-store', 'x-request-id': 'req-1', vary: 'Accept' });
    expect(page.body).toContain('<code>PERMISSION_DENIED</code>');
    expect(page.body).toContain('<code>d-123</code>');
    expect(page.body).toContain('<code>GET /api/admin/stats</code>');
    expect(page.body).not.toMatch(/<script|<style|<img|<form|<iframe| on[a-z]+=/i);
  });

  it('escapes every value', () => {
    const problem = new ProblemError('IAM_ACCESS_DENIED', 'No <b>"grant"</b> & \'more\'', { extensions: { decisionId: '<script>alert(1)</script>' } });
    const page = render(problem, '/x/<img src=x onerror=alert(1)>');
    expect(page.body).not.toContain('<script>');
    expect(page.body).not.toContain('<img');
    expect(page.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page.body).toContain('No &lt;b&gt;&quot;grant&quot;&lt;/b&gt; &amp; &#39;more&#39;');
  });
});

describe('the 403 page of a signed-in browser', () => {
  const denied = new ProblemError('IAM_ACCESS_DENIED', 'You may not do this.', { extensions: { step: 'PERMISSION_DENIED', decisionId: 'd-1' } });

  it('links back to the start page and to the sign-out navigation (OpenID Connect logout)', () => {
    const html = problemPageHtml(denied, 'GET', '/api/admin/stats', 'r-1', { refusedSignedIn: { signOutPath: '/iam/auth/oidc/logout' } });
    expect(html).toContain('<a href="/" rel="nofollow">Back to the start page</a>');
    expect(html).toContain('<a href="/iam/auth/oidc/logout" rel="nofollow">Sign out</a>');
  });

  it('without a sign-out navigation (password logins): the back link only', () => {
    const html = problemPageHtml(denied, 'GET', '/api/admin/stats', 'r-1', { refusedSignedIn: { signOutPath: null } });
    expect(html).toContain('Back to the start page');
    expect(html).not.toContain('Sign out');
  });

  it('other problem pages carry neither', () => {
    const html = problemPageHtml(denied, 'GET', '/api/admin/stats', 'r-1');
    expect(html).not.toContain('Back to the start page');
    expect(html).not.toContain('Sign out');
  });
});
