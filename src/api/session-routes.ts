import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { SessionService } from '../sessions/session-service';
import { callerOf, factsOf } from './iam-context';
import { parseSessionListQuery } from './session-query';

/** docs/http-contract.md: the caller's own sessions (paginated like the admin lists, docs/threat-model.md #11.18). */
export function registerSessionRoutes(router: Router, deps: { sessions: SessionService; requireSession: Middleware }): void {
  router.get('/sessions', deps.requireSession, async (ctx) => {
    const { limit, after } = parseSessionListQuery(ctx.query);
    const caller = callerOf(ctx);
    const page = await deps.sessions.list(caller.record.principal.userId, caller.record.sessionId, limit, after);
    // The body stays the plain list of sessions; the next page is linked (RFC 8288), as GitHub's API does.
    if (page.nextCursor !== null) ctx.set('Link', `</iam/sessions?limit=${limit}&cursor=${encodeURIComponent(page.nextCursor)}>; rel="next"`);
    ctx.body = page.items;
  });

  router.post('/sessions/revoke-others', deps.requireSession, async (ctx) => {
    const caller = callerOf(ctx);
    await deps.sessions.revokeUser(caller.record.principal.userId, 'revoked_by_user', caller.record.principal.userId, factsOf(ctx), caller.record.sessionId);
    ctx.status = 204;
  });

  router.post('/sessions/:sessionId/revoke', deps.requireSession, async (ctx) => {
    await deps.sessions.revokeOwn(callerOf(ctx), ctx.params.sessionId ?? '', factsOf(ctx));
    ctx.status = 204;
  });
}
