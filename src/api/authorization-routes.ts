import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AuditTrail } from '../audit/audit-trail';
import type { LoginService } from '../auth/login-service';
import { decisionView, type AuthorizationDecision, type DecisionAudience } from '../authz/decision';
import { problemFromDecision, type DecisionEngine } from '../authz/decision-engine';
import type { ResolutionBudget } from '../authz/resolution-budget';
import { ADMIN_PERMISSIONS } from './admin-routes';
import { normalizeRequestTarget } from '../http/normalize-target';
import type { AuditRepository } from '../domain/iam-repository';
import { findRecordedDecision } from '../domain/recorded-decisions';
import type { CompiledPolicy } from '../policy/compiled-policy';
import { ProblemError, problems } from '../domain/problem';
import { callerOf, factsOf, stateOf } from './iam-context';
import { sessionCookie } from '../http/session-cookie';
import type { IamPrincipal } from '../domain/principal';
import { decidePermission } from './require-session';
import { Type } from '@sinclair/typebox';
import { DiagnosticsRequest } from './schemas/requests';
import { AuthenticationResult, AvailableProfile, CookieSwitchResult, Decision } from './schemas/responses';
import { BODY_FAILURES, header, param, problem, response } from './openapi-builders';
import { registerDeclaredRoutes, route, type RouteDeclaration } from './route-declaration';

