import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HostAuthorization, RequestAuthorization } from './host-authorization';

/** Koa: `ctx.state.iam` is the request's {@link RequestAuthorization} (its principal is verified on first use). */
export function koaMiddleware(authorization: HostAuthorization): (ctx: { req: IncomingMessage; state: Record<string, unknown> }, next: () => Promise<unknown>) => Promise<unknown> {
  return (ctx, next) => {
    ctx.state.iam = authorization.forRequest(ctx.req.headers);
    return next();
  };
}

/** Express: `req.iam` is the request's {@link RequestAuthorization}. */
export function expressMiddleware(authorization: HostAuthorization): (req: IncomingMessage & { iam?: RequestAuthorization }, res: ServerResponse, next: (error?: unknown) => void) => void {
  return (req, _res, next) => {
    req.iam = authorization.forRequest(req.headers);
    next();
  };
}
