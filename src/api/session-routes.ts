import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { SessionService } from '../sessions/session-service';
import { callerOf, factsOf } from './iam-context';
import { empty, param, problem, response } from './openapi-builders';
import { registerDeclaredRoutes, route, type RouteDeclaration } from './route-declaration';
import { sessionPageOf } from './session-query';
import { Type } from '@sinclair/typebox';
import { SessionListQuery } from './schemas/queries';
import { Session } from './schemas/responses';

interface SessionContext {
  sessions: SessionService;
}

/**
 * docs/http-contract.md: the caller's own sessions (paginated like the admin lists, docs/threat-model.md #11.18), each
 * route declared once (route-declaration.ts): a session is all they need.
 */
export const sessionRoutes: ReadonlyArray<RouteDeclaration<SessionContext>> = [
  route({
    method: 'get',
    path: '/iam/sessions',
    access: 'session',
    query: SessionListQuery,
    response: {
      schema: Type.Array(Session),
      description: 'The sessions of the caller\'s user (one page); a `Link` header with `rel="next"` names the next page.',
      headers: { Link: { description: 'RFC 8288: `</iam/sessions?limit=…&cursor=…>; rel="next"` while more sessions follow.', schema: { type: 'string' } } },
    },
    operation: {
      operationId: 'listSessions',
      summary: 'The caller\'s sessions, every state, newest first',
      tags: ['sessions'],
      responses: {
        '400': response('ValidationFailed'),
      },
    },
    handler: ({ sessions }, _body, query) => async (ctx) => {
      const { limit, after } = sessionPageOf(query.read(ctx));
      const caller = callerOf(ctx);
      const page = await sessions.list(caller.record.principal.userId, caller.record.sessionId, limit, after);
      // The body stays the plain list of sessions; the next page is linked (RFC 8288), as GitHub's API does.
      if (page.nextCursor !== null) ctx.set('Link', `</iam/sessions?limit=${limit}&cursor=${encodeURIComponent(page.nextCursor)}>; rel="next"`);
      ctx.body = page.items;
    },
  }),
  {
    method: 'post',
    path: '/iam/sessions/{sessionId}/revoke',
    access: 'session',
    pathParameters: [param('SessionId')],
    operation: {
      operationId: 'revokeSession',
      summary: 'Revoke one of the caller\'s own sessions',
      description: 'While the database is down, a session the token store lists as the caller\'s is revoked all the same (recorded when the database is back); any other is 503.',
      tags: ['sessions'],
      responses: {
        '204': empty('Revoked (or already ended).'),
        '404': problem(404, ['IAM_SESSION_NOT_FOUND'], 'Unknown, or another user\'s: never revealed.'),
      },
    },
    handler: ({ sessions }) => async (ctx) => {
      await sessions.revokeOwn(callerOf(ctx), ctx.params.sessionId ?? '', factsOf(ctx));
      ctx.status = 204;
    },
  },
  {
    method: 'post',
    path: '/iam/sessions/revoke-others',
    access: 'session',
    operation: {
      operationId: 'revokeOtherSessions',
      summary: 'Revoke every session of the caller\'s user except the current one',
      description: 'While the database is down the sessions the token store lists end at once and the record follows when it is back (also across a restart).',
      tags: ['sessions'],
      responses: { '204': empty('Revoked.') },
    },
    handler: ({ sessions }) => async (ctx) => {
      const caller = callerOf(ctx);
      await sessions.revokeUser(caller.record.principal.userId, 'revoked_by_user', caller.record.principal.userId, factsOf(ctx), caller.record.sessionId);
      ctx.status = 204;
    },
  },
];

/** Registers {@link sessionRoutes}. */
export function registerSessionRoutes(router: Router, deps: { sessions: SessionService; requireSession: Middleware }): void {
  registerDeclaredRoutes(router, sessionRoutes, { sessions: deps.sessions }, { requireSession: deps.requireSession });
}
