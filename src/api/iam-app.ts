import Router from '@koa/router';
import Koa from 'koa';
import { koaBody } from 'koa-body';
import type { Logger } from '../observability/logger';
import { nameActiveRequest } from '../observability/tracing';
import type { OutageLog } from '../observability/outage-log';
import { ProblemError } from '../domain/problem';
import { stateOf } from './iam-context';
import { PREPARED_REQUEST, type RequestWithPrepared } from '../http/prepare-request';
import type { PageBranding } from '../http/page-layout';
import { problemMiddleware } from './problem-middleware';
import { assertStorable } from './validate-body';

/**
 * The gateway's own endpoints under `/iam` (a Koa app; the proxy path does not go through Koa).
 * `register` adds the route groups; the server hands requests over with the prepared request attached.
 */
export function createIamApp(options: {
  logger: Logger;
  outages?: OutageLog;
  bodyLimit: number;
  /** Paths whose POST body is an HTML form (`application/x-www-form-urlencoded`) instead of JSON: the login page. */
  formPaths?: ReadonlySet<string>;
  /**
   * Paths whose JSON body carries a whole document that is read and never stored (a host's OpenAPI description for
   * the coverage check), with its own size limit: its text may hold line breaks and tabs, so the storable-text
   * check of every other body does not apply.
   */
  documentPaths?: ReadonlyMap<string, number>;
  register: (router: Router) => void;
  /** `iam.ui.*`: the branding of the 404 page a browser gets (default: the gateway's own name, no logo). */
  branding?: PageBranding;
}): Koa {
  const formPaths = options.formPaths ?? new Set<string>();
  const documentPaths = options.documentPaths ?? new Map<string, number>();
  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  const router = new Router({ prefix: '/iam' });
  app.use(async (ctx, next) => {
    const prepared = (ctx.req as RequestWithPrepared)[PREPARED_REQUEST];
    if (!prepared) throw new Error('request reached the /iam app without preparation');
    stateOf(ctx).prepared = prepared;
    ctx.set('X-Request-Id', prepared.requestId);
    try {
      await next();
    } finally {
      // The span is named after the route pattern (`GET /iam/sessions/:sessionId/revoke`), never the path: the
      // client chooses it and it carries session and decision ids. No route: it keeps `METHOD /iam/*`.
      const route = routePattern(router, ctx);
      if (route !== null) nameActiveRequest(ctx.method, route);
    }
  });
  app.use(problemMiddleware(options.logger, options.outages, options.branding));
  // Every /iam body is JSON (docs/http-contract.md) except the login form's, which is form-encoded only: any other
  // body, or one without a Content-Type, is refused before anything reads it. `is()` is null without a body;
  // `Content-Length: 0` is no body either.
  app.use(async (ctx, next) => {
    if (ctx.request.length !== 0) {
      const form = formPaths.has(ctx.path);
      const type = form ? 'application/x-www-form-urlencoded' : 'application/json';
      if (ctx.request.is(type) === false) throw new ProblemError('IAM_UNSUPPORTED_MEDIA_TYPE', `The request body must be ${type}.`);
    }
    await next();
  });
  const parser = (limit: number): Koa.Middleware =>
    koaBody({ json: true, urlencoded: formPaths.size > 0, formLimit: limit, text: false, multipart: false, jsonStrict: true, jsonLimit: limit });
  const bodies = parser(options.bodyLimit);
  const documents = new Map([...documentPaths].map(([path, limit]) => [path, parser(limit)]));
  app.use(async (ctx, next) => {
    await (documents.get(ctx.path) ?? bodies)(ctx, next);
  });
  // Every body, before any route: strings PostgreSQL cannot store (NUL...) are refused here, once.
  app.use(async (ctx, next) => {
    if (!documentPaths.has(ctx.path)) assertStorable(ctx.request.body);
    await next();
  });
  options.register(router);
  app.use(router.routes());
  app.use(
    router.allowedMethods({
      throw: true,
      methodNotAllowed: () => new ProblemError('IAM_METHOD_NOT_ALLOWED', 'This endpoint does not accept that method.'),
      notImplemented: () => new ProblemError('IAM_METHOD_NOT_ALLOWED', 'This endpoint does not accept that method.'),
    }),
  );
  return app;
}

/**
 * The pattern of the route that answered (or would have: a body refused before routing, a method the route does not
 * take), or null when no route has this path.
 */
function routePattern(router: Router, ctx: Koa.Context): string | null {
  const matched = (ctx as Koa.Context & { _matchedRoute?: unknown })._matchedRoute;
  if (typeof matched === 'string') return matched;
  const found = router.match(ctx.path, ctx.method);
  const layers = found.pathAndMethod.some((layer) => layer.methods.length > 0) ? found.pathAndMethod : found.path;
  for (let index = layers.length - 1; index >= 0; index--) {
    const layer = layers[index]!;
    if (layer.methods.length > 0 && typeof layer.path === 'string') return layer.path;
  }
  return null;
}
