import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import type { Context } from 'koa';
import { ProblemError } from '../domain/problem';
import { htmlPageHeaders } from '../http/html';
import { requestCredential } from '../http/request-credential';
import { prefersHtml } from '../http/problem-page';
import { PROTECTED, type CallerAccepts, type CallerStep } from '../auth/caller';
import { stateOf } from './iam-context';
import { redirect } from './login-page-routes';
import { empty, header, html, problem, response } from './openapi-builders';
import type { RouteDeclaration } from './route-declaration';

/**
 * The console's policy: its own scripts, styles and images only (no inline script or style, no CDN), calls to the
 * gateway only, never framed.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** The console's pages: each is a deep link served by the same HTML. */
export const CONSOLE_PAGES = ['explain', 'policy', 'sessions', 'access', 'audit', 'me'] as const;

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};
/** Asset names: one level, plain names only (no traversal is even expressible). */
const ASSET_NAME = /^[a-z0-9][a-z0-9._-]{0,80}$/;

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** The console files, read once at start: `index.html` and the files of `assets/` (no subfolders). */
export interface ConsoleFiles {
  index: Asset;
  assets: ReadonlyMap<string, Asset>;
}

/** The `console/` folder shipped with the package, found from this module's location (src/ or dist/src/). */
export function findConsoleDir(start = __dirname): string | null {
  for (let dir = start, depth = 0; depth < 6; dir = dirname(dir), depth++) {
    const candidate = join(dir, 'console');
    if (existsSync(join(candidate, 'index.html'))) return candidate;
  }
  return null;
}

/** A stylesheet's leading `@import "name.css";` of a file beside it (after comments only, as CSS requires). */
const LEADING_IMPORT = /^((?:\s*\/\*[\s\S]*?\*\/)*\s*)@import "([a-z0-9-]+\.css)";\n?/;

/**
 * A stylesheet with its leading imports of sibling stylesheets inlined: console.css and pages.css share palette.css
 * that way, and a page still loads one stylesheet (one request, and `{{stylesheet}}` of a custom layout names one).
 */
function inlineImports(path: string, seen: ReadonlySet<string> = new Set()): Buffer {
  let text = readFileSync(path, 'utf8');
  for (let match = LEADING_IMPORT.exec(text); match !== null; match = LEADING_IMPORT.exec(text)) {
    const imported = join(dirname(path), match[2]!);
    if (seen.has(imported) || !existsSync(imported)) throw new Error(`console: ${path}: @import "${match[2]!}" ${seen.has(imported) ? 'imports itself' : 'names no file beside it'}`);
    text = match[1]! + inlineImports(imported, new Set([...seen, path])).toString('utf8') + text.slice(match[0].length);
  }
  return Buffer.from(text);
}

export function loadConsoleFiles(dir: string): ConsoleFiles {
  const asset = (path: string, type: string): Asset => {
    const body = extname(path) === '.css' ? inlineImports(path) : readFileSync(path);
    return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
  };
  const assets = new Map<string, Asset>();
  const assetDir = join(dir, 'assets');
  if (existsSync(assetDir)) {
    for (const name of readdirSync(assetDir)) {
      const type = TYPES[extname(name)];
      if (!type || !ASSET_NAME.test(name) || !statSync(join(assetDir, name)).isFile()) continue;
      assets.set(name, asset(join(assetDir, name), type));
    }
  }
  return { index: asset(join(dir, 'index.html'), 'text/html; charset=utf-8'), assets };
}

export interface ConsoleRoutesDeps {
  files: ConsoleFiles;
  /** The caller of a console page request: its session cookie (or bearer). */
  callers: Pick<CallerStep, 'callerOf'>;
  /** Where a browser without a session signs in; null when nobody can (authenticator `none`). */
  loginPath: string | null;
  /**
   * Where the console's "Sign out" sends the browser instead of `POST /iam/auth/logout`: the OpenID Connect logout,
   * which ends the session here and then at the provider (RP-initiated logout); null without OpenID Connect.
   */
  signOutPath?: string | null;
}

/** The console page is only ever read (GET): no origin is consulted. */
const NO_TRUSTED_ORIGINS: ReadonlySet<string> = new Set();

/** The deps, with the page handler every page route serves. */
interface ConsoleContext extends ConsoleRoutesDeps {
  page: (ctx: Context) => Promise<void>;
}

/**
 * `GET /iam/console` and its deep links (`/iam/console/<page>`) serve the console's one HTML page to a signed-in
 * browser (a browser without a session is sent to the login, then back: the page checks the session itself);
 * `GET /iam/console/assets/<file>` serves its scripts and styles to anyone (they hold no data). Each route is declared
 * once (route-declaration.ts). The console itself calls only the public `/iam` API with the session cookie, so every
 * action it offers is scriptable (docs/console.md).
 */
