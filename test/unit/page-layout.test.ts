/**
 * The gateway's own browser pages (docs/http-contract.md): one layout with the shared stylesheet, branded with
 * `iam.ui.title` and `iam.ui.logo-url`, every value escaped, and a CSP that allows the stylesheet (and the logo's
 * origin) only.
 */
import { ProblemError } from '../../src/domain/problem';
import { loginPageCsp, loginPageHtml } from '../../src/http/login-page';
import { pageCsp, PAGES_STYLESHEET, renderPage } from '../../src/http/page-layout';
import { problemPageCsp, problemPageHtml } from '../../src/http/problem-page';

const HOSTILE = { title: '<script>alert(1)</script> & "Acme"', logoUrl: null };

describe('renderPage', () => {
  it('links the one external stylesheet; no script, inline style or event handler', () => {
    const html = renderPage({ title: 'Acme', logoUrl: null }, { heading: 'Sign in', body: '<p>x</p>\n' });
    expect(html.match(/<link [^>]*>/g)).toEqual([`<link rel="stylesheet" href="${PAGES_STYLESHEET}">`]);
    expect(html).toContain('<title>Sign in · Acme</title>');
    expect(html).toContain('<span class="brand">Acme</span>');
    expect(html).not.toMatch(/<script|<style| style=| on[a-z]+=|<img/i);
  });

  it('never shows a hostile title unescaped: in the header, the window title, the login page and a problem page', () => {
    const pages = [
      renderPage(HOSTILE, { heading: '<b>', body: '' }),
      loginPageHtml({ returnTo: '/' }, HOSTILE),
      problemPageHtml(new ProblemError('IAM_ACCESS_DENIED', 'no', { extensions: { decisionId: 'd-1', step: 'PERMISSION_DENIED' } }), 'GET', '/x', 'r-1', { branding: HOSTILE }),
    ];
    for (const html of pages) {
      expect(html).not.toContain('<script>');
      expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Acme&quot;');
    }
    expect(pages[0]).toContain('<h1>&lt;b&gt;</h1>');
  });

  it('shows the logo with its URL escaped, and lets the CSP load images from its origin only', () => {
    const https = { title: 'Acme', logoUrl: 'https://cdn.example.com/a/logo.svg?v=1&x=2' };
    expect(renderPage(https, { heading: 'h', body: '' })).toContain('<img class="logo" src="https://cdn.example.com/a/logo.svg?v=1&amp;x=2" alt="" width="32" height="32">');
    expect(pageCsp(https, "'self'")).toBe("default-src 'none'; style-src 'self'; img-src https://cdn.example.com; form-action 'self'; base-uri 'none'; frame-ancestors 'none'");
    expect(pageCsp({ title: 'Acme', logoUrl: '/static/logo.svg' }, "'none'")).toBe(
      "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
    );
    // Without a logo no image at all.
    expect(loginPageCsp()).toBe("default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'");
    expect(problemPageCsp()).toBe("default-src 'none'; style-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'");
  });

  it('keeps what the denial page showed: the step, the decision id, the request id', () => {
    const html = problemPageHtml(new ProblemError('IAM_ACCESS_DENIED', 'no', { extensions: { decisionId: 'd-9', step: 'SCOPE_DENIED' } }), 'GET', '/x', 'r-9');
    expect(html).toContain('<dt>Step that failed</dt><dd><code>SCOPE_DENIED</code></dd>');
    expect(html).toContain('<dt>Decision id</dt><dd><code>d-9</code></dd>');
    expect(html).toContain('<dt>Request id</dt><dd><code>r-9</code></dd>');
  });
});
