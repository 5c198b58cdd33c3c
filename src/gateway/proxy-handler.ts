import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ProblemError } from '../domain/problem';
import type { Logger } from '../observability/logger';
import { ProxyRequestMetrics, type GatewayMetrics } from '../observability/metrics';
import type { PreparedRequest } from '../http/prepare-request';
import { prefersHtml, sendProblemPage } from '../http/problem-page';
import { sendProblem } from '../http/problem-response';
import { GATEWAY_COOKIE_NAMES, clearedSessionCookie } from '../http/session-cookie';
import { sendLoginRedirect } from '../http/login-page';
import { buildUpstreamHeaders } from '../http/upstream-headers';
import type { Authorization, RequestAuthorizer } from './request-authorizer';
import type { UpstreamForwarder } from './upstream-forwarder';
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
  browserLogin: { path: string; secureCookie: boolean } | null;
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
    const outcome = this.deps.authorizer.authorizeFast(request, request.clientAddress ?? undefined);
    if (outcome instanceof Promise) void outcome.then((later) => this.respond(req, res, request, expectContinue, later));
    else this.respond(req, res, request, expectContinue, outcome);
  }

  private respond(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, expectContinue: boolean, outcome: Authorization): void {
    if (!outcome.allowed) {
      this.deps.metrics.requests.inc({ outcome: outcome.problem.status === 401 ? 'unauthenticated' : 'denied' });
      if (!this.answeredBrowser(req, res, request, outcome.problem)) sendProblem(res, outcome.problem, request.path, request.requestId);
      return;
    }
    if (expectContinue) res.writeContinue();
    this.forward(req, res, request, outcome);
  }

  /**
   * A browser (Accept prefers HTML) that is denied gets a page it can show, and one navigating without a session is
   * sent to the login; API clients keep problem+json (content negotiation). False when this is not such a case.
   */
  private answeredBrowser(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, problem: ProblemError): boolean {
    if ((problem.status !== 401 && problem.status !== 403) || !prefersHtml(req.headers.accept)) return false;
    if (problem.status === 403) {
      sendProblemPage(res, problem, request.method, request.path, request.requestId);
      return true;
    }
    const login = this.deps.browserLogin;
    if (login === null || request.authorization !== null || (request.method !== 'GET' && request.method !== 'HEAD')) return false;
    const stale = request.cookieSession === null ? null : clearedSessionCookie(login.secureCookie);
    sendLoginRedirect(res, login.path, request.path + request.search, request.requestId, stale);
    return true;
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
    const outcome = await this.deps.authorizer.authorize(request, clientAddress, true);
    if (!outcome.allowed) {
      this.deps.metrics.requests.inc({ outcome: outcome.problem.status === 401 ? 'unauthenticated' : 'denied' });
      handshake.refuse(outcome.problem);
      return;
    }
    if (!handshake.open) return;
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
    const identity = this.deps.authorizer.identityHeadersFor(request, outcome);
    return buildUpstreamHeaders(
      {
        rawHeaders: req.rawHeaders,
        remoteAddress: req.socket.remoteAddress ?? '',
        trustedProxy: this.deps.isTrustedProxy(req.socket.remoteAddress),
        protocol: 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http',
        host: req.headers.host,
        requestId: request.requestId,
        stripAuthorization: outcome.bearerSent,
        stripCookies: GATEWAY_COOKIE_NAMES,
        identity,
      },
      { keepUpgrade },
    );
  }

  private forward(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, outcome: Extract<Authorization, { allowed: true }>): void {
    const started = performance.now();
    this.deps.forwarder.forward(req, res, {
      method: request.method,
      path: request.path + request.search,
      headers: this.upstreamHeaders(req, request, outcome),
      requestId: request.requestId,
      onResponse: (statusCode) => {
        this.requestMetrics.forwardedResponse(statusCode, (performance.now() - started) / 1000);
      },
      onProblem: (problem) => {
        this.deps.metrics.requests.inc({ outcome: 'error' });
        this.deps.logger.warn({ err: problem.cause, requestId: request.requestId, code: problem.code }, 'proxy: upstream failed');
        sendProblem(res, problem, request.path, request.requestId);
      },
    });
  }
}
