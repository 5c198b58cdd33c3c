import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HostAuthorization, RequestAuthorization } from './host-authorization';

/**
 * Koa: `ctx.state.iam` is the request's {@link RequestAuthorization} (its principal is verified on first use, against
 * this request's method and path: `ctx.originalUrl`, which a mounted app does not rewrite).
 */
export function koaMiddleware(
  authorization: HostAuthorization,
): (ctx: { req: IncomingMessage; originalUrl?: string; state: Record<string, unknown> }, next: () => Promise<unknown>) => Promise<unknown> {
  return (ctx, next) => {
    ctx.state.iam = authorization.forRequest({ method: ctx.req.method, url: ctx.originalUrl ?? ctx.req.url, headers: ctx.req.headers });
    return next();
  };
}

/** Express: `req.iam` is the request's {@link RequestAuthorization} (compared with `req.originalUrl` when set). */
export function expressMiddleware(
  authorization: HostAuthorization,
): (req: IncomingMessage & { originalUrl?: string; iam?: RequestAuthorization }, res: ServerResponse, next: (error?: unknown) => void) => void {
  return (req, _res, next) => {
    req.iam = authorization.forRequest(req);
    next();
  };
}
