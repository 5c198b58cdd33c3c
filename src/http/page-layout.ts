import { escapeHtml } from './html';

/** `iam.ui.*`: the product name and logo on every page the gateway writes for a browser. */
export interface PageBranding {
  /** One line of text (validated in the configuration); escaped wherever it is shown. */
  title: string;
  /** An https URL or a path on the gateway's origin (validated in the configuration); null: no logo. */
  logoUrl: string | null;
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
