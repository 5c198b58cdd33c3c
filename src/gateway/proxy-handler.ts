import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditTrail } from '../audit/audit-trail';
import type { AuthorizationDecision } from '../authz/decision';
import type { DecisionEngine } from '../authz/decision-engine';
import { problemFromDecision } from '../authz/decision-engine';
import type { Logger } from '../observability/logger';
import { ProxyRequestMetrics, type GatewayMetrics } from '../observability/metrics';
import { DatabaseUnavailableError } from '../domain/iam-repository';
import type { CompiledPolicy, RouteMatch } from '../policy/compiled-policy';
import { ProblemError, problems, toProblem } from '../domain/problem';
import type { SessionService, VerifiedSession } from '../sessions/session-service';
import { StoreUnavailableError } from '../domain/token-store';
import { forwardedAuthorization, identityHeaders } from './identity-headers';
import { parseBearerToken } from '../http/inbound-headers';
import type { PreparedRequest } from '../http/prepare-request';
import { sendProblem } from '../http/problem-response';
import { buildUpstreamHeaders } from '../http/upstream-headers';
import type { UpstreamForwarder } from './upstream-forwarder';
import type { WebSocketForwarder } from './websocket-forwarder';
import type { Socket } from 'node:net';

export interface ProxyHandlerDeps {
  /** The policy snapshot to use for a new request (hot reload swaps what this returns). */
  policy: () => CompiledPolicy;
  sessions: Pick<SessionService, 'verify' | 'verifyCached'>;
  engine: Pick<DecisionEngine, 'decideRequestFast'>;
  forwarder: UpstreamForwarder;
  websockets: WebSocketForwarder;
  audit: AuditTrail;
  metrics: GatewayMetrics;
  logger: Logger;
  isTrustedProxy: (address: string | undefined) => boolean;
  /** Signs the optional X-IAM-Assertion (docs/http-contract.md); null when off. */
  signAssertion: ((decision: AuthorizationDecision, session: VerifiedSession, method: string, path: string, requestId: string) => string) | null;
}

/** The outcome of authorizing a request, shared by the proxy, WebSocket upgrades and forward-auth. */
export type Authorization =
  | { allowed: true; decision: AuthorizationDecision | null; session: VerifiedSession | null; bearerSent: boolean }
  | { allowed: false; problem: ProblemError };

/**
 * The per-request pipeline: match → authenticate → authorize → mutate headers → forward.
 * No database access; at most one token-store round trip (none on a warm session cache).
 */
function invalidToken(): Authorization {
  return { allowed: false, problem: problems.unauthenticated('The access token is invalid, expired or revoked.', true) };
}

export class ProxyHandler {
  private readonly requestMetrics: ProxyRequestMetrics;

  constructor(private readonly deps: ProxyHandlerDeps) {
    this.requestMetrics = new ProxyRequestMetrics(deps.metrics);
  }

  /** Authorizes a prepared request exactly as the proxy enforces it. Never rejects. */
  async authorize(request: PreparedRequest, clientAddress: string | undefined): Promise<Authorization> {
    return this.authorizeFast(request, clientAddress);
  }

  /**
   * {@link authorize} without a promise on the warm path (session and grant cached, no resolver): each
   * promise costs measurable time per request, more so while async hooks are on. Never throws or rejects.
   */
  authorizeFast(request: PreparedRequest, clientAddress: string | undefined): Authorization | Promise<Authorization> {
    const policy = this.deps.policy();
    const match = policy.match(request.method, request.path);
    const bearer = parseBearerToken(request.authorization);
    // A malformed Authorization (e.g. `Bearer<TAB>iamt_…`) may still carry a gateway token: it never
    // reaches the host either, even on a public route (docs/http-contract.md).
    const bearerSent = bearer.kind === 'bearer' || bearer.kind === 'malformed';
    const needsSubject = match ? !match.route.public : policy.defaultAction === 'authenticated';
    try {
      if (needsSubject && bearer.kind === 'malformed') return { allowed: false, problem: problems.unauthenticated('The bearer token is malformed.', true) };
      if (needsSubject && bearer.kind === 'bearer') {
        const cached = this.deps.sessions.verifyCached(bearer.token);
        if (cached === 'miss') {
          return this.deps.sessions.verify(bearer.token).then(
            (session) => (session ? this.decide(request, clientAddress, policy, match, session, bearerSent) : invalidToken()),
            (error: unknown) => this.failure(error, request),
          );
        }
        if (cached === null) return invalidToken();
        return this.decide(request, clientAddress, policy, match, cached, bearerSent);
      }
      return this.decide(request, clientAddress, policy, match, null, bearerSent);
    } catch (error) {
      return this.failure(error, request);
    }
  }

  private decide(
    request: PreparedRequest,
    clientAddress: string | undefined,
    policy: CompiledPolicy,
    match: RouteMatch | null,
    session: VerifiedSession | null,
    bearerSent: boolean,
  ): Authorization | Promise<Authorization> {
    const subject = session ? { principal: session.record.principal, clientType: session.record.clientType } : null;
    try {
      const pending = this.deps.engine.decideRequestFast({ method: request.method, path: request.path, policy, subject, match });
      if (pending instanceof Promise) {
        return pending.then(
          (decision) => this.conclude(decision, request, clientAddress, session, bearerSent),
          (error: unknown) => this.failure(error, request),
        );
      }
      return this.conclude(pending, request, clientAddress, session, bearerSent);
    } catch (error) {
      return this.failure(error, request);
    }
  }

