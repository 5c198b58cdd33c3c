import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AuditTrail } from '../audit/audit-trail';
import type { AuthorizationDecision } from '../authz/decision';
import { decideEach, problemFromDecision, type DecisionEngine, type DecisionSubject } from '../authz/decision-engine';
import type { SessionRepository } from '../domain/iam-repository';
import { ProblemError, problems } from '../domain/problem';
import type { VerifiedAssertion } from '../gateway/assertion-signer';
import { requestCredential } from '../http/request-credential';
import type { GatewayMetrics } from '../observability/metrics';
import type { CompiledPolicy } from '../policy/compiled-policy';
import type { SessionService, VerifiedSession } from '../sessions/session-service';
import { factsOf, stateOf } from './iam-context';
import { decidePermission } from './require-session';
import { CheckRequest, PlanRequest, type CheckBody, type PlanBody } from './schemas/requests';
import { assertValid, createBodyValidator } from './validate-body';

/** The permission a caller needs to name another subject in the body (batch jobs, other services). */
export const DECISIONS_CHECK_PERMISSION = 'iam.authorization.decisions:check';

export interface DecisionRoutesDeps {
  engine: DecisionEngine;
  policy: () => CompiledPolicy;
  /** The caller's bearer or cookie: gateway sessions, and provider JWTs when accepted. */
  bearers: Pick<SessionService, 'verify'>;
  sessions: Pick<SessionService, 'liveSession'>;
  /** The gateway's own `X-IAM-Assertion`, sent back by a host as the bearer; null when assertions are off. */
  assertions: { verify(token: string): VerifiedAssertion | null } | null;
  repository: Pick<SessionRepository, 'getSession'>;
  /** The subject a login of `userId` with `clientType` would have (404 for an unknown user). */
  subjectOf: (userId: string, clientType: string) => Promise<{ principal: DecisionSubject['principal']; clientType: string }>;
  audit: Pick<AuditTrail, 'record'>;
  metrics: Pick<GatewayMetrics, 'hostChecks'>;
  trustedOrigins: ReadonlySet<string>;
}

/** How the caller proved who they are: their own credential, or the assertion a host received for them. */
type Credential = { kind: 'own'; session: VerifiedSession } | { kind: 'assertion'; session: VerifiedSession };

/**
 * `POST /iam/authorization/check` and `/plan` (docs/host-integration.md): the engine the proxy enforces with,
 * offered to the host — for lists (`plan`: which resources of a type) and logic a route cannot express (`check`).
 * The subject is the caller (their bearer or cookie), the user of an `X-IAM-Assertion` a host sends back, or, for a
 * caller holding `iam.authorization.decisions:check`, the `subject` the body names.
 */
export function registerDecisionRoutes(router: Router, deps: DecisionRoutesDeps): void {
  const ajv = createBodyValidator();
  const validateCheck = ajv.compile<CheckBody>(CheckRequest);
  const validatePlan = ajv.compile<PlanBody>(PlanRequest);

  router.post('/authorization/check', async (ctx) => {
    const credential = await credentialOf(ctx, deps);
    const body = assertValid(validateCheck, ctx.request.body);
    const { subject, sessionId } = await subjectOf(credential, body.subject, deps);
    const policy = deps.policy();
    // One engine per call: a resource two checks name is resolved once.
    const engine = deps.engine.perCall();
    // Without a promise per check when none has to wait (warm grants, no resolver).
    const decisions = await decideEach(body.checks, (check) => {
      const resource = check.resource;
      // No oracle: with their own credential a caller has a resource resolved only as some route would.
      if (resource !== undefined && credential.kind === 'own' && body.subject === undefined && !policy.declaresResource(check.permissionCode, resource.type)) {
        return engine.notDeclared(subject, check.permissionCode, resource);
      }
      return engine.decideFast({
        subject,
        permissionCode: check.permissionCode,
        resource: resource === undefined ? null : { type: resource.type, id: resource.id, access: resource.access, resolve: 'optional' },
        resources: policy.resources,
      });
    });
    const facts = factsOf(ctx);
    const counts = { allowed: 0, denied: 0, error: 0 };
    for (const decision of decisions) {
      counts[decision.allowed ? 'allowed' : decision.status >= 500 ? 'error' : 'denied']++;
      // Recorded like a proxy decision, allowed ones too: every decisionId a host gets resolves later.
      deps.audit.record({
        action: 'authz.check',
        actorUserId: subject.principal.userId,
        targetType: 'permission',
        targetId: `${decision.permissionCode}${decision.resource ? ` ${decision.resource.type} ${decision.resource.id}` : ''}`,
        outcome: decision.allowed ? 'success' : 'denied',
        requestId: facts.requestId,
        decisionId: decision.decisionId,
        clientAddress: facts.clientAddress,
        details: { decision },
      });
    }
    for (const result of ['allowed', 'denied', 'error'] as const) if (counts[result] > 0) deps.metrics.hostChecks.inc({ result }, counts[result]);
    respond(ctx, {
      subject: subjectView(subject, sessionId),
      results: decisions.map((decision: AuthorizationDecision) => ({ allowed: decision.allowed, status: decision.status, failedStep: decision.failedStep, decisionId: decision.decisionId })),
    });
  });

  router.post('/authorization/plan', async (ctx) => {
    const credential = await credentialOf(ctx, deps);
    const body = assertValid(validatePlan, ctx.request.body);
    const { subject, sessionId } = await subjectOf(credential, body.subject, deps);
    // A plan never calls a resolver: it reads the profile's own scopes.
    const { plan } = await deps.engine.plan({ subject, permissionCode: body.permissionCode, resourceType: body.resourceType, access: body.access });
    respond(ctx, { ...plan, subject: subjectView(subject, sessionId) });
  });
}

