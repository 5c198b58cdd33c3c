import { METHODS, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { DatabaseUnavailableError } from '../domain/iam-repository';
import { ProblemError, problems, toProblem } from '../domain/problem';
import { StoreUnavailableError } from '../domain/token-store';
import { hostCookie } from '../http/host-cookie';
import { interpretRequestTarget, type PreparedRequest, type PrepareOptions } from '../http/prepare-request';
import { sendProblem } from '../http/problem-response';
import type { AccessLog } from '../observability/access-log';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { OutageLog } from '../observability/outage-log';
import type { RequestTracer } from '../observability/tracing';
import type { Authorization, RequestAuthorizer } from './request-authorizer';

/** The forward-auth endpoint (docs/http-contract.md "Forward-auth"). */
export const FORWARD_AUTH_PATH = '/iam/authorization/forward-auth';

/**
 * The paths the `/iam` app's router matched for it (and still declares it under, for 405 and OPTIONS): its
 * routes are case-insensitive and take an optional trailing slash. Only tested on paths under `/iam/`.
 */
const FORWARD_AUTH_ROUTE = /^\/iam\/authorization\/forward-auth\/?$/i;

export interface ForwardAuthDeps {
  authorizer: Pick<RequestAuthorizer, 'authorizeFast'>;
  /** `iam_forward_auth_requests_total{outcome}`. */
  metrics: Pick<GatewayMetrics, 'forwardAuth'>;
  /** The proxy's own target rules (`iam.gateway.allow-path-parameters`, `server.max-url-length`). */
  target: Pick<PrepareOptions, 'allowPathParameters' | 'maxUrlLength'>;
  logger: Logger;
  /** Store and database outages are counted there, not logged per answer (#11.39); null: logged as failures. */
  outages: Pick<OutageLog, 'failed'> | null;
  /** The server span of each check when tracing is on (docs/observability.md); null when off. */
  tracer: RequestTracer | null;
  /** `iam.access-log` (null when off): a check the candidate policy decided otherwise gets its line. */
  accessLog?: AccessLog | null;
}

/** Methods the proxy itself would accept (Node's parser list) and forward; CONNECT opens no tunnel. */
const KNOWN_METHODS: ReadonlySet<string> = new Set(METHODS.filter((method) => method !== 'CONNECT'));

type Outcome = 'allowed' | 'denied' | 'unauthenticated' | 'refused' | 'error';

/**
 * `GET /iam/authorization/forward-auth` for nginx `auth_request`, Traefik ForwardAuth, Caddy `forward_auth`: the
 * same decision as the proxy, by the same {@link RequestAuthorizer}, for the request the proxy in front is about to
 * forward. Answered straight from the front door like a proxied request (no Koa, no body parser): synchronously on
 * the warm path (session and grant cached, no resolver).
 *
 * Fails closed: the method and URI are never guessed, the URI must already be in the proxy's normal form (the
 * host receives it as the client sent it, so a path that only normalization makes allowed is refused), and a
 * request carrying client `X-IAM-*` headers is refused because the proxy in front may pass them on.
 *
 * No credential crosses to the host whoever forwards: the 200 carries the `Cookie` the host may see (the gateway's
 * cookies removed by the inline proxy's own rule, http/host-cookie.ts), which the recipes send instead of the
 * client's. The CSRF check compares `Origin` with the proxy's `X-Forwarded-Host` when the proxy is trusted (the
 * prepared request's `host`), since the check itself arrives with the proxy's `Host` for the gateway.
 *
 * What the `/iam` app gave these answers is kept here: `X-Request-Id` on every answer, problem+json with
 * `Cache-Control: no-store` and the problem's own headers (`WWW-Authenticate`, `Retry-After`), the server span,
 * the 415 of a body that is not JSON (a JSON body is ignored, as the body parser never read a GET body), the
 * `iam_forward_auth_requests_total` count, outages counted by the outage log and other failures logged. Other
 * methods on the path stay with the `/iam` app (405, and OPTIONS answered with `Allow`).
 */
export class ForwardAuthHandler {
  constructor(private readonly deps: ForwardAuthDeps) {}

  /** True when this handler answers the request: GET or HEAD of the forward-auth path (normalized, under `/iam/`). */
  accepts(request: PreparedRequest): boolean {
    return (request.method === 'GET' || request.method === 'HEAD') && FORWARD_AUTH_ROUTE.test(request.path);
  }

  /** Answers one check; synchronous on the warm path. Never throws. */
  handle(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, expectContinue = false): void {
    if (expectContinue) res.writeContinue();
    const tracer = this.deps.tracer;
    // Named after the endpoint, not the path as sent (its case and trailing slash are the client's).
    const trace = tracer === null ? null : tracer.startSampled({ method: request.method, route: FORWARD_AUTH_PATH, path: request.path, headers: req.headers, clientAddress: request.clientAddress, trustedPeer: request.trustedPeer });
    if (trace === null) {
      this.check(req, res, request);
      return;
    }
    res.once('close', () => trace.end(res.statusCode));
    // Spans made while deciding (a resolver call) nest under this request's span, and audit rows carry its trace.
    trace.run(() => this.check(req, res, request));
  }

  private check(req: IncomingMessage, res: ServerResponse, request: PreparedRequest): void {
    const started = performance.now();
    // Before anything else, as the /iam app's content-type check did: no route ran, nothing is counted.
    if (unsupportedBody(req.headers)) {
      sendProblem(res, new ProblemError('IAM_UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json.'), request.path, request.requestId);
      return;
    }
    const original = readOriginalRequest(req.rawHeaders, request, this.deps.target);
    if (original instanceof ProblemError) {
      this.refuse(res, request, original, request.path);
      return;
    }
    let outcome: Authorization | Promise<Authorization>;
    try {
      outcome = this.deps.authorizer.authorizeFast(original, request.clientAddress ?? undefined);
    } catch (error) {
      this.refuse(res, request, toProblem(error), original.path, error);
      return;
    }
    if (outcome instanceof Promise) {
      // authorizeFast never rejects; a rejection would still be answered, never left unhandled.
      void outcome.then(
        (later) => this.answer(req, res, request, original, later, started),
        (error: unknown) => this.refuse(res, request, toProblem(error), original.path, error),
      );
    }
    else this.answer(req, res, request, original, outcome, started);
  }

  private answer(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, original: PreparedRequest, outcome: Authorization, started: number): void {
    if (outcome.candidate) this.logDivergence(request, original, outcome, started);
    // From here on an answer is about the original request: a problem names its path (RFC 9457 `instance`).
    if (!outcome.allowed) {
      this.refuse(res, request, outcome.problem, original.path);
      return;
    }
    // A list the gateway filters (policy `filter`) for this caller: the proxy in front would pass the host's whole
    // answer, which forward-auth never sees. Only a caller whose plan is ALL gets a 200 (fail closed).
    if (outcome.filter) {
      this.refuse(res, request, new ProblemError('IAM_FILTER_FAILED', 'This list is filtered by the gateway for you: it can only be asked through the gateway, not a forward-auth check.'), original.path);
      return;
    }
    let headers: string[];
    try {
      headers = ['X-Request-Id', request.requestId];
      const identity = outcome.identity;
      if (identity !== null) for (const [name, value] of identity) headers.push(name, value);
      // The cookies the host may see, for the proxy to send instead of the client's (docs/http-contract.md): the
      // gateway's own are removed, as the inline proxy removes them. None left: no Cookie, and the host gets none.
      const cookie = req.headers.cookie === undefined ? '' : hostCookie(req.headers.cookie);
      if (cookie !== '') headers.push('Cookie', cookie);
      headers.push('Cache-Control', 'no-store', 'Content-Length', '0');
    } catch (error) {
      this.refuse(res, request, toProblem(error), original.path, error);
      return;
    }
    this.count('allowed');
    if (res.headersSent) return;
    res.writeHead(200, headers);
    res.end();
  }

  /**
   * The access-log line of a check the candidate policy decided otherwise (docs/observability.md): about the original
   * request, with the check's status. Checks the policies agree on are not logged here: the proxy in front logs them.
   */
  private logDivergence(request: PreparedRequest, original: PreparedRequest, outcome: Authorization, started: number): void {
    const log = this.deps.accessLog;
    const decision = outcome.decision ?? null;
    if (!log || !outcome.candidate || decision === null) return;
    log.write({
      requestId: request.requestId,
      traceId: null,
      clientAddress: request.clientAddress,
      method: original.method,
      path: original.path,
      route: decision.route?.pattern ?? null,
      status: outcome.allowed ? 200 : outcome.problem.status,
      decision: decision.shadowed ? 'shadow_deny' : decision.allowed ? 'allow' : 'deny',
      step: decision.failedStep,
      userId: decision.userId,
      profileId: decision.profileId,
      clientType: decision.clientType ?? null,
      decisionId: decision.decisionId,
      durationMs: Math.round((performance.now() - started) * 1000) / 1000,
      upstreamMs: null,
      bytes: null,
      candidate: outcome.candidate.candidate,
    });
  }

  /** A problem answer: counted by outcome, a failure logged (an outage counted instead), then sent. */
  private refuse(res: ServerResponse, request: PreparedRequest, problem: ProblemError, instance: string, thrown: unknown = problem): void {
    this.count(outcomeOf(problem.status));
    if (problem.status >= 500) this.failed(request, problem, thrown);
    sendProblem(res, problem, instance, request.requestId);
  }

  private failed(request: PreparedRequest, problem: ProblemError, thrown: unknown): void {
    const cause = problem.cause;
    const outages = this.deps.outages;
    if (outages !== null && cause instanceof StoreUnavailableError) outages.failed('tokenStore', cause);
    else if (outages !== null && cause instanceof DatabaseUnavailableError) outages.failed('database', cause);
    else this.deps.logger.error({ err: thrown, requestId: request.requestId, clientAddress: request.clientAddress }, 'iam: request failed');
  }

  private count(outcome: Outcome): void {
    this.deps.metrics.forwardAuth.inc({ outcome });
  }
}

/** The `outcome` label of `iam_forward_auth_requests_total` for a check answered with `status`. */
function outcomeOf(status: number): Exclude<Outcome, 'allowed'> {
  if (status === 401) return 'unauthenticated';
  if (status === 400) return 'refused';
  if (status === 403 || status === 404) return 'denied';
  return 'error';
}

/**
 * True when the check carries a body the `/iam` app refused with 415 before any route (docs/http-contract.md: every
 * `/iam` body is JSON): a body (`Transfer-Encoding`, or a `Content-Length` that is not 0) whose `Content-Type` is
 * missing or not `application/json` (parameters allowed). A JSON body is left unread, as the body parser never read
 * a GET body; Node discards it before the next request on the connection. The same reading as Koa's
 * `ctx.request.length` and `is()` (type-is), so the same requests are refused (test/unit/forward-auth-handler.test.ts
 * compares them).
 */
export function unsupportedBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  const transferEncoding = headers['transfer-encoding'];
  if (length === undefined && transferEncoding === undefined) return false;
  // Koa's `ctx.request.length` (`parseInt` of Content-Length): a length of 0 is no body.
  if (length !== undefined && Number.parseInt(length, 10) === 0) return false;
  // type-is `hasBody`: Transfer-Encoding, or a numeric Content-Length.
  if (transferEncoding === undefined && Number.isNaN(Number(length))) return false;
  return !isJsonMediaType(headers['content-type']);
}

