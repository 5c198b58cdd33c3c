import type Router from '@koa/router';
import type { LoginService } from '../auth/login-service';
import type { SessionService } from '../sessions/session-service';
import { clearedSessionCookie } from '../http/session-cookie';
import { callerOf, factsOf } from './iam-context';
import type { Middleware } from 'koa';
import { loginRequest, type LoginBody } from './schemas/requests';
import { assertValid, createBodyValidator } from './validate-body';

export interface AuthRoutesDeps {
  login: LoginService;
  sessions: SessionService;
  clientTypes: string[];
  requireSession: Middleware;
  /** {@link requireSession} for logout: also answered from the durable record while the token store is down. */
  endingGuard: Middleware;
  /** `iam.session-cookie.secure`: which session cookie logout clears. */
  secureCookie: boolean;
}

/** docs/http-contract.md: login, logout, me. */
export function registerAuthRoutes(router: Router, deps: AuthRoutesDeps): void {
  const validateLogin = createBodyValidator().compile<LoginBody>(loginRequest(deps.clientTypes));

  router.post('/auth/login', async (ctx) => {
    const body = assertValid(validateLogin, ctx.request.body);
    ctx.body = await deps.login.login(body, factsOf(ctx));
    ctx.set('Cache-Control', 'no-store');
  });

  router.post('/auth/logout', deps.endingGuard, async (ctx) => {
    await deps.sessions.logout(callerOf(ctx), factsOf(ctx));
    // A browser session ends in the browser too (the token is already revoked everywhere).
    ctx.set('Set-Cookie', clearedSessionCookie(deps.secureCookie));
    ctx.status = 204;
  });

  router.get('/auth/me', deps.requireSession, (ctx) => {
    ctx.body = callerOf(ctx).record.principal;
  });
}
