import type Router from '@koa/router';
import type { JsonWebKey } from 'node:crypto';

/**
 * `GET /iam/.well-known/jwks.json` (docs/http-contract.md): the public key that verifies `X-IAM-Assertion`
 * (RFC 7517), or no keys when assertions are off. No token needed.
 */
export function registerWellKnownRoutes(router: Router, deps: { jwks: () => JsonWebKey[] }): void {
  router.get('/.well-known/jwks.json', (ctx) => {
    ctx.body = { keys: deps.jwks() };
    ctx.set('Cache-Control', 'public, max-age=300');
  });
}
