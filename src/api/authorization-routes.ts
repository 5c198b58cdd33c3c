import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AuditTrail } from '../audit/audit-trail';
import type { LoginService } from '../auth/login-service';
import { decisionView, type AuthorizationDecision, type DecisionAudience } from '../authz/decision';
import { problemFromDecision, type DecisionEngine } from '../authz/decision-engine';
import { ADMIN_PERMISSIONS } from './admin-routes';
import { normalizeRequestTarget } from '../http/normalize-target';
import type { AuditRepository } from '../domain/iam-repository';
import type { CompiledPolicy } from '../policy/compiled-policy';
import { ProblemError, problems } from '../domain/problem';
import { callerOf, factsOf, stateOf } from './iam-context';
import { sessionCookie } from '../http/session-cookie';
import type { IamPrincipal } from '../domain/principal';
import { registerForwardAuthRoute } from './forward-auth-route';
import { decidePermission } from './require-session';
import { DiagnosticsPermissionCheck, DiagnosticsRequestTarget, type DiagnosticsBody } from './schemas/requests';
import { assertValid, createBodyValidator } from './validate-body';

export interface AuthorizationRoutesDeps {
  login: LoginService;
  engine: DecisionEngine;
  policy: () => CompiledPolicy;
  audit: AuditTrail;
  repository: Pick<AuditRepository, 'findAuditByDecisionId'>;
  requireSession: Middleware;
  allowPathParameters: boolean;
  /** "Explain as this user" (diagnostics with `userId`): the subject a login of that user would have. */
  subjectOf: (userId: string, clientType: string) => Promise<{ principal: IamPrincipal; clientType: string }>;
  /** `iam.session-cookie.secure`: which cookie a cookie-authenticated profile switch sets. */
  secureCookie: boolean;
}

/** docs/http-contract.md: profiles, switch, diagnostics, decisions, forward-auth. */
export function registerAuthorizationRoutes(router: Router, deps: AuthorizationRoutesDeps): void {
  const ajv = createBodyValidator();
  const validateCheck = ajv.compile<DiagnosticsBody>(DiagnosticsPermissionCheck);
  const validateTarget = ajv.compile<DiagnosticsBody>(DiagnosticsRequestTarget);
  /**
   * The body is one of two forms (the `DiagnosticsRequest` oneOf): it is checked against the form it uses, so a
   * mistake gets that form's errors only, not both forms' plus "must match exactly one schema".
   */
  const assertDiagnosticsBody = (body: unknown): DiagnosticsBody => {
    if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
      if ('permissionCode' in body) return assertValid(validateCheck, body);
      if ('method' in body || 'path' in body) return assertValid(validateTarget, body);
    }
    throw problems.validation([{ pointer: '/', message: 'must be an object with method and path (a request to explain) or with permissionCode (a permission check)' }]);
  };

  router.get('/authorization/profiles', deps.requireSession, async (ctx) => {
    ctx.body = await deps.login.availableProfiles(callerOf(ctx).record.principal.userId);
  });

  router.post('/authorization/profiles/:profileId/switch', deps.requireSession, async (ctx) => {
    const result = await deps.login.switchProfile(callerOf(ctx), ctx.params.profileId ?? '', factsOf(ctx));
    ctx.set('Cache-Control', 'no-store');
    if (stateOf(ctx).viaCookie) {
      // A browser session stays in its HttpOnly cookie: the new token goes there, never into the page's script.
      ctx.set('Set-Cookie', sessionCookie(deps.secureCookie, result.accessToken));
      const { accessToken: _kept, ...rest } = result;
      ctx.body = rest;
      return;
    }
    ctx.body = result;
  });

  router.post('/authorization/diagnostics', deps.requireSession, async (ctx) => {
    const caller = callerOf(ctx);
    const body = assertDiagnosticsBody(ctx.request.body);
    let subject = { principal: caller.record.principal, clientType: caller.record.clientType };
    const policy = deps.policy();
    let decision: AuthorizationDecision;
    // A diagnostics administrator sees the full trace; anyone else their own view of it (decisionView).
    const administrator = await decidePermission(deps.engine, caller, ADMIN_PERMISSIONS.diagnosticsRead);
    const audience: DecisionAudience = administrator.allowed ? 'full' : 'caller';
    if ('method' in body && body.userId !== undefined) {
      // Explaining another user's access is an administrator's question.
      if (!administrator.allowed) throw problemFromDecision(administrator);
      subject = await deps.subjectOf(body.userId, body.clientType ?? 'WEB');
    }
    if ('method' in body) {
      const target = normalizeRequestTarget(body.path, { allowPathParameters: deps.allowPathParameters, host: undefined });
      if (!target.ok) throw problems.badRequest(`The proxy would refuse this path: ${target.reason}.`);
      decision = await deps.engine.decideRequest({ method: body.method.toUpperCase(), path: target.path, policy, subject });
    } else if (!administrator.allowed && body.resourceType !== undefined && !policy.declaresResource(body.permissionCode, body.resourceType)) {
      // For the caller's own principal, as the specification gives it to every session — but pairing any permission
      // with any resource type and id would make the resolvers an oracle (which task belongs to which project): a
      // pair no route declares is answered ROUTE_NOT_DECLARED without asking a resolver.
      decision = deps.engine.notDeclared(subject, body.permissionCode, { type: body.resourceType, id: body.resourceId ?? '', access: body.scopeAccess ?? 'READ' });
    } else {
      decision = await deps.engine.decide({
        subject,
        permissionCode: body.permissionCode,
        resource: body.resourceType
          ? { type: body.resourceType, id: body.resourceId ?? '', access: body.scopeAccess ?? 'READ', resolve: 'optional' }
          : null,
        ...(body.domain !== undefined ? { expectedDomain: body.domain } : {}),
        ...(body.clientType !== undefined ? { expectedClientType: body.clientType } : {}),
        resources: policy.resources,
      });
    }
    ctx.body = decisionView(decision, audience);
  });

  router.get('/authorization/decisions/:decisionId', deps.requireSession, async (ctx) => {
    const caller = callerOf(ctx);
    await deps.audit.flush();
    const event = await deps.repository.findAuditByDecisionId(ctx.params.decisionId ?? '');
    // An auditor sees every decision in full; the user it concerns sees their own view of it (decisionView).
    const auditor = event !== null && (await decidePermission(deps.engine, caller, ADMIN_PERMISSIONS.auditRead)).allowed;
    const visible = auditor || (event !== null && event.actorUserId === caller.record.principal.userId);
    const decision = event?.details?.decision as AuthorizationDecision | undefined;
    if (!visible || !decision) throw new ProblemError('IAM_DECISION_NOT_FOUND', 'No such decision is visible to you.');
    const shown = decisionView(decision, auditor ? 'full' : 'caller');
    // The trace of the request that was decided, when tracing was on: the decision leads to the trace.
    const traceId = event?.details?.traceId;
    ctx.body = typeof traceId === 'string' ? { ...shown, traceId } : shown;
  });

  registerForwardAuthRoute(router);
}
