import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ProblemError } from '../domain/problem';
import type { Logger } from '../observability/logger';
import { ProxyRequestMetrics, type GatewayMetrics } from '../observability/metrics';
import type { PreparedRequest } from '../http/prepare-request';
import type { PageBranding } from '../http/page-layout';
import { prefersHtml, sendProblemPage } from '../http/problem-page';
import { sendProblem } from '../http/problem-response';
import { clearedSessionCookie } from '../http/session-cookie';
import { sendLoginRedirect } from '../http/login-page';
import { buildUpstreamHeaders } from '../http/upstream-headers';
import { sendWellKnownFile, wellKnownFileFor, type WellKnownFile } from '../http/well-known-files';
import type { Authorization, RequestAuthorizer } from './request-authorizer';
import type { CandidateDivergence } from './candidate-decisions';
import type { AuthorizationDecision } from '../authz/decision';
import type { AccessLog } from '../observability/access-log';
import { endSpan, type RequestSpan, type RequestTracer } from '../observability/tracing';
import { SpanKind, type Span } from '@opentelemetry/api';
import type { UpstreamForwarder } from './upstream-forwarder';
import { filteredRequestHeaders } from './list-filter';
import type { WebSocketForwarder } from './websocket-forwarder';

export interface ProxyHandlerDeps {
  authorizer: RequestAuthorizer;
  forwarder: UpstreamForwarder;
  websockets: WebSocketForwarder;
  metrics: GatewayMetrics;
  logger: Logger;
  isTrustedProxy: (address: string | undefined) => boolean;
  /**
   * Where a browser navigating without a session is sent (`/iam/login`, or the OpenID Connect login), and whether
   * the session cookie is the `Secure` one (to clear a stale one); null when nobody can log in (authenticator `none`).
   */
  /** `signOutPath`: where a browser signs out by navigating (the OpenID Connect logout), linked from the 403 page. */
  browserLogin: { path: string; secureCookie: boolean; signOutPath: string | null } | null;
  /** `iam.ui.*`: the branding of the 401 and 403 pages a browser gets (default: the gateway's own name, no logo). */
  branding?: PageBranding;
  /** Spans for each request (docs/observability.md); null when tracing is off (one null check per request). */
  tracer: RequestTracer | null;
  /** `iam.access-log`; null when off. */
  accessLog: AccessLog | null;
}

/** What one proxied request carries from its start to its answer: timing, and its spans when tracing is on. */
interface Exchange {
  started: number;
  trace: RequestSpan | null;
  /** The `authorize` span, ended when the decision is in. */
  authorize: Span | null;
  /** Whether this request is written to the access log when allowed (sampled at its start). */
  logAllowed: boolean;
}

/**
 * A request that is not for `/iam`: authorized by the {@link RequestAuthorizer}, then forwarded to the host
 * with the identity headers (or answered with the problem of the denial). WebSocket handshakes likewise,
 * tunnelled only after the host's 101.
 */
export class ProxyHandler {
  private readonly requestMetrics: ProxyRequestMetrics;

  constructor(private readonly deps: ProxyHandlerDeps) {
    this.requestMetrics = new ProxyRequestMetrics(deps.metrics);
  }

  /** Handles a request that is not for `/iam`; synchronous on the warm path. */
  handle(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, expectContinue = false): void {
    const file = wellKnownFileFor(request.method, request.path);
    if (file !== null && this.deps.authorizer.refusesUndeclared(request)) return this.answerWellKnown(req, res, request, file);
    const tracer = this.deps.tracer;
    // A request the sampler left out is handled as with tracing off: no child spans, no context to carry, and the
    // client's own traceparent reaches the host.
    // Named `METHOD proxy` until the policy's route is known (the raw path is the client's choice).
    const trace = tracer === null ? null : tracer.startSampled({ method: request.method, route: 'proxy', path: request.path, headers: req.headers, clientAddress: request.clientAddress, trustedPeer: request.trustedPeer });
    const exchange: Exchange = {
      started: performance.now(),
      trace,
      authorize: trace === null ? null : trace.child('authorize'),
      logAllowed: this.deps.accessLog !== null && this.deps.accessLog.logsAllowed && this.deps.accessLog.sampled(),
    };
    const clientAddress = request.clientAddress ?? undefined;
    // With tracing on, spans made while deciding (a resolver call) nest under this request's authorize span.
    const outcome = trace === null ? this.deps.authorizer.authorizeFast(request, clientAddress) : trace.run(() => this.deps.authorizer.authorizeFast(request, clientAddress), exchange.authorize!);
    if (outcome instanceof Promise) void outcome.then((later) => this.respond(req, res, request, expectContinue, later, exchange));
    else this.respond(req, res, request, expectContinue, outcome, exchange);
  }

