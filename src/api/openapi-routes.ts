import type Router from '@koa/router';
import { openApiDocument } from './openapi-document';

/**
 * `GET /iam/openapi.json` (docs/http-contract.md): the description of every `/iam` endpoint, no token needed. The
 * document is constant for the life of the process, so it is serialized once at registration.
 */
export function registerOpenApiRoutes(router: Router): void {
  const body = JSON.stringify(openApiDocument);
  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    // Public and identical for every caller; a short lifetime so an upgrade is seen soon.
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = body;
  });
}
