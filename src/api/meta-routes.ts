import type { PublicJwk } from '../gateway/assertion-signer';
import { route, type RouteDeclaration } from './route-declaration';
import { JwkSet, OpenApi } from './schemas/responses';

export interface MetaRoutesDeps {
  /**
   * The OpenAPI document of every `/iam` endpoint, serialized (openapi-document.ts; given here, since the document
   * itself is built from these declarations). It is constant for the life of the process.
   */
  openApiJson: string;
  /** The public keys of `/iam/.well-known/jwks.json`. */
  jwks: () => PublicJwk[];
}

/**
 * docs/http-contract.md: `GET /iam/openapi.json`, the description of every `/iam` endpoint, and
 * `GET /iam/.well-known/jwks.json`, the public key that verifies `X-IAM-Assertion` (RFC 7517), or no keys when
 * assertions are off. Both public, each declared once (route-declaration.ts).
 */
export const metaRoutes: ReadonlyArray<RouteDeclaration<MetaRoutesDeps>> = [
  {
    method: 'get',
    path: '/iam/openapi.json',
    access: 'public',
    response: { schema: OpenApi, description: 'OpenAPI 3.1.' },
    operation: {
      operationId: 'getOpenApiDocument',
      summary: 'This OpenAPI description',
      tags: ['meta'],
      responses: {},
    },
    handler: ({ openApiJson }) => (ctx) => {
      ctx.type = 'application/json';
      // Public and identical for every caller; a short lifetime so an upgrade is seen soon.
      ctx.set('Cache-Control', 'public, max-age=300');
      ctx.body = openApiJson;
    },
  },
  route({
    method: 'get',
    path: '/iam/.well-known/jwks.json',
    access: 'public',
    response: { schema: JwkSet, description: 'JWK set (RFC 7517 §5).' },
    operation: {
      operationId: 'getJwks',
      summary: 'Public keys of the X-IAM-Assertion signatures',
      description: 'Present even when `iam.forward.assertion` is off (then `keys` is empty), so hosts can configure verification ahead.',
      tags: ['meta'],
      responses: {},
    },
    handler: ({ jwks }) => (ctx) => {
      ctx.body = { keys: jwks() };
      ctx.set('Cache-Control', 'public, max-age=300');
    },
  }),
];