  private conclude(decision: AuthorizationDecision, request: PreparedRequest, clientAddress: string | undefined, session: VerifiedSession | null, bearerSent: boolean): Authorization {
    if (decision.shadowed) this.recordShadow(decision, request, clientAddress);
    if (!decision.allowed) {
      this.deps.metrics.decisions.inc({ result: 'deny', step: decision.failedStep ?? 'unknown' });
      if (decision.status === 401) return { allowed: false, problem: problems.unauthenticated('Authentication is required.', bearerSent) };
      this.recordDenial(decision, request, clientAddress);
      return { allowed: false, problem: problemFromDecision(decision) };
    }
    return { allowed: true, decision, session, bearerSent };
  }

  private failure(error: unknown, request: PreparedRequest): Authorization {
    if (error instanceof StoreUnavailableError) return { allowed: false, problem: problems.storeUnavailable(error) };
    // An uncached grant cannot be loaded while the database is down: 503 with Retry-After, like the store.
    if (error instanceof DatabaseUnavailableError) return { allowed: false, problem: problems.databaseUnavailable(error) };
    const problem = toProblem(error);
    if (problem.status >= 500) this.deps.logger.error({ err: error, requestId: request.requestId, clientAddress: request.clientAddress }, 'proxy: authorization failed');
    return { allowed: false, problem };
  }

  /** Handles a request that is not for `/iam`; synchronous on the warm path. */
  handle(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, expectContinue = false): void {
    const outcome = this.authorizeFast(request, request.clientAddress ?? undefined);
    if (outcome instanceof Promise) void outcome.then((later) => this.respond(req, res, request, expectContinue, later));
    else this.respond(req, res, request, expectContinue, outcome);
  }

  private respond(req: IncomingMessage, res: ServerResponse, request: PreparedRequest, expectContinue: boolean, outcome: Authorization): void {
    if (!outcome.allowed) {
      this.deps.metrics.requests.inc({ outcome: outcome.problem.status === 401 ? 'unauthenticated' : 'denied' });
      sendProblem(res, outcome.problem, request.path, request.requestId);
      return;
    }
    if (expectContinue) res.writeContinue();
    this.forward(req, res, request, outcome);
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
    const outcome = await this.authorize(request, clientAddress);
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
        const again = await this.authorize(request, clientAddress);
        return again.allowed ? null : again.problem;
      },
    });
  }

  /** The identity headers of docs/http-contract.md for an authorized request (none for anonymous requests). */
  identityHeadersFor(request: PreparedRequest, outcome: Extract<Authorization, { allowed: true }>): Array<readonly [string, string]> | null {
    const { session, decision } = outcome;
    const forwarded = forwardedAuthorization(decision);
    if (!session) return forwarded.shadowDenied === null ? null : identityHeaders(null, null, forwarded, null);
    const assertion = this.deps.signAssertion && decision ? this.deps.signAssertion(decision, session, request.method, request.path, request.requestId) : null;
    return identityHeaders(session.record.principal, session.record.sessionId, forwarded, assertion);
  }

  /** The headers the host receives for an authorized request. */
  upstreamHeaders(req: IncomingMessage, request: PreparedRequest, outcome: Extract<Authorization, { allowed: true }>, keepUpgrade = false): string[] {
    const identity = this.identityHeadersFor(request, outcome);
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

  private recordDenial(decision: AuthorizationDecision, request: PreparedRequest, clientAddress: string | undefined): void {
    // Anonymous probes of undeclared routes (scanners) are rate-limited in the trail (#11.15).
    const anonymousProbe = decision.userId === null && decision.failedStep === 'ROUTE_NOT_DECLARED';
    this.deps.audit[anonymousProbe ? 'recordAnonymousDenial' : 'record']({
      action: 'authz.deny',
      actorUserId: decision.userId,
      targetType: 'route',
      targetId: `${request.method} ${request.path}`,
      outcome: 'denied',
      requestId: request.requestId,
      decisionId: decision.decisionId,
      clientAddress: clientAddress ?? null,
      details: { decision },
    });
  }

  private recordShadow(decision: AuthorizationDecision, request: PreparedRequest, clientAddress: string | undefined): void {
    this.deps.metrics.decisions.inc({ result: 'shadow_deny', step: decision.failedStep ?? 'unknown' });
    this.deps.logger.info({ requestId: request.requestId, decisionId: decision.decisionId, route: decision.route?.id, step: decision.failedStep }, 'policy: shadow route would deny');
    this.deps.audit.record({
      action: 'authz.shadow_deny',
      actorUserId: decision.userId,
      targetType: 'route',
      targetId: `${request.method} ${request.path}`,
      outcome: 'shadow_denied',
      requestId: request.requestId,
      decisionId: decision.decisionId,
      clientAddress: clientAddress ?? null,
      details: { decision },
    });
  }
}