export interface AuthorizationRoutesDeps {
  login: LoginService;
  engine: DecisionEngine;
  /** The budget a caller's diagnostics resolve through (never the proxy's resolvers). */
  resolutions: Pick<ResolutionBudget, 'forCall'>;
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

type AuthorizationContext = AuthorizationRoutesDeps;

/**
 * docs/http-contract.md: profiles, switch, diagnostics, decisions, each declared once (route-declaration.ts): a session
 * is all they need (diagnostics and decisions show more to a caller holding an admin permission, asked inside).
 */
export const authorizationRoutes: ReadonlyArray<RouteDeclaration<AuthorizationContext>> = [
  route({
    method: 'get',
    path: '/iam/authorization/profiles',
    access: 'session',
    response: { schema: Type.Array(AvailableProfile), description: 'Available profiles.' },
    operation: {
      operationId: 'listProfiles',
      summary: 'The caller\'s enabled, non-revoked profiles with their scopes',
      tags: ['authorization'],
      responses: {
      },
    },
    handler: ({ login }) => async (ctx) => {
      ctx.body = await login.availableProfiles(callerOf(ctx).record.principal.userId);
    },
  }),
  route({
    method: 'post',
    path: '/iam/authorization/profiles/{profileId}/switch',
    access: 'session',
    pathParameters: [param('ProfileId')],
    response: { schema: Type.Union([AuthenticationResult, CookieSwitchResult]), description: 'A new session under that profile.', headers: { 'Cache-Control': header('NoStore') } },
    operation: {
      operationId: 'switchProfile',
      summary: 'Issue a new token acting under another of the caller\'s profiles',
      description:
        'The original token keeps its own profile, unchanged. Called with the session cookie (a browser), the new session goes into the cookie (`Set-Cookie`) and the body carries no `accessToken`: a page script never sees a token.',
      tags: ['authorization'],
      responses: {
        '404': problem(404, ['IAM_PROFILE_NOT_FOUND'], 'Unknown, another user\'s, disabled or revoked.'),
      },
    },
    handler: ({ login, secureCookie }) => async (ctx) => {
      const result = await login.switchProfile(callerOf(ctx), ctx.params.profileId ?? '', factsOf(ctx));
      ctx.set('Cache-Control', 'no-store');
      if (stateOf(ctx).viaCookie) {
        // A browser session stays in its HttpOnly cookie: the new token goes there, never into the page's script.
        ctx.set('Set-Cookie', sessionCookie(secureCookie, result.accessToken));
        const { accessToken: _kept, ...rest } = result;
        ctx.body = rest;
        return;
      }
      ctx.body = result;
    },
  }),
  route({
    method: 'post',
    path: '/iam/authorization/diagnostics',
    access: 'session',
    body: { schema: DiagnosticsRequest },
    permissions: [ADMIN_PERMISSIONS.diagnosticsRead],
    response: { schema: Decision, description: 'The decision (allowed or not).' },
    operation: {
      operationId: 'diagnose',
      summary: 'Explain a decision with the real engine',
      description:
        'Runs the same decision the proxy enforces, for the caller\'s session, and returns it whatever the outcome. ' +
        '`{method, path}` and the `{permissionCode, domain?, clientType?, resourceType?, resourceId?, scopeAccess?}` form are open to every session for its own principal; ' +
        'without `iam.admin.diagnostics:read` a (permission, resource type) pair no policy route declares is answered `ROUTE_NOT_DECLARED` without asking a resolver ' +
        '(no resolver oracle). `userId` (explain as another user) needs `iam.admin.diagnostics:read`.',
      tags: ['authorization'],
      responses: {
        '400': problem(400, ['IAM_VALIDATION_FAILED', 'IAM_BAD_REQUEST'], 'An invalid body, or a `path` the proxy would refuse to interpret.'),
        '403': response('AccessDenied'),
        ...BODY_FAILURES,
      },
    },
    handler: (deps, request) => async (ctx) => {
      const caller = callerOf(ctx);
      const body = request.read(ctx);
      let subject = { principal: caller.record.principal, clientType: caller.record.clientType };
      const policy = deps.policy();
      // Charged to the caller, whoever the subject: explaining as another user spends the administrator's budget.
      const engine = deps.engine.perCall(deps.resolutions.forCall(caller.record.principal.userId));
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
        decision = await engine.decideRequest({ method: body.method.toUpperCase(), path: target.path, policy, subject });
      } else if (!administrator.allowed && body.resourceType !== undefined && !policy.declaresResource(body.permissionCode, body.resourceType)) {
        // For the caller's own principal, as the specification gives it to every session — but pairing any permission
        // with any resource type and id would make the resolvers an oracle (which task belongs to which project): a
        // pair no route declares is answered ROUTE_NOT_DECLARED without asking a resolver.
        decision = deps.engine.notDeclared(subject, body.permissionCode, { type: body.resourceType, id: body.resourceId ?? '', access: body.scopeAccess ?? 'READ' });
      } else {
        decision = await engine.decide({
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
    },
   }),
  route({
    method: 'get',
    path: '/iam/authorization/decisions/{decisionId}',
    access: 'session',
    permissions: [ADMIN_PERMISSIONS.auditRead],
    pathParameters: [{ name: 'decisionId', in: 'path', required: true, schema: { type: 'string', minLength: 1 } }],
    response: { schema: Decision, description: 'The decision as it was made.' },
    operation: {
      operationId: 'getDecision',
      summary: 'The decision behind a denial',
      description: 'Visible to the user it concerns, and to callers granted `iam.admin.audit:read`.',
      tags: ['authorization'],
      responses: {
        '404': problem(404, ['IAM_DECISION_NOT_FOUND'], 'Unknown, or not visible to the caller.'),
      },
    },
    handler: (deps) => async (ctx) => {
      const caller = callerOf(ctx);
      await deps.audit.flush();
      const decisionId = ctx.params.decisionId ?? '';
      const event = await deps.repository.findAuditByDecisionId(decisionId);
      // An auditor sees every decision in full; the user it concerns sees their own view of it (decisionView).
      const auditor = event !== null && (await decidePermission(deps.engine, caller, ADMIN_PERMISSIONS.auditRead)).allowed;
      const visible = auditor || (event !== null && event.actorUserId === caller.record.principal.userId);
      // The row's own decision, or the one of this id among a check call's.
      const decision = event === null ? null : (findRecordedDecision(event, decisionId) as AuthorizationDecision | null);
      if (!visible || !decision) throw new ProblemError('IAM_DECISION_NOT_FOUND', 'No such decision is visible to you.');
      const shown = decisionView(decision, auditor ? 'full' : 'caller');
      // The trace of the request that was decided, when tracing was on: the decision leads to the trace.
      const traceId = event?.details?.traceId;
      ctx.body = typeof traceId === 'string' ? { ...shown, traceId } : shown;
    },
  }),
];

/** Registers {@link authorizationRoutes}. */
export function registerAuthorizationRoutes(router: Router, deps: AuthorizationRoutesDeps): void {
  registerDeclaredRoutes(router, authorizationRoutes, deps, { requireSession: deps.requireSession, engine: deps.engine });
}
