import type { Middleware } from 'koa';
import type { DecisionEngine } from '../authz/decision-engine';
import { problemFromDecision } from '../authz/decision-engine';
import { parseBearerToken } from '../http/inbound-headers';
import { problems } from '../domain/problem';
import type { SessionService, VerifiedSession } from '../sessions/session-service';
import type { AuthorizationDecision } from '../authz/decision';
import { callerOf, stateOf } from './iam-context';

/**
 * Protected /iam endpoints (docs/http-contract.md): a valid bearer token from the Authorization header only
 * (never the query string), else 401 IAM_UNAUTHENTICATED with a Bearer challenge.
 */
export function requireSession(sessions: Pick<SessionService, 'verify'>): Middleware {
  return async (ctx, next) => {
    const bearer = parseBearerToken(stateOf(ctx).prepared.authorization);
    if (bearer.kind !== 'bearer') throw problems.unauthenticated('A bearer access token is required.', bearer.kind === 'malformed');
    const session = await sessions.verify(bearer.token);
    if (!session) throw problems.unauthenticated('The access token is invalid, expired or revoked.', true);
    stateOf(ctx).session = session;
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
