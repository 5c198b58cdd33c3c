import type { Context } from 'koa';
import type { PreparedRequest } from '../http/prepare-request';
import type { RequestFacts, VerifiedSession } from '../sessions/session-service';

/** What /iam handlers find in `ctx.state`. */
export interface IamState {
  prepared: PreparedRequest;
  session?: VerifiedSession;
  /** True when the session came from the session cookie (a browser), not a bearer. */
  viaCookie?: boolean;
  /** The `instance` of a problem answer when it is about another request than this one (forward-auth). */
  problemInstance?: string;
}

export function stateOf(ctx: Context): IamState {
  return ctx.state as IamState;
}

/** The verified caller of a protected endpoint (set by requireSession). */
export function callerOf(ctx: Context): VerifiedSession {
  const session = stateOf(ctx).session;
  if (!session) throw new Error('requireSession must run before this handler');
  return session;
}

export function factsOf(ctx: Context): RequestFacts {
  return {
    requestId: stateOf(ctx).prepared.requestId,
    clientAddress: stateOf(ctx).prepared.clientAddress,
    userAgent: ctx.get('user-agent') || null,
  };
}
