import type { Middleware } from 'koa';
import type { DecisionEngine } from '../authz/decision-engine';
import { problemFromDecision } from '../authz/decision-engine';
import { requestCredential } from '../http/request-credential';
import { ProblemError } from '../domain/problem';
import type { VerifiedSession } from '../sessions/session-service';
import { PROTECTED, type CallerAccepts, type CallerStep } from '../auth/caller';
import type { AuthorizationDecision } from '../authz/decision';
import { callerOf, stateOf } from './iam-context';

/**
 * Protected /iam endpoints (docs/http-contract.md): the caller of the request's credential (auth/caller.ts) — a
 * valid bearer token from the Authorization header (never the query string) or, without one, the session cookie,
 * refused cross-site for unsafe methods (403 IAM_CSRF_REJECTED) — else 401 IAM_UNAUTHENTICATED with a Bearer challenge.
 */
export function requireSession(callers: Pick<CallerStep, 'callerOf'>, trustedOrigins: ReadonlySet<string> = new Set(), accepts: CallerAccepts = PROTECTED): Middleware {
  return async (ctx, next) => {
    const credential = requestCredential(stateOf(ctx).prepared, { method: ctx.method, trustedOrigins });
    const caller = await callers.callerOf(credential, accepts);
    if (caller instanceof ProblemError) throw caller;
    // Not reached with these accepts (no credential is a 401); kept total for the type.
    if (caller === null) throw new Error('requireSession: an anonymous caller was accepted');
    stateOf(ctx).session = caller.session;
    stateOf(ctx).viaCookie = caller.via === 'cookie';
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
