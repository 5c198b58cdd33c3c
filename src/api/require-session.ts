import type { Middleware } from 'koa';
import type { DecisionEngine } from '../authz/decision-engine';
import { problemFromDecision } from '../authz/decision-engine';
import { requestCredential } from '../http/request-credential';
import { problems } from '../domain/problem';
import type { SessionService, VerifiedSession } from '../sessions/session-service';
import type { AuthorizationDecision } from '../authz/decision';
import { callerOf, stateOf } from './iam-context';

/**
 * Protected /iam endpoints (docs/http-contract.md): a valid bearer token from the Authorization header (never the
 * query string) or, without one, the session cookie — refused cross-site for unsafe methods (403
 * IAM_CSRF_REJECTED) — else 401 IAM_UNAUTHENTICATED with a Bearer challenge.
 */
export function requireSession(sessions: Pick<SessionService, 'verify'>, trustedOrigins: ReadonlySet<string> = new Set()): Middleware {
  return async (ctx, next) => {
    const credential = requestCredential(stateOf(ctx).prepared, { method: ctx.method, trustedOrigins });
    if (credential.kind === 'malformed') throw problems.unauthenticated('The bearer token is malformed.', true);
    if (credential.kind === 'cookie' && credential.crossSite) throw problems.crossSiteCookie();
    if (credential.kind === 'none') throw problems.unauthenticated('A bearer access token (or the session cookie) is required.', false);
    const token = credential.token;
    const session = await sessions.verify(token);
    if (!session) throw problems.unauthenticated('The access token is invalid, expired or revoked.', true);
    stateOf(ctx).session = session;
    stateOf(ctx).viaCookie = credential.kind === 'cookie';
    await next();
  };
}

/** The caller's active-profile decision for a permission on no particular resource. */
export function decidePermission(engine: Pick<DecisionEngine, 'decide'>, caller: VerifiedSession, permissionCode: string): Promise<AuthorizationDecision> {
  return engine.decide({
    subject: { principal: caller.record.principal, clientType: caller.record.clientType },
    permissionCode,
    resource: null,
    resources: {},
  });
}

/** Admin endpoints: the caller's active profile must grant `permissionCode` (docs/http-contract.md), else 403. */
export function requirePermission(engine: Pick<DecisionEngine, 'decide'>, permissionCode: string): Middleware {
  return async (ctx, next) => {
    const decision = await decidePermission(engine, callerOf(ctx), permissionCode);
    if (!decision.allowed) throw problemFromDecision(decision);
    await next();
  };
}