  private respond(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, expectContinue: boolean, outcome: Authorization, exchange: Exchange): void {
    this.requestMetrics.decided(outcome.allowed, (performance.now() - exchange.started) / 1000);
    if (exchange.authorize !== null) this.endAuthorizeSpan(request, exchange, outcome);
    if (!outcome.allowed) {
      this.deps.metrics.requests.inc({ outcome: outcome.problem.status === 401 ? 'unauthenticated' : 'denied' });
      let status = this.answeredBrowser(req, res, request, outcome.problem);
      if (status === undefined) {
        sendProblem(res, outcome.problem, request.path, request.requestId);
        status = outcome.problem.status;
      }
      this.answered(request, exchange, outcome.route, status);
      this.completed(request, exchange, outcome.route, status, outcome.decision ?? null, null, null, true, outcome.candidate);
      return;
    }
    if (expectContinue) res.writeContinue();
    this.forward(req, res, request, outcome, exchange);
  }

  /**
   * `GET`/`HEAD /favicon.ico` or `/robots.txt` that the policy would refuse only because no route declares it
   * (docs/http-contract.md): the gateway's fixed answer instead of a denial. Nothing is decided, so nothing is
   * audited, and the access log has a line (decision `none`) only where it logs allowed requests (`all`, sampled).
   */
  private answerWellKnown(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, file: WellKnownFile): void {
    const tracer = this.deps.tracer;
    const exchange: Exchange = {
      started: performance.now(),
      // `METHOD proxy`, like any request no route matched.
      trace: tracer === null ? null : tracer.startSampled({ method: request.method, route: 'proxy', path: request.path, headers: req.headers, clientAddress: request.clientAddress, trustedPeer: request.trustedPeer }),
      authorize: null,
      logAllowed: this.deps.accessLog !== null && this.deps.accessLog.logsAllowed && this.deps.accessLog.sampled(),
    };
    sendWellKnownFile(res, file, request.requestId);
    this.answered(request, exchange, undefined, file.status);
    this.completed(request, exchange, undefined, file.status, null, null, request.method === 'HEAD' ? 0 : Buffer.byteLength(file.body));
  }

  /** The `authorize` span's attributes (docs/observability.md): route, permission, decision, step, decisionId. */
  private endAuthorizeSpan(request: PreparedRequest, exchange: Exchange, outcome: Authorization): void {
    const span = exchange.authorize!;
    const decision = outcome.decision ?? null;
    const route = routeOf(outcome);
    if (route !== undefined) {
      span.setAttribute('http.route', route);
      exchange.trace!.nameRoute(request.method, route);
    }
    if (decision !== null) {
      span.setAttributes({
        'iam.decision': decision.shadowed ? 'shadow_deny' : decision.allowed ? 'allow' : 'deny',
        'iam.decision_id': decision.decisionId,
        ...(decision.permissionCode ? { 'iam.permission': decision.permissionCode } : {}),
        ...(decision.failedStep ? { 'iam.step': decision.failedStep } : {}),
        ...(decision.userId ? { 'enduser.id': decision.userId } : {}),
      });
    } else if (!outcome.allowed) span.setAttribute('iam.decision', 'deny');
    endSpan(span, outcome.allowed || outcome.problem.status < 500 ? undefined : outcome.problem);
  }

  /** The response status is known (headers sent): RED metrics per route pattern. */
  private answered(request: PreparedRequest, exchange: Exchange, route: string | undefined, status: number): void {
    this.requestMetrics.answered(route, request.method, status, (performance.now() - exchange.started) / 1000);
  }