export const consoleRoutes: ReadonlyArray<RouteDeclaration<ConsoleContext>> = [
  {
    method: 'get',
    path: '/iam/console',
    access: { guard: 'own', security: 'session' },
    operation: {
      operationId: 'showConsole',
      summary: 'The console (HTML) for a signed-in browser',
      description:
        'The console page; its script calls only this API with the session cookie. Without a session a browser is sent to the login (302), anyone else gets 401.',
      tags: ['console'],
      responses: {
        '200': html('The console page (`Content-Security-Policy` with `script-src \'self\'`, no inline script or style).'),
        '302': empty('No session: to the login, coming back here.', { Location: header('Location') }),
      },
    },
    handler: ({ page }) => page,
  },
  {
    method: 'get',
    path: '/iam/console/{page}',
    access: { guard: 'own', security: 'session' },
    pathParameters: [{ name: 'page', in: 'path', required: true, schema: { type: 'string', enum: [...CONSOLE_PAGES] } }],
    operation: {
      operationId: 'showConsolePage',
      summary: 'A console page by its deep link (the same HTML; the script shows the page)',
      tags: ['console'],
      responses: {
        '200': html('The console page.'),
        '302': empty('No session: to the login, coming back here.', { Location: header('Location') }),
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such console page.'),
      },
    },
    handler: ({ page }) => async (ctx) => {
      if (!(CONSOLE_PAGES as readonly string[]).includes(ctx.params.page ?? '')) throw new ProblemError('IAM_NOT_FOUND', 'No such console page.');
      await page(ctx);
    },
  },
  {
    method: 'get',
    path: '/iam/console/assets/{name}',
    access: 'public',
    pathParameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,80}$' } }],
    operation: {
      operationId: 'getConsoleAsset',
      summary: "A console script, style or image (public: they hold no data)",
      tags: ['console'],
      responses: {
        '200': {
          description: 'The file (`Cache-Control: no-cache`, with an `ETag`).',
          headers: { 'X-Request-Id': header('RequestId') },
          content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } }, 'image/svg+xml': { schema: { type: 'string' } } },
        },
        '304': empty('Not modified (`If-None-Match`).'),
        '404': problem(404, ['IAM_NOT_FOUND'], 'No such asset.'),
        '500': response('InternalError'),
      },
    },
    handler: ({ files }) => (ctx) => {
      const asset = files.assets.get(ctx.params.name ?? '');
      if (!asset) throw new ProblemError('IAM_NOT_FOUND', 'No such console asset.');
      // Revalidated on every use (an upgrade changes them); a 304 costs nothing.
      ctx.set({ 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff', etag: asset.etag });
      if (ctx.get('if-none-match') === asset.etag) {
        ctx.status = 304;
        return;
      }
      ctx.type = asset.type;
      ctx.body = asset.body;
    },
  },
];

/** What the console page accepts as its caller: what a protected endpoint does, with its own 401 detail. */
const CONSOLE: CallerAccepts = { ...PROTECTED, detail: 'Sign in to use the console.' };

/** The context of {@link consoleRoutes}: the page handler, which checks the caller's session itself. */
export function consoleContext(deps: ConsoleRoutesDeps): ConsoleContext {
  // The page tells its script where "Sign out" goes (a data attribute: the CSP allows no inline script).
  let index: Buffer | undefined;
  const indexBody = (): Buffer =>
    (index ??= deps.signOutPath ? Buffer.from(deps.files.index.body.toString('utf8').replace('<body>', `<body data-sign-out="${deps.signOutPath}">`)) : deps.files.index.body);
  const page = async (ctx: Context): Promise<void> => {
    // The page is a GET: no CSRF verdict to act on; a malformed Authorization is no credential (and no cookie fallback).
    const credential = requestCredential(stateOf(ctx).prepared, { method: ctx.method, trustedOrigins: NO_TRUSTED_ORIGINS });
    const caller = await deps.callers.callerOf(credential, CONSOLE);
    if (caller === null || caller instanceof ProblemError) {
      const returnTo = ctx.path + (ctx.querystring ? `?${ctx.querystring}` : '');
      // A browser without a (valid) cookie signs in; a client that sent a bearer gets the 401 it can act on.
      if (deps.loginPath !== null && credential.kind !== 'bearer' && credential.kind !== 'malformed' && prefersHtml(ctx.get('accept'))) {
        redirect(ctx, 302, `${deps.loginPath}?returnTo=${encodeURIComponent(returnTo)}`);
        return;
      }
      if (caller === null) throw new Error('console: an anonymous caller was accepted');
      throw caller;
    }
    ctx.set({ ...htmlPageHeaders(CONSOLE_CSP), vary: 'Accept, Cookie' });
    ctx.type = deps.files.index.type;
    ctx.body = indexBody();
  };
  return { ...deps, page };
}
