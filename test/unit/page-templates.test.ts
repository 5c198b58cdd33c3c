/**
 * `iam.ui.templates-dir` (docs/configuration.md): a custom layout.html around the gateway's pages. A template error is
 * refused at start with its file:line, never served as a broken page.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config';
import { preflight } from '../../src/app/preflight';
import { loginPageHtml } from '../../src/http/login-page';
import { compilePageLayout, PageTemplateError, PAGES_STYLESHEET, renderPage } from '../../src/http/page-layout';

const GOOD = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{heading}} – {{title}}</title>
<link rel="stylesheet" href="{{stylesheet}}"></head>
<body><header><img src="{{logo-url}}" alt=""> {{ title }}</header>
<main><h1>{{heading}}</h1>
{{body}}</main></body></html>
`;

function problemsOf(source: string): Array<{ line: number; message: string }> {
  try {
    compilePageLayout(source, 'layout.html');
  } catch (error) {
    expect(error).toBeInstanceOf(PageTemplateError);
    return [...(error as PageTemplateError).problems];
  }
  throw new Error('the layout was accepted');
}

describe('compilePageLayout', () => {
  it('fills the placeholders: the body as HTML, everything else escaped', () => {
    const layout = compilePageLayout(GOOD, 'layout.html');
    const html = renderPage({ title: '<Acme> & "Co"', logoUrl: '/logo.svg?a=1&b=2', layout }, { heading: 'Sign <in>', body: '<p>the form</p>\n' });
    expect(html).toContain('<title>Sign &lt;in&gt; – &lt;Acme&gt; &amp; &quot;Co&quot;</title>');
    expect(html).toContain(`<link rel="stylesheet" href="${PAGES_STYLESHEET}">`);
    expect(html).toContain('<img src="/logo.svg?a=1&amp;b=2" alt=""> &lt;Acme&gt; &amp; &quot;Co&quot;</header>');
    expect(html).toContain('<h1>Sign &lt;in&gt;</h1>\n<p>the form</p>\n</main>');
    // The pages use it through their branding.
    expect(loginPageHtml({ returnTo: '/' }, { title: 'Acme', logoUrl: null, layout })).toContain('<form method="post" action="/iam/login">');
  });

  it('refuses every error with its line', () => {
    expect(problemsOf('<p>\n{{body}}\n{{titel}}\n{{heading</p>\n')).toEqual([
      { line: 3, message: expect.stringMatching(/^unknown placeholder \{\{titel\}\}/) },
      { line: 4, message: 'a placeholder is not closed with }}' },
    ]);
    expect(problemsOf('<p>{{title}}</p>\n')).toEqual([{ line: 1, message: 'the layout has no {{body}}' }]);
    expect(problemsOf('{{body}}\n\n{{body}}\n')).toEqual([{ line: 3, message: 'the layout has {{body}} more than once' }]);
    expect(problemsOf('{{body}}\n<script>x()</script>\n<p style="color:red" onclick="x()">\n<style>p{}</style>\n').map(({ line, message }) => [line, message.split(':')[0]])).toEqual([
      [2, 'a script'],
      [3, 'an inline style'],
      [3, 'an event handler attribute'],
      [4, 'an inline style'],
    ]);
  });
});

describe('iam.ui.templates-dir at start', () => {
  const root = mkdtempSync(join(tmpdir(), 'iam-templates-'));
  const defaults = resolve(__dirname, '../../config/default.yaml');
  const start = (dir: string) => preflight(loadConfig({ file: defaults, env: { IAM_UI_TEMPLATES_DIR: dir }, cwd: root }));

  it('compiles layout.html into the branding', () => {
    mkdirSync(join(root, 'good'));
    writeFileSync(join(root, 'good', 'layout.html'), GOOD);
    const files = start('good');
    expect(files.branding).toMatchObject({ title: 'iam-gateway', logoUrl: null });
    expect(renderPage(files.branding, { heading: 'Not found', body: '' })).toContain('<h1>Not found</h1>');
  });

  it('refuses a template error with the key, its environment variable and the file:line', () => {
    mkdirSync(join(root, 'bad'));
    const file = join(root, 'bad', 'layout.html');
    writeFileSync(file, '<main>\n{{body}}\n<h1>{{header}}</h1>\n</main>\n');
    let error: unknown;
    try {
      start('bad');
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      expect.objectContaining({ key: 'iam.ui.templates-dir', env: 'IAM_UI_TEMPLATES_DIR', message: expect.stringContaining(`iam.ui.templates-dir: ${file}:3: unknown placeholder {{header}}`) }),
    ]);
  });

  it('refuses a directory without layout.html', () => {
    mkdirSync(join(root, 'empty'));
    expect(() => start('empty')).toThrow(/iam\.ui\.templates-dir: cannot read .*layout\.html/);
  });
});