  /**
   * The request is over: the access log line and the end of the server span. `status` is what the client got;
   * `bytes` the response body, when known; `refused` when the gateway answered itself (a denial, or a failure to
   * forward) rather than the host; `candidate` when the candidate policy decided otherwise.
   */
  private completed(
    request: PreparedRequest,
    exchange: Exchange,
    route: string | undefined,
    status: number,
    decision: AuthorizationDecision | null,
    upstreamMs: number | null,
    bytes: number | null,
    refused = false,
    candidate: CandidateDivergence | null = null,
    filtered: { kept: number; removed: number } | null = null,
  ): void {
    const durationMs = performance.now() - exchange.started;
    const log = this.deps.accessLog;
    // `denied` logs what the gateway refused or failed to forward, shadow denials and the candidate's divergences;
    // `all` (sampled) the rest too.
    if (log !== null && (exchange.logAllowed || refused || decision?.shadowed === true || candidate !== null)) {
      log.write({
        requestId: request.requestId,
        traceId: exchange.trace?.recordedTraceId ?? null,
        clientAddress: request.clientAddress,
        method: request.method,
        path: request.path,
        route: route ?? null,
        status,
        decision: decision === null ? (refused ? 'deny' : 'none') : decision.shadowed ? 'shadow_deny' : decision.allowed ? 'allow' : 'deny',
        step: decision?.failedStep ?? null,
        userId: decision?.userId ?? null,
        profileId: decision?.profileId ?? null,
        clientType: decision?.clientType ?? null,
        decisionId: decision?.decisionId ?? null,
        durationMs: Math.round(durationMs * 1000) / 1000,
        upstreamMs: upstreamMs === null ? null : Math.round(upstreamMs * 1000) / 1000,
        bytes,
        ...(candidate === null ? {} : { candidate: candidate.candidate }),
        ...(filtered === null ? {} : { filtered }),
      });
    }
    exchange.trace?.end(status);
  }

  /**
   * A browser (Accept prefers HTML) that is denied gets a page it can show, and one navigating without a session is
   * sent to the login (without a login to go to, or not a navigation, it gets the 401 as a page); API clients, and
   * scripts that send an `Authorization` header, keep problem+json (content negotiation). Undefined when this is not
   * such a case.
   */
  private answeredBrowser(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, problem: ProblemError): number | undefined {
    if ((problem.status !== 401 && problem.status !== 403) || !prefersHtml(req.headers.accept)) return undefined;
    const branding = this.deps.branding === undefined ? {} : { branding: this.deps.branding };
    if (problem.status === 403) {
      sendProblemPage(res, problem, request.method, request.path, request.requestId, { ...branding, refusedSignedIn: { signOutPath: this.deps.browserLogin?.signOutPath ?? null } });
      return 403;
    }
    if (request.authorization !== null) return undefined;
    const login = this.deps.browserLogin;
    if (login === null || (request.method !== 'GET' && request.method !== 'HEAD')) {
      const signIn = login === null ? {} : { signInAgain: true, loginPath: `${login.path}?returnTo=${encodeURIComponent(request.path + request.search)}` };
      sendProblemPage(res, problem, request.method, request.path, request.requestId, { ...branding, ...signIn });
      return 401;
    }
    const stale = request.cookieSession === null ? null : clearedSessionCookie(login.secureCookie);
    sendLoginRedirect(res, login.path, request.path + request.search, request.requestId, stale);
    return 302;
  }

