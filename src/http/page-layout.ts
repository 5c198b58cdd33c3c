import { escapeHtml } from './html';

/** `iam.ui.*`: the product name and logo on every page the gateway writes for a browser. */
export interface PageBranding {
  /** One line of text (validated in the configuration); escaped wherever it is shown. */
  title: string;
  /** An https URL or a path on the gateway's origin (validated in the configuration); null: no logo. */
  logoUrl: string | null;
  /** `iam.ui.templates-dir`'s `layout.html`, compiled at start; absent or null: the built-in layout. */
  layout?: PageLayout | null;
}

export const DEFAULT_BRANDING: PageBranding = { title: 'iam-gateway', logoUrl: null };

/**
 * The one stylesheet of the gateway's own pages: a console asset (`console/assets/pages.css`), public like the
 * console's other assets. A package without the console serves the pages unstyled, never broken.
 */
export const PAGES_STYLESHEET = '/iam/console/assets/pages.css';

/**
 * The console's policy for a page without script: its own stylesheet only (no inline style), images only from the
 * logo's origin (none without a logo), forms posted only where `formAction` says, never framed.
 */
export function pageCsp(branding: PageBranding, formAction: "'self'" | "'none'"): string {
  const images = branding.logoUrl === null ? '' : ` img-src ${branding.logoUrl.startsWith('/') ? "'self'" : new URL(branding.logoUrl).origin};`;
  return `default-src 'none'; style-src 'self';${images} form-action ${formAction}; base-uri 'none'; frame-ancestors 'none'`;
}

export interface PageContent {
  /** The page's own heading (`Sign in`, `Access denied`...), shown in `<h1>` and the window title. Plain text. */
  heading: string;
  /** The HTML inside `<main>` after the heading: built by the caller, every dynamic value already escaped. */
  body: string;
}

/** A whole page: the branded header, the heading and the caller's body, with the shared stylesheet and nothing else. */
export function renderPage(branding: PageBranding, content: PageContent): string {
  if (branding.layout) return branding.layout.render(branding, content);
  const logo = branding.logoUrl === null ? '' : `<img class="logo" src="${escapeHtml(branding.logoUrl)}" alt="" width="32" height="32">`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(content.heading)} · ${escapeHtml(branding.title)}</title>
<link rel="stylesheet" href="${PAGES_STYLESHEET}">
</head>
<body class="iam-page">
<header class="top"><span class="brand">${logo}${escapeHtml(branding.title)}</span></header>
<main class="card">
<h1>${escapeHtml(content.heading)}</h1>
${content.body}</main>
</body>
</html>
`;
}

/** The placeholders of a custom layout; `body` is the page's content (HTML), every other one is escaped text. */
export const LAYOUT_PLACEHOLDERS = ['title', 'heading', 'logo-url', 'stylesheet', 'body'] as const;
type Placeholder = (typeof LAYOUT_PLACEHOLDERS)[number];

/** A custom layout, checked and split once at start. */
export interface PageLayout {
  render(branding: PageBranding, content: PageContent): string;
}

/** What is wrong with a layout, each with its 1-based line. */
export class PageTemplateError extends Error {
  constructor(
    readonly file: string,
    readonly problems: ReadonlyArray<{ line: number; message: string }>,
  ) {
    super(problems.map(({ line, message }) => `${file}:${line}: ${message}`).join('; '));
    this.name = 'PageTemplateError';
  }
}

/**
 * Compiles `iam.ui.templates-dir`'s `layout.html`: `{{name}}` placeholders from {@link LAYOUT_PLACEHOLDERS}, `{{body}}`
 * exactly once. Refused, with every problem's line: an unknown or unclosed placeholder, no `{{body}}` or two, and a
 * script, an inline style or an event handler (the pages' CSP would block them: the page would be broken, not safe).
 */
export function compilePageLayout(source: string, file: string): PageLayout {
  const problems: Array<{ line: number; message: string }> = [];
  const lineAt = (index: number): number => source.slice(0, index).split('\n').length;
  // Text and placeholder names alternate: text at even indices, a placeholder at odd ones.
  const parts: string[] = [];
  let bodies = 0;
  let at = 0;
  for (;;) {
    const open = source.indexOf('{{', at);
    if (open === -1) break;
    const close = source.indexOf('}}', open + 2);
    const newline = source.indexOf('\n', open);
    if (close === -1 || (newline !== -1 && newline < close)) {
      problems.push({ line: lineAt(open), message: 'a placeholder is not closed with }}' });
      at = open + 2;
      continue;
    }
    const name = source.slice(open + 2, close).trim();
    if (!(LAYOUT_PLACEHOLDERS as readonly string[]).includes(name)) {
      problems.push({ line: lineAt(open), message: `unknown placeholder {{${name}}} (known: ${LAYOUT_PLACEHOLDERS.map((known) => `{{${known}}}`).join(', ')})` });
    } else {
      parts.push(source.slice(at, open), name as Placeholder);
      if (name === 'body') bodies++;
    }
    at = close + 2;
  }
  parts.push(source.slice(at));
  if (bodies !== 1) problems.push({ line: bodies === 0 ? 1 : lineAt(source.lastIndexOf('{{body')), message: bodies === 0 ? 'the layout has no {{body}}' : 'the layout has {{body}} more than once' });
  for (const [pattern, what] of [
    [/<script\b/gi, 'a script'],
    [/<style\b|\sstyle\s*=/gi, 'an inline style'],
    [/\son[a-z]+\s*=/gi, 'an event handler attribute'],
  ] as const) {
    for (const match of source.matchAll(pattern)) problems.push({ line: lineAt(match.index), message: `${what}: the pages' CSP allows no inline script or style (use ${PAGES_STYLESHEET} or a stylesheet of your own on 'self')` });
  }
  if (problems.length > 0) throw new PageTemplateError(file, problems.sort((a, b) => a.line - b.line));
  return {
    render: (branding, content) => {
      const values: Record<Placeholder, string> = {
        title: escapeHtml(branding.title),
        heading: escapeHtml(content.heading),
        'logo-url': escapeHtml(branding.logoUrl ?? ''),
        stylesheet: PAGES_STYLESHEET,
        body: content.body,
      };
      return parts.map((part, index) => (index % 2 === 1 ? values[part as Placeholder] : part)).join('');
    },
  };
}
