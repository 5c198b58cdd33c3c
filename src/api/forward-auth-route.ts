import type Router from '@koa/router';
import type { Context } from 'koa';
import { METHODS } from 'node:http';
import { interpretRequestTarget, type PrepareOptions } from '../http/prepare-request';
import type { RequestAuthorizer } from '../gateway/request-authorizer';
import { ProblemError, problems } from '../domain/problem';
import type { GatewayMetrics } from '../observability/metrics';
import { stateOf } from './iam-context';

export interface ForwardAuthDeps {
  authorizer: RequestAuthorizer;
  /** `iam_forward_auth_requests_total{outcome}`. */
  metrics: Pick<GatewayMetrics, 'forwardAuth'>;
  /** The proxy's own target rules (`iam.gateway.allow-path-parameters`, `server.max-url-length`). */
  target: PrepareOptions;
}

/** Methods the proxy itself would accept (Node's parser list) and forward; CONNECT opens no tunnel. */
const KNOWN_METHODS: ReadonlySet<string> = new Set(METHODS.filter((method) => method !== 'CONNECT'));

const METHOD_HEADERS = ['x-forwarded-method', 'x-original-method'];
const URI_HEADERS = ['x-forwarded-uri', 'x-original-uri'];

/**
 * The value of an original-request header under either of its spellings. Several occurrences must agree:
 * a client can add the spelling its proxy does not set (e.g. `X-Forwarded-Method: GET` behind nginx,
 * which sets `X-Original-Method`), so a disagreement is refused instead of picking one.
 */
function originalRequestHeader(rawHeaders: string[], names: readonly string[]): { value: string | null } | { conflict: true } {
  let value: string | null = null;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!names.includes(rawHeaders[i]!.toLowerCase())) continue;
    const current = rawHeaders[i + 1]!.trim();
    if (value !== null && value !== current) return { conflict: true };
    value = current;
  }
  return { value };
}

/**
 * `GET /iam/authorization/forward-auth` for nginx `auth_request`, Traefik ForwardAuth, Caddy `forward_auth`:
 * the same decision as the proxy for the request the proxy in front is about to forward. Fails closed:
 * the method and URI are never guessed, the URI must already be in the proxy's normal form (the host
 * receives it as the client sent it, so a path that only normalization makes allowed is refused), and a
 * request carrying client `X-IAM-*` headers is refused because the proxy in front may pass them on.
 */
export function registerForwardAuthRoute(router: Router, deps: ForwardAuthDeps): void {
  router.get('/authorization/forward-auth', async (ctx) => {
    try {
      await check(ctx, deps);
      deps.metrics.forwardAuth.inc({ outcome: 'allowed' });
    } catch (error) {
      deps.metrics.forwardAuth.inc({ outcome: outcomeOf(error) });
      throw error;
    }
  });
}

/** The `outcome` label of `iam_forward_auth_requests_total` for a check that threw `error`. */
function outcomeOf(error: unknown): 'denied' | 'unauthenticated' | 'refused' | 'error' {
  const status = error instanceof ProblemError ? error.status : 500;
  if (status === 401) return 'unauthenticated';
  if (status === 400) return 'refused';
  if (status === 403 || status === 404) return 'denied';
  return 'error';
}

/** The forward-auth check itself: answers 200 with the identity headers, or throws the problem. */
async function check(ctx: Context, deps: ForwardAuthDeps): Promise<void> {
  const prepared = stateOf(ctx).prepared;
  const rawHeaders = ctx.req.rawHeaders;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase().startsWith('x-iam-')) {
      throw problems.badRequest('The request carries X-IAM-* headers; only the gateway sets them (strip them in the proxy).');
    }
  }
  const methodHeader = originalRequestHeader(rawHeaders, METHOD_HEADERS);
  if ('conflict' in methodHeader) throw problems.badRequest('X-Forwarded-Method and X-Original-Method disagree.');
  const method = methodHeader.value;
  if (!method) throw problems.badRequest('X-Forwarded-Method (or X-Original-Method) is required.');
  if (!KNOWN_METHODS.has(method)) throw problems.badRequest('X-Forwarded-Method is not a method the gateway accepts.');

  const uriHeader = originalRequestHeader(rawHeaders, URI_HEADERS);
  if ('conflict' in uriHeader) throw problems.badRequest('X-Forwarded-Uri and X-Original-URI disagree.');
  const uri = uriHeader.value;
  if (!uri) throw problems.badRequest('X-Forwarded-Uri (or X-Original-URI) is required.');
  const target = interpretRequestTarget(uri, undefined, deps.target);
  if (!target.ok) throw target.problem;
  if (target.path + target.search !== uri) {
    throw problems.badRequest('The URI is not in normal form (dot segments, repeated or encoded characters); the host would see another path than the one authorized.');
  }

  // From here on an answer is about the original request: a problem names its path (RFC 9457 `instance`).
  stateOf(ctx).problemInstance = target.path;
  const request = { ...prepared, method, path: target.path, search: target.search };
  const outcome = await deps.authorizer.authorize(request, prepared.clientAddress ?? undefined);
  if (!outcome.allowed) throw outcome.problem;
  for (const [name, value] of deps.authorizer.identityHeadersFor(request, outcome) ?? []) ctx.set(name, value);
  ctx.set('X-Request-Id', prepared.requestId);
  ctx.set('Cache-Control', 'no-store');
  ctx.status = 200;
  ctx.body = '';
}
