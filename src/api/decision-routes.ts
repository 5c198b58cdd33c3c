import type { RouterMiddleware } from '@koa/router';
import type { Context } from 'koa';
import type { AuditTrail } from '../audit/audit-trail';
import { PROTECTED, type Caller, type CallerAccepts, type CallerStep } from '../auth/caller';
import type { AuthorizationDecision } from '../authz/decision';
import { decideEach, problemFromDecision, type DecisionEngine, type DecisionSubject } from '../authz/decision-engine';
import type { ResolutionBudget } from '../authz/resolution-budget';
import type { SessionRepository } from '../domain/iam-repository';
import { ProblemError } from '../domain/problem';
import { requestCredential } from '../http/request-credential';
import type { GatewayMetrics } from '../observability/metrics';
import type { CompiledPolicy } from '../policy/compiled-policy';
import type { SessionService } from '../sessions/session-service';
import { factsOf, stateOf } from './iam-context';
import { BODY_FAILURES, NO_STORE, problem, response } from './openapi-builders';
import { decidePermission } from './require-session';
import { route, type BodyReader, type RouteDeclaration } from './route-declaration';
import { CheckRequest, PlanRequest, type CheckBody, type PlanBody } from './schemas/requests';
import { CheckResponse, PlanResponse } from './schemas/responses';

/** The permission a caller needs to name another subject in the body (batch jobs, other services). */
export const DECISIONS_CHECK_PERMISSION = 'iam.authorization.decisions:check';

export interface DecisionRoutesDeps {
  engine: DecisionEngine;
  /** The budget every call's resolutions go through, whatever the credential (never the proxy's resolvers). */
  resolutions: Pick<ResolutionBudget, 'forCall'>;
  policy: () => CompiledPolicy;
  /** The caller: their bearer or cookie, or the gateway's own `X-IAM-Assertion` a host sends back as the bearer. */
  callers: Pick<CallerStep, 'callerOf'>;
  /** A `subject` session the body names must still live. */
  sessions: Pick<SessionService, 'liveSession'>;
  repository: Pick<SessionRepository, 'getSession'>;
  /** The subject a login of `userId` with `clientType` would have (404 for an unknown user). */
  subjectOf: (userId: string, clientType: string) => Promise<{ principal: DecisionSubject['principal']; clientType: string }>;
  audit: Pick<AuditTrail, 'record'>;
  metrics: Pick<GatewayMetrics, 'hostChecks'>;
  trustedOrigins: ReadonlySet<string>;
}

/** What the decisions accept as their caller: what a protected endpoint does, and the gateway's own assertion. */
const HOST_DECISIONS: CallerAccepts = { ...PROTECTED, assertion: true };

/** What check and plan answer besides their result: the subject's refusals, then the body's (the session's come from the access). */
const SUBJECT_FAILURES = {
  '403': problem(403, ['IAM_ACCESS_DENIED', 'IAM_CSRF_REJECTED'], 'A `subject` named without `iam.authorization.decisions:check`, or a cross-site cookie request.'),
  '404': problem(404, ['IAM_SESSION_NOT_FOUND', 'IAM_NOT_FOUND'], 'The `subject` session is not live, or its user unknown.'),
  ...BODY_FAILURES,
};

/**
 * `POST /iam/authorization/check` and `/plan` (docs/host-integration.md): the engine the proxy enforces with,
 * offered to the host — for lists (`plan`: which resources of a type) and logic a route cannot express (`check`).
 * The subject is the caller (their bearer or cookie), the user of an `X-IAM-Assertion` a host sends back, or, for a
 * caller holding `iam.authorization.decisions:check`, the `subject` the body names: each route checks its credential
 * itself ({@link credentialOf}), declared once (route-declaration.ts).
 */
export const decisionRoutes: ReadonlyArray<RouteDeclaration<DecisionRoutesDeps>> = [
  route({
    method: 'post',
    path: '/iam/authorization/check',
    access: { guard: 'own', security: 'session' },
    body: { schema: CheckRequest },
    permissions: [DECISIONS_CHECK_PERMISSION],
    response: { schema: CheckResponse, description: 'One result per check, in order.', headers: NO_STORE },
    operation: {
      operationId: 'checkDecisions',
      summary: 'Decisions for the host: 1–100 checks, answered in order',
      description:
        'Each answer is exactly the decision the proxy makes for a route with that permission and resource (same steps, resolvers and `resolve: optional` semantics; ' +
        '`status` is what the proxy would answer), recorded with its `decisionId`. A resource named twice is resolved once. The subject: the caller (their bearer or cookie), ' +
        'the user of an `X-IAM-Assertion` a host sends back as the bearer (its session must still live), or, for a caller granted `iam.authorization.decisions:check`, the ' +
        '`subject` of the body. With the caller\'s own credential a resource is resolved only for a (permission, resource type) pair some policy route declares; any other ' +
        'pair is answered `ROUTE_NOT_DECLARED` without asking a resolver. A resolver that is down makes that result 502; the others still answer. ' +
        'Resolutions are bounded, whatever the credential: at most `iam.authz.caller-resolutions.per-call` distinct resources per call and ' +
        '`iam.authz.caller-resolutions.in-flight-per-caller` waiting at once per caller (the user behind the credential); a check beyond either answers ' +
        '`status` 429, `failedStep` `RESOLUTION_BUDGET_EXCEEDED`, without asking a resolver.',
      tags: ['authorization'],
      responses: {
        '400': response('ValidationFailed'),
        ...SUBJECT_FAILURES,
      },
    },
    handler: checkDecisions,
   }),
  route({
    method: 'post',
    path: '/iam/authorization/plan',
    access: { guard: 'own', security: 'session' },
    body: { schema: PlanRequest },
    permissions: [DECISIONS_CHECK_PERMISSION],
    response: { schema: PlanResponse, description: 'The plan.', headers: NO_STORE },
    operation: {
      operationId: 'planResources',
      summary: 'Which resources of a type the subject reaches, to filter a list in the host\'s own query',
      description:
        '`ALL` (an unscoped profile, or a `*` scope of the type covering the access), `NONE` (the permission not granted, no valid profile, or no covering scope), or `SOME` ' +
        'with the covering scopes\' `scopeRefId`s (a WRITE scope covers READ). Only scopes of `resourceType` count. The subject as for `/iam/authorization/check`. No resolver is asked.',
      tags: ['authorization'],
      responses: {
        '400': response('ValidationFailed'),
        ...SUBJECT_FAILURES,
      },
    },
    handler: planResources,
   }),
];

