import type { AuditInput, AuditTrail } from '../audit/audit-trail';
import type { AuthorizationDecision } from '../authz/decision';
import type { DecisionEngine } from '../authz/decision-engine';
import { problemFromDecision } from '../authz/decision-engine';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import { DatabaseUnavailableError } from '../domain/iam-repository';
import type { CompiledPolicy, RouteMatch } from '../policy/compiled-policy';
import { ProblemError, problems, toProblem } from '../domain/problem';
import type { VerifiedSession } from '../sessions/session-service';
import { StoreUnavailableError } from '../domain/token-store';
import { forwardedAuthorization, identityHeaders } from './identity-headers';
import { requestCredential } from '../http/request-credential';
import { authenticationRequired, PROTECTED, type CallerAccepts, type CallerStep } from '../auth/caller';
import { activeTraceId } from '../observability/tracing';
import type { PreparedRequest } from '../http/prepare-request';
import type { CandidateDecisions, CandidateDivergence } from './candidate-decisions';
import { listFilterPlan, type ListFilterPlan } from './list-filter';

export interface RequestAuthorizerDeps {
  /** The policy snapshot to use for a new request (hot reload swaps what this returns). */
  policy: () => CompiledPolicy;
  /** The request's credential to its session (auth/caller.ts): gateway tokens, and provider JWTs when accepted. */
  callers: Pick<CallerStep, 'sessionOf'>;
  engine: Pick<DecisionEngine, 'decideRequestFast' | 'coveredFast'>;
  audit: Pick<AuditTrail, 'record' | 'recordUnauthenticated'>;
  metrics: GatewayMetrics;
  logger: Logger;
  /** `iam.session-cookie.trusted-origins`: origins besides the gateway's own allowed to use the cookie cross-site. */
  trustedOrigins: ReadonlySet<string>;
  /**
   * Signs the optional X-IAM-Assertion (docs/http-contract.md) for the method and path forwarded, with the matched
   * route's `audience` (null: the configured one); null when off.
   */
  signAssertion: ((decision: AuthorizationDecision, session: VerifiedSession, method: string, path: string, requestId: string, audience: string | null) => string) | null;
  /** The candidate policy deciding beside the live one (`iam.policy.candidate-dir`); null when none is configured. */
  candidate?: Pick<CandidateDecisions, 'compare'> | null;
}

/** The outcome of authorizing a request, shared by the proxy, WebSocket upgrades and forward-auth. */
export type Authorization =
  | {
      allowed: true;
      decision: AuthorizationDecision | null;
      session: VerifiedSession | null;
      bearerSent: boolean;
      /**
       * The identity headers of docs/http-contract.md the host receives with this request (`X-IAM-*`, the optional
       * `X-IAM-Assertion`); null for an anonymous request that has none. Built with the decision, so the proxy, a
       * WebSocket upgrade and forward-auth send exactly what was decided.
       */
      identity: Array<readonly [string, string]> | null;
      /** The candidate policy decided otherwise (never enforced: for the access log). */
      candidate?: CandidateDivergence | null;
      /**
       * The route's list filter with the ids the caller's plan keeps (policy `filter`); absent or null when the answer
       * goes to the client as the host sent it (no filter, or a plan of `ALL`).
       */
      filter?: ListFilterPlan | null;
    }
  | {
      allowed: false;
      problem: ProblemError;
      /** The decision that denied, when one was made (not for a missing or invalid token, or a failure). */
      decision?: AuthorizationDecision;
      /** The matched route's pattern (metrics and the access log), when a route matched. */
      route?: string;
      candidate?: CandidateDivergence | null;
    };

/**
 * What the proxy and forward-auth accept as a caller: what a protected endpoint does, and no credential is an
 * anonymous request the policy decides (a public route never asks).
 */
const PROXIED: CallerAccepts = { ...PROTECTED, anonymous: true };

/**
 * Match → authenticate → authorize for one prepared request, and the identity headers an allowed request
 * carries to the host. The proxy (gateway/proxy-handler.ts), WebSocket upgrades and forward-auth
 * (gateway/forward-auth-handler.ts) all ask this one object, so they cannot disagree. No database access; at most
 * one token-store round trip (none on a warm session cache). Denials and shadow denials are audited here.
 */
