import { empty, problem, response } from './openapi-builders';
import type { RouteDeclaration } from './route-declaration';

/**
 * `GET /iam/authorization/forward-auth` is answered before the `/iam` app, by gateway/forward-auth-handler.ts
 * (dispatched by gateway/front-door.ts for GET and HEAD), like a proxied request: it checks the caller's credential
 * itself, when the matched route needs one. The route stays declared here so the `/iam` app still answers the path's
 * other methods as before (405 `IAM_METHOD_NOT_ALLOWED`, OPTIONS with `Allow: HEAD, GET`) and its operation is
 * written once. Reaching this handler is a wiring bug: 500.
 */
export const forwardAuthRoutes: ReadonlyArray<RouteDeclaration<unknown>> = [
  {
    method: 'get',
    path: '/iam/authorization/forward-auth',
    access: { guard: 'own', security: 'optional-session' },
    operation: {
      operationId: 'forwardAuth',
      summary: 'Authorize a request for nginx auth_request, Traefik ForwardAuth, Caddy forward_auth, Envoy',
      description:
        'Reads the original method and URI from X-Forwarded-Method/X-Forwarded-Uri (or X-Original-Method/X-Original-URI) and decides with the proxy\'s own engine and policy. ' +
        'Fails closed: a missing, unknown or conflicting method or URI header, a URI not in the proxy\'s normal form, or client X-IAM-* headers are a 400. ' +
        'The bearer token (or the session cookie) is needed when the matched route needs one. ' +
        'The 200 carries the Cookie the host may see, which the proxy forwards instead of the client\'s.',
      tags: ['authorization'],
      parameters: [
        { name: 'X-Forwarded-Uri', in: 'header', description: 'The original request target (or X-Original-URI); required.', schema: { type: 'string' } },
        { name: 'X-Forwarded-Method', in: 'header', description: 'The original method (or X-Original-Method); required, never guessed.', schema: { type: 'string' } },
        {
          name: 'X-Forwarded-Host',
          in: 'header',
          description: 'The host the client addressed, read only from a proxy in `iam.forward.trusted-proxies`: the gateway\'s own origin for the CSRF check of a cookie-authenticated write (else the Host header).',
          schema: { type: 'string' },
        },
      ],
      responses: {
        '200': empty('Allowed. Carries the identity headers the host would receive (docs/http-contract.md) when a session was presented.', {
          'X-IAM-User-Id': { schema: { type: 'string' } },
          'X-IAM-Identity-Id': { schema: { type: 'string' } },
          'X-IAM-Identity-Domain': { schema: { type: 'string' } },
          'X-IAM-Session-Id': { schema: { type: 'string' } },
          'X-IAM-Profile-Id': { schema: { type: 'string' } },
          'X-IAM-Permission': { description: 'Only when the permission was granted (never on a shadow denial).', schema: { type: 'string' } },
          'X-IAM-Shadow-Denied': { description: 'The failed step of a shadow route that let the request through although it would deny.', schema: { type: 'string' } },
          'X-IAM-Assertion': { description: 'When `iam.forward.assertion` is on: an EdDSA JWT, keys at /iam/.well-known/jwks.json.', schema: { type: 'string' } },
          Cookie: {
            description:
              'The cookies the host may see: the request\'s Cookie without the gateway\'s own (session, OpenID Connect state); absent when none is left. ' +
              'The proxy sends it to the host instead of the client\'s Cookie, and no Cookie when it is absent.',
            schema: { type: 'string' },
          },
        }),
        '400': problem(400, ['IAM_BAD_REQUEST'], 'No original method or URI, a method the proxy would not accept, a target the proxy would refuse or would rewrite, or client X-IAM-* headers.'),
        '401': response('Unauthenticated'),
        '403': response('AccessDenied'),
        '404': problem(404, ['IAM_RESOURCE_NOT_FOUND'], 'The host\'s resolver knows no such resource (not a lack of rights).'),
        '500': problem(500, ['IAM_RESOURCE_RESOLUTION_UNAVAILABLE', 'IAM_INTERNAL_ERROR'], 'The route needs resolution and no resolver is configured, or an unexpected failure.'),
        '502': problem(502, ['IAM_UPSTREAM_UNAVAILABLE'], 'The resolver could not be reached.'),
        '503': response('Unavailable'),
      },
    },
    handler: () => () => {
      throw new Error('forward-auth reached the /iam app: the front door answers GET and HEAD (gateway/forward-auth-handler.ts)');
    },
  },
];