function checkDecisions(deps: DecisionRoutesDeps, request: BodyReader<CheckBody>): RouterMiddleware {
  return async (ctx) => {
    const credential = await credentialOf(ctx, deps);
    const body = request.read(ctx);
    const { subject, sessionId } = await subjectOf(credential, body.subject, deps);
    const policy = deps.policy();
    // One engine per call: a resource two checks name is resolved once, and the call's resolutions are charged to the
    // user behind the credential (the service, when it names a subject), with their own budget and pool.
    const engine = deps.engine.perCall(deps.resolutions.forCall(credential.session.record.principal.userId));
    // Without a promise per check when none has to wait (warm grants, no resolver).
    const decisions = await decideEach(body.checks, (check) => {
      const resource = check.resource;
      // No oracle: with their own credential a caller has a resource resolved only as some route would.
      if (resource !== undefined && credential.via !== 'assertion' && body.subject === undefined && !policy.declaresResource(check.permissionCode, resource.type)) {
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
    // Over the resolution budget says nothing about access: an error, like a resolver that is down.
    for (const decision of decisions) counts[decision.allowed ? 'allowed' : decision.status >= 500 || decision.failedStep === 'RESOLUTION_BUDGET_EXCEEDED' ? 'error' : 'denied']++;
    // One row for the call, holding every decision (allowed ones too: every decisionId a host gets resolves later):
    // up to 100 checks are one durable write, not 100 (domain/recorded-decisions.ts).
    deps.audit.record({
      action: 'authz.check',
      actorUserId: subject.principal.userId,
      targetType: 'permission',
      targetId: [...new Set(decisions.map((decision) => decision.permissionCode))].join(' '),
      outcome: counts.allowed === decisions.length ? 'success' : 'denied',
      requestId: facts.requestId,
      clientAddress: facts.clientAddress,
      details: { decisions, ...counts },
    });
    for (const result of ['allowed', 'denied', 'error'] as const) if (counts[result] > 0) deps.metrics.hostChecks.inc({ result }, counts[result]);
    respond(ctx, {
      subject: subjectView(subject, sessionId),
      results: decisions.map((decision: AuthorizationDecision) => ({ allowed: decision.allowed, status: decision.status, failedStep: decision.failedStep, decisionId: decision.decisionId })),
    });
  };
}

function planResources(deps: DecisionRoutesDeps, request: BodyReader<PlanBody>): RouterMiddleware {
  return async (ctx) => {
    const credential = await credentialOf(ctx, deps);
    const body = request.read(ctx);
    const { subject, sessionId } = await subjectOf(credential, body.subject, deps);
    // A plan never calls a resolver: it reads the profile's own scopes.
    const { plan } = await deps.engine.plan({ subject, permissionCode: body.permissionCode, resourceType: body.resourceType, access: body.access });
    respond(ctx, { ...plan, subject: subjectView(subject, sessionId) });
  };
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
async function credentialOf(ctx: Context, deps: DecisionRoutesDeps): Promise<Caller> {
  const credential = requestCredential(stateOf(ctx).prepared, { method: ctx.method, trustedOrigins: deps.trustedOrigins });
  const caller = await deps.callers.callerOf(credential, HOST_DECISIONS);
  if (caller instanceof ProblemError) throw caller;
  if (caller === null) throw new Error('decisions: an anonymous caller was accepted');
  // The assertion's session is the host's user, not who called: the request's own session is the caller's only.
  if (caller.via !== 'assertion') stateOf(ctx).session = caller.session;
  return caller;
}

/** Whom the decisions are about: the caller's session, or the `subject` of the body (for holders of the permission). */
async function subjectOf(credential: Caller, named: CheckBody['subject'], deps: DecisionRoutesDeps): Promise<{ subject: DecisionSubject; sessionId: string | null }> {
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