export class RequestAuthorizer {
  /** `iam_decisions_total{result="allow"}`, its cell looked up once. */
  private readonly allowed: ReturnType<GatewayMetrics['decisions']['cell']>;

  constructor(private readonly deps: RequestAuthorizerDeps) {
    this.allowed = deps.metrics.decisions.cell('allow', 'none');
  }

  /**
   * Whether the live policy refuses the request without looking at who sent it: its route table selects no route for
   * the method and path, and `default: deny` decides (403 ROUTE_NOT_DECLARED). Only asked for the few paths the
   * gateway may answer itself (gateway/proxy-handler.ts); {@link authorizeFast} takes its own snapshot.
   */
  refusesUndeclared(request: PreparedRequest): boolean {
    const policy = this.deps.policy();
    return policy.defaultAction === 'deny' && policy.match(request.method, request.path) === null;
  }

  /** Authorizes a prepared request exactly as the proxy enforces it. Never rejects. */
  async authorize(request: PreparedRequest, clientAddress: string | undefined, upgrade = false): Promise<Authorization> {
    return this.authorizeFast(request, clientAddress, upgrade);
  }

  /**
   * {@link authorize} without a promise on the warm path (session and grant cached, no resolver): each
   * promise costs measurable time per request, more so while async hooks are on. Never throws or rejects.
   */
  authorizeFast(request: PreparedRequest, clientAddress: string | undefined, upgrade = false): Authorization | Promise<Authorization> {
    const policy = this.deps.policy();
    const match = policy.match(request.method, request.path);
    const credential = requestCredential(request, { method: request.method, upgrade, trustedOrigins: this.deps.trustedOrigins });
    // A malformed Authorization (e.g. `Bearer<TAB>iamt_…`) may still carry a gateway token: it never
    // reaches the host either, even on a public route (docs/http-contract.md).
    const bearerSent = credential.kind === 'bearer' || credential.kind === 'malformed';
    const needsSubject = match ? !match.route.public : policy.defaultAction === 'authenticated';
    const route = match?.route.pattern;
    try {
      if (!needsSubject) return this.decide(request, clientAddress, policy, match, null, bearerSent);
      const session = this.deps.callers.sessionOf(credential, PROXIED);
      if (session instanceof Promise) {
        return session.then(
          (resolved) => (resolved instanceof ProblemError ? { allowed: false, problem: resolved, route } : this.decide(request, clientAddress, policy, match, resolved, bearerSent)),
          (error: unknown) => this.failure(error, request, route),
        );
      }
      if (session instanceof ProblemError) return { allowed: false, problem: session, route };
      return this.decide(request, clientAddress, policy, match, session, bearerSent);
    } catch (error) {
      return this.failure(error, request, route);
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
          (decision) => this.conclude(decision, request, clientAddress, session, bearerSent, policy, match),
          (error: unknown) => this.failure(error, request, match?.route.pattern),
        );
      }
      return this.conclude(pending, request, clientAddress, session, bearerSent, policy, match);
    } catch (error) {
      return this.failure(error, request, match?.route.pattern);
    }
  }

  private conclude(
    decision: AuthorizationDecision,
    request: PreparedRequest,
    clientAddress: string | undefined,
    session: VerifiedSession | null,
    bearerSent: boolean,
    policy: CompiledPolicy,
    match: RouteMatch | null,
  ): Authorization | Promise<Authorization> {
    const candidates = this.deps.candidate;
    // Decided again by the candidate policy with what this decision loaded; never changes the outcome.
    const candidate =
      candidates == null
        ? null
        : candidates.compare({
            method: request.method,
            path: request.path,
            decision,
            policy,
            subject: session ? { principal: session.record.principal, clientType: session.record.clientType } : null,
          });
    if (decision.shadowed) this.recordShadow(decision, request, clientAddress);
    if (!decision.allowed) {
      this.deps.metrics.decisions.inc({ result: 'deny', step: decision.failedStep ?? 'unknown' });
      const route = decision.route?.pattern;
      if (decision.status === 401) return { allowed: false, problem: authenticationRequired(bearerSent), decision, route, candidate };
      this.recordDenial(decision, request, clientAddress);
      return { allowed: false, problem: problemFromDecision(decision), decision, route, candidate };
    }
    // A shadow denial is counted as shadow_deny above, not as an allow.
    const identity = this.identityOf(request, decision, session, match?.route.audience ?? null);
    if (!decision.shadowed) this.allowed.inc();
    const filter = match?.route.filter;
    if (filter === undefined) return { allowed: true, decision, session, bearerSent, identity, candidate };
    // The compiler allows a filter only with a permission (so a session): anything else keeps nothing.
    if (session === null || decision.permissionCode === null) return { allowed: true, decision, session, bearerSent, identity, candidate, filter: listFilterPlan(filter, { kind: 'NONE' }) };
    // A filtered list: which ids of the filter's type the caller reaches (the decision granted the route's permission).
    const planned = this.deps.engine.coveredFast({ subject: { principal: session.record.principal, clientType: session.record.clientType }, resourceType: filter.type, access: filter.access });
    const allowed = (plan: Parameters<typeof listFilterPlan>[1]): Authorization => ({ allowed: true, decision, session, bearerSent, identity, candidate, filter: listFilterPlan(filter, plan) });
    if (planned instanceof Promise) return planned.then(allowed, (error: unknown) => this.failure(error, request, match?.route.pattern));
    return allowed(planned);
  }

  private failure(error: unknown, request: PreparedRequest, route: string | undefined): Authorization {
    if (error instanceof StoreUnavailableError) return { allowed: false, problem: problems.storeUnavailable(error), route };
    // An uncached grant cannot be loaded while the database is down: 503 with Retry-After, like the store.
    if (error instanceof DatabaseUnavailableError) return { allowed: false, problem: problems.databaseUnavailable(error), route };
    const problem = toProblem(error);
    if (problem.status >= 500) this.deps.logger.error({ err: error, requestId: request.requestId, clientAddress: request.clientAddress }, 'proxy: authorization failed');
    return { allowed: false, problem, route };
  }

  /** The identity headers of docs/http-contract.md for an authorized request (none for anonymous requests). */
  private identityOf(request: PreparedRequest, decision: AuthorizationDecision, session: VerifiedSession | null, audience: string | null): Array<readonly [string, string]> | null {
    const forwarded = forwardedAuthorization(decision);
    if (!session) return forwarded.shadowDenied === null ? null : identityHeaders(null, null, forwarded, null);
    const assertion = this.deps.signAssertion ? this.deps.signAssertion(decision, session, request.method, request.path, request.requestId, audience) : null;
    return identityHeaders(session.record.principal, session.record.sessionId, forwarded, assertion);
  }

  /**
   * The trail's entry for a decision: an anonymous request's (nobody authenticated it, anyone can send any number)
   * goes through the per-minute budget of unauthenticated events (#11.15 for scanners of undeclared routes, and
   * every other anonymous denial or shadow "would deny"); a user's is always recorded.
   */
  private auditOf(decision: AuthorizationDecision): (input: AuditInput) => void {
    return decision.userId === null ? (input) => this.deps.audit.recordUnauthenticated(input) : (input) => this.deps.audit.record(input);
  }

  private recordDenial(decision: AuthorizationDecision, request: PreparedRequest, clientAddress: string | undefined): void {
    this.auditOf(decision)({
      action: 'authz.deny',
      actorUserId: decision.userId,
      targetType: 'route',
      targetId: `${request.method} ${request.path}`,
      outcome: 'denied',
      requestId: request.requestId,
      decisionId: decision.decisionId,
      clientAddress: clientAddress ?? null,
      // With tracing on, the decision is found from its trace and the trace from its decision.
      details: withTrace({ decision }),
    });
  }

  private recordShadow(decision: AuthorizationDecision, request: PreparedRequest, clientAddress: string | undefined): void {
    this.deps.metrics.decisions.inc({ result: 'shadow_deny', step: decision.failedStep ?? 'unknown' });
    this.deps.logger.info({ requestId: request.requestId, decisionId: decision.decisionId, route: decision.route?.id, step: decision.failedStep }, 'policy: shadow route would deny');
    this.auditOf(decision)({
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

/** Audit details with the trace id of the request being decided, when tracing is on. */
function withTrace<T extends object>(details: T): T & { traceId?: string } {
  const traceId = activeTraceId();
  return traceId === null ? details : { ...details, traceId };
}
