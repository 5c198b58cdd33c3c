import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AuditTrail } from '../audit/audit-trail';
import type { LoginService } from '../auth/login-service';
import type { AuthorizationDecision } from '../authz/decision';
import type { DecisionEngine } from '../authz/decision-engine';
import { normalizeRequestTarget } from '../gateway/normalize-target';
import type { ProxyHandler } from '../gateway/proxy-handler';
import type { IamRepository } from '../persistence/iam-repository';
import type { CompiledPolicy } from '../policy/compiled-policy';
import { ProblemError, problems } from '../problem';
import { callerOf, factsOf, stateOf } from './iam-context';
import { decidePermission } from './require-session';
import { assertValid, createBodyValidator } from './validate-body';

export interface AuthorizationRoutesDeps {
  login: LoginService;
  engine: DecisionEngine;
  proxy: ProxyHandler;
  policy: () => CompiledPolicy;
  audit: AuditTrail;
  repository: IamRepository;
  requireSession: Middleware;
  allowPathParameters: boolean;
}

type DiagnosticsBody =
  | { method: string; path: string }
  | { permissionCode: string; domain?: string; clientType?: string; resourceType?: string; resourceId?: string; scopeAccess?: 'READ' | 'WRITE' };

/** Specification §4.2 plus design.md §4.1, §4.4 and §9: profiles, switch, diagnostics, decisions, forward-auth. */
export function registerAuthorizationRoutes(router: Router, deps: AuthorizationRoutesDeps): void {
  const ajv = createBodyValidator();
  const validateDiagnostics = ajv.compile<DiagnosticsBody>({
    oneOf: [
      {
        type: 'object',
        additionalProperties: false,
        required: ['method', 'path'],
        properties: { method: { type: 'string', pattern: '^[A-Za-z]{1,20}$' }, path: { type: 'string', minLength: 1, maxLength: 8192 } },
      },
      {
        type: 'object',
        additionalProperties: false,
        required: ['permissionCode'],
        properties: {
          permissionCode: { type: 'string', minLength: 3, maxLength: 200 },
          domain: { type: 'string', maxLength: 200 },
          clientType: { type: 'string', maxLength: 50 },
          resourceType: { type: 'string', minLength: 1, maxLength: 100 },
          resourceId: { type: 'string', minLength: 1, maxLength: 200 },
          scopeAccess: { enum: ['READ', 'WRITE'] },
        },
        dependencies: { resourceType: ['resourceId'], resourceId: ['resourceType'], scopeAccess: ['resourceType'] },
      },
    ],
  });

  router.get('/authorization/profiles', deps.requireSession, async (ctx) => {
    ctx.body = await deps.login.availableProfiles(callerOf(ctx).record.principal.userId);
  });

  router.post('/authorization/profiles/:profileId/switch', deps.requireSession, async (ctx) => {
    ctx.body = await deps.login.switchProfile(callerOf(ctx), ctx.params.profileId ?? '', factsOf(ctx));
    ctx.set('Cache-Control', 'no-store');
  });

  router.post('/authorization/diagnostics', deps.requireSession, async (ctx) => {
    const caller = callerOf(ctx);
    const body = assertValid(validateDiagnostics, ctx.request.body);
    const subject = { principal: caller.record.principal, clientType: caller.record.clientType };
    const policy = deps.policy();
    let decision: AuthorizationDecision;
    if ('method' in body) {
      const target = normalizeRequestTarget(body.path, { allowPathParameters: deps.allowPathParameters, host: undefined });
      if (!target.ok) throw problems.badRequest(`The proxy would refuse this path: ${target.reason}.`);
      decision = await deps.engine.decideRequest({ method: body.method.toUpperCase(), path: target.path, policy, subject });
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
    ctx.body = decision;
  });

  router.get('/authorization/decisions/:decisionId', deps.requireSession, async (ctx) => {
    const caller = callerOf(ctx);
    await deps.audit.flush();
    const event = await deps.repository.findAuditByDecisionId(ctx.params.decisionId ?? '');
    let visible = event !== null && event.actorUserId === caller.record.principal.userId;
    if (event && !visible) {
      visible = (await decidePermission(deps.engine, caller, 'iam.admin.audit:read')).allowed;
    }
    const decision = event?.details?.decision;
    if (!visible || !decision) throw new ProblemError('IAM_DECISION_NOT_FOUND', 'No such decision is visible to you.');
    ctx.body = decision;
  });

  // design.md §4.4: nginx auth_request, Traefik ForwardAuth, Caddy forward_auth, Envoy ext_authz (HTTP).
  router.all('/authorization/forward-auth', async (ctx) => {
    const prepared = stateOf(ctx).prepared;
    const method = (ctx.get('x-forwarded-method') || ctx.get('x-original-method') || 'GET').toUpperCase();
    const uri = ctx.get('x-forwarded-uri') || ctx.get('x-original-uri');
    if (!uri) throw problems.badRequest('X-Forwarded-Uri (or X-Original-URI) is required.');
    if (!/^[A-Z]{1,20}$/.test(method)) throw problems.badRequest('X-Forwarded-Method is not a method.');
    const target = normalizeRequestTarget(uri, { allowPathParameters: deps.allowPathParameters, host: undefined });
    if (!target.ok) throw problems.badRequest(target.reason);
    const outcome = await deps.proxy.authorize({ ...prepared, method, path: target.path, search: target.search }, prepared.clientAddress ?? undefined);
    if (!outcome.allowed) throw outcome.problem;
    for (const [name, value] of deps.proxy.identityHeadersFor({ ...prepared, method, path: target.path, search: target.search }, outcome) ?? []) ctx.set(name, value);
    ctx.set('X-Request-Id', prepared.requestId);
    ctx.status = 200;
    ctx.body = '';
  });
}
