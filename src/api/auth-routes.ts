import type Router from '@koa/router';
import type { LoginService } from '../auth/login-service';
import type { SessionService } from '../sessions/session-service';
import { callerOf, factsOf } from './iam-context';
import type { Middleware } from 'koa';
import { assertValid, createBodyValidator } from './validate-body';

export interface AuthRoutesDeps {
  login: LoginService;
  sessions: SessionService;
  clientTypes: string[];
  requireSession: Middleware;
}

/** docs/http-contract.md: login, logout, me. */
export function registerAuthRoutes(router: Router, deps: AuthRoutesDeps): void {
  const validateLogin = createBodyValidator().compile<{ username: string; password: string; clientType: string }>({
    type: 'object',
    additionalProperties: false,
    required: ['username', 'password', 'clientType'],
    properties: {
      username: { type: 'string', minLength: 1, maxLength: 200 },
      password: { type: 'string', minLength: 1, maxLength: 1024 },
      clientType: { type: 'string', enum: deps.clientTypes },
    },
  });

  router.post('/auth/login', async (ctx) => {
    const body = assertValid(validateLogin, ctx.request.body);
    ctx.body = await deps.login.login(body, factsOf(ctx));
    ctx.set('Cache-Control', 'no-store');
  });

  router.post('/auth/logout', deps.requireSession, async (ctx) => {
    await deps.sessions.logout(callerOf(ctx), factsOf(ctx));
    ctx.status = 204;
  });

  router.get('/auth/me', deps.requireSession, (ctx) => {
    ctx.body = callerOf(ctx).record.principal;
  });
}