function respond(ctx: Context, body: unknown): void {
  ctx.status = 200;
  // The JSON Koa would send, with its type set here: Koa's own lookup of the type costs more than the plan itself.
  ctx.set('Content-Type', 'application/json; charset=utf-8');
  ctx.set('Cache-Control', 'no-store');
  ctx.body = JSON.stringify(body);
}

function subjectView(subject: DecisionSubject, sessionId: string | null): { userId: string; profileId: string | null; sessionId: string | null } {
  return { userId: subject.principal.userId, profileId: subject.principal.activeProfileId, sessionId };
}

/**
 * The caller: an `X-IAM-Assertion` this gateway signed (as the bearer) whose session still lives, or the caller's own
 * bearer or cookie (a cookie refused cross-site, as every unsafe cookie request: 403). Else 401.
 */
async function credentialOf(ctx: Context, deps: DecisionRoutesDeps): Promise<Credential> {
  const credential = requestCredential(stateOf(ctx).prepared, { method: ctx.method, trustedOrigins: deps.trustedOrigins });
  if (credential.kind === 'malformed') throw problems.unauthenticated('The bearer token is malformed.', true);
  if (credential.kind === 'bearer' && deps.assertions !== null) {
    const assertion = deps.assertions.verify(credential.token);
    if (assertion !== null) {
      // The assertion outlives nothing: its session must still be live (a logout or revocation refuses it at once).
      const session = await deps.sessions.liveSession(assertion.userId, assertion.sessionId);
      if (session === null) throw problems.unauthenticated('The session of this assertion has ended.', true);
      return { kind: 'assertion', session };
    }
  }
  if (credential.kind === 'cookie' && credential.crossSite) throw problems.crossSiteCookie();
  if (credential.kind === 'none') throw problems.unauthenticated('A bearer token, the session cookie or an X-IAM-Assertion (as the bearer) is required.', false);
  const token = credential.token;
  const session = await deps.bearers.verify(token);
  if (!session) throw problems.unauthenticated('The access token is invalid, expired or revoked.', true);
  stateOf(ctx).session = session;
  return { kind: 'own', session };
}

/** Whom the decisions are about: the caller's session, or the `subject` of the body (for holders of the permission). */
async function subjectOf(credential: Credential, named: CheckBody['subject'], deps: DecisionRoutesDeps): Promise<{ subject: DecisionSubject; sessionId: string | null }> {
  const caller = credential.session;
  if (named === undefined) return { subject: { principal: caller.record.principal, clientType: caller.record.clientType }, sessionId: caller.record.sessionId };
  const admitted = await decidePermission(deps.engine, caller, DECISIONS_CHECK_PERMISSION);
  if (!admitted.allowed) throw problemFromDecision(admitted);
  if ('sessionId' in named) {
    const stored = await deps.repository.getSession(named.sessionId);
    const live = stored === null ? null : await deps.sessions.liveSession(stored.userId, stored.sessionId);
    if (live === null) throw new ProblemError('IAM_SESSION_NOT_FOUND', `No live session "${named.sessionId}".`);
    return { subject: { principal: live.record.principal, clientType: live.record.clientType }, sessionId: live.record.sessionId };
  }
  const subject = await deps.subjectOf(named.userId, named.clientType ?? 'WEB');
  return { subject, sessionId: null };
}