  /**
   * A WebSocket handshake: authorized like any request (docs/http-contract.md), then tunnelled once the host
   * answers 101. The tunnel stays bound to this authorization: it closes when a recheck would refuse it.
   */
  async handleUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, request: PreparedRequest): Promise<void> {
    const handshake = this.deps.websockets.accept(req, socket, head, request.requestId, request.path);
    if (!handshake) {
      this.deps.metrics.requests.inc({ outcome: 'refused' });
      return;
    }
    const clientAddress = request.clientAddress ?? undefined;
    const started = performance.now();
    const outcome = await this.deps.authorizer.authorize(request, clientAddress, true);
    if (!outcome.allowed) {
      this.deps.metrics.requests.inc({ outcome: outcome.problem.status === 401 ? 'unauthenticated' : 'denied' });
      handshake.refuse(outcome.problem);
      // A refused handshake is a denial like any other: its access-log line in every mode but off.
      this.completed(request, { started, trace: null, authorize: null, logAllowed: false }, outcome.route, outcome.problem.status, outcome.decision ?? null, null, null, true, outcome.candidate);
      return;
    }
    if (!handshake.open) return;
    // A tunnel would carry the host's answer unread: a list filtered for this caller is never tunnelled (fail closed).
    if (outcome.filter) {
      const problem = new ProblemError('IAM_FILTER_FAILED', 'This list is filtered by the gateway for you: it cannot be opened as a WebSocket.');
      this.deps.metrics.requests.inc({ outcome: 'refused' });
      handshake.refuse(problem);
      this.completed(request, { started, trace: null, authorize: null, logAllowed: false }, outcome.decision?.route?.pattern, problem.status, outcome.decision, null, null, true, outcome.candidate);
      return;
    }
    this.deps.metrics.requests.inc({ outcome: 'forwarded' });
    const record = outcome.session?.record;
    const session = outcome.session && record ? { tokenHash: outcome.session.tokenHash, userId: record.principal.userId, expiresAtMs: Date.parse(record.expiresAt) } : null;
    handshake.forward(request.path + request.search, this.upstreamHeaders(req, request, outcome, true), {
      session,
      recheck: async () => {
        const again = await this.deps.authorizer.authorize(request, clientAddress, true);
        return again.allowed ? null : again.problem;
      },
    });
  }

  /** The headers the host receives for an authorized request. */
  upstreamHeaders(req: IncomingMessage, request: PreparedRequest, outcome: Extract<Authorization, { allowed: true }>, keepUpgrade = false): string[] {
    const identity = outcome.identity;
    return buildUpstreamHeaders(
      {
        rawHeaders: req.rawHeaders,
        remoteAddress: req.socket.remoteAddress ?? '',
        trustedProxy: this.deps.isTrustedProxy(req.socket.remoteAddress),
        protocol: 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http',
        host: req.headers.host,
        requestId: request.requestId,
        stripAuthorization: outcome.bearerSent,
        identity,
      },
      { keepUpgrade },
    );
  }

  private forward(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, outcome: Extract<Authorization, { allowed: true }>, exchange: Exchange): void {
    const started = performance.now();
    const route = outcome.decision?.route?.pattern;
    const filter = outcome.filter ?? null;
    let headers = this.upstreamHeaders(req, request, outcome);
    // A filtered list is asked for whole and uncompressed (gateway/list-filter.ts); a HEAD is asked as GET, so its
    // headers are those of the filtered GET.
    if (filter !== null) headers = filteredRequestHeaders(headers);
    // With tracing on, the host continues the trace under the gateway's forward span (the client's traceparent is
    // replaced, its trace id kept); with it off, the client's own headers pass untouched.
    const forwardSpan = exchange.trace === null ? null : exchange.trace.child('forward', { 'server.address': 'upstream' }, SpanKind.CLIENT);
    if (forwardSpan !== null) headers = withTraceContext(headers, exchange.trace!.propagationHeaders(forwardSpan));
    // The end of the response matters only to the access log and the spans: watched only when one of them wants it
    // (a shadow denial is logged in every mode but off).
    let statusCode = 0;
    let upstreamMs: number | null = null;
    let failed = false;
    let filtered: { kept: number; removed: number } | null = null;
    const candidate = outcome.candidate ?? null;
    const watched = exchange.logAllowed || exchange.trace !== null || outcome.decision?.shadowed === true || candidate !== null;
    if (watched) {
      res.once('close', () => {
        if (forwardSpan !== null) {
          forwardSpan.setAttribute('http.response.status_code', statusCode);
          endSpan(forwardSpan);
        }
        const length = Number(res.getHeader('content-length'));
        this.completed(request, exchange, route, res.statusCode || statusCode, outcome.decision, upstreamMs, Number.isFinite(length) && res.writableFinished ? length : null, failed, candidate, filtered);
      });
    }
    this.deps.forwarder.forward(req, res, {
      method: filter !== null && request.method === 'HEAD' ? 'GET' : request.method,
      path: request.path + request.search,
      headers,
      requestId: request.requestId,
      filter,
      onFiltered: (counts) => {
        filtered = counts;
      },
      onResponse: (status) => {
        statusCode = status;
        upstreamMs = performance.now() - started;
        this.requestMetrics.forwardedResponse(status, upstreamMs / 1000);
        this.answered(request, exchange, route, status);
      },
      onProblem: (problem) => {
        this.deps.metrics.requests.inc({ outcome: 'error' });
        this.deps.logger.warn({ err: problem.cause, requestId: request.requestId, code: problem.code }, 'proxy: upstream failed');
        sendProblem(res, problem, request.path, request.requestId);
        this.answered(request, exchange, route, problem.status);
        // The gateway's own failure to forward: logged in every mode but off.
        failed = true;
        if (!watched) this.completed(request, exchange, route, problem.status, outcome.decision, null, null, true, candidate);
      },
    });
  }
}

/** The matched route's pattern of an outcome. */
function routeOf(outcome: Authorization): string | undefined {
  return outcome.allowed ? outcome.decision?.route?.pattern : outcome.route;
}

/** Upstream headers with the client's `traceparent`/`tracestate` replaced by the gateway's. */
function withTraceContext(headers: string[], context: Record<string, string>): string[] {
  const out: string[] = [];
  for (let index = 0; index < headers.length; index += 2) {
    const name = headers[index]!.toLowerCase();
    if (name === 'traceparent' || name === 'tracestate') continue;
    out.push(headers[index]!, headers[index + 1]!);
  }
  for (const [name, value] of Object.entries(context)) out.push(name, value);
  return out;
}
