import type Router from '@koa/router';

/**
 * `GET /iam/authorization/forward-auth` is answered before the `/iam` app, by gateway/forward-auth-handler.ts
 * (dispatched by gateway/front-door.ts for GET and HEAD), like a proxied request. The route stays declared here so
 * the `/iam` app still answers the path's other methods as before (405 `IAM_METHOD_NOT_ALLOWED`, OPTIONS with
 * `Allow: HEAD, GET`) and the route list matches the OpenAPI document. Reaching this handler is a wiring bug: 500.
 */
export function registerForwardAuthRoute(router: Router): void {
  router.get('/authorization/forward-auth', () => {
    throw new Error('forward-auth reached the /iam app: the front door answers GET and HEAD (gateway/forward-auth-handler.ts)');
  });
}