/** `application/json` in any case, with or without parameters: the media type before `;`, without SP/HTAB around it. */
function isJsonMediaType(value: string | undefined): boolean {
  if (!value) return false;
  let start = 0;
  let end = value.indexOf(';');
  if (end === -1) end = value.length;
  while (start < end && (value.charCodeAt(start) === 0x20 || value.charCodeAt(start) === 0x09)) start++;
  while (end > start && (value.charCodeAt(end - 1) === 0x20 || value.charCodeAt(end - 1) === 0x09)) end--;
  return end - start === 16 && value.slice(start, end).toLowerCase() === 'application/json';
}

/**
 * The request the proxy in front is about to forward, from `X-Forwarded-Method`/`X-Original-Method` and
 * `X-Forwarded-Uri`/`X-Original-URI` (one pass over the raw headers), or the 400/414 problem. Several occurrences
 * of either spelling must agree: a client can add the spelling its proxy does not set (e.g. `X-Forwarded-Method:
 * GET` behind nginx, which sets `X-Original-Method`), so a disagreement is refused instead of picking one.
 */
function readOriginalRequest(rawHeaders: string[], request: PreparedRequest, target: ForwardAuthDeps['target']): PreparedRequest | ProblemError {
  let method: string | null = null;
  let methodConflict = false;
  let uri: string | null = null;
  let uriConflict = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    // Every name read here starts with X.
    const first = name.charCodeAt(0);
    if (first !== 0x78 && first !== 0x58) continue;
    const lower = name.toLowerCase();
    if (lower.startsWith('x-iam-')) return problems.badRequest('The request carries X-IAM-* headers; only the gateway sets them (strip them in the proxy).');
    if (lower === 'x-forwarded-method' || lower === 'x-original-method') {
      const value = rawHeaders[i + 1]!.trim();
      if (method !== null && method !== value) methodConflict = true;
      method = value;
    } else if (lower === 'x-forwarded-uri' || lower === 'x-original-uri') {
      const value = rawHeaders[i + 1]!.trim();
      if (uri !== null && uri !== value) uriConflict = true;
      uri = value;
    }
  }
  if (methodConflict) return problems.badRequest('X-Forwarded-Method and X-Original-Method disagree.');
  if (!method) return problems.badRequest('X-Forwarded-Method (or X-Original-Method) is required.');
  if (!KNOWN_METHODS.has(method)) return problems.badRequest('X-Forwarded-Method is not a method the gateway accepts.');
  if (uriConflict) return problems.badRequest('X-Forwarded-Uri and X-Original-URI disagree.');
  if (!uri) return problems.badRequest('X-Forwarded-Uri (or X-Original-URI) is required.');
  const interpreted = interpretRequestTarget(uri, undefined, target);
  if (!interpreted.ok) return interpreted.problem;
  if (interpreted.path + interpreted.search !== uri) {
    return problems.badRequest('The URI is not in normal form (dot segments, repeated or encoded characters); the host would see another path than the one authorized.');
  }
  return { ...request, method, path: interpreted.path, search: interpreted.search };
}
