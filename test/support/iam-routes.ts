/** The routes the gateway's /iam application registers, read from the router itself (no gateway started). */
import Router from '@koa/router';
import { registerIamRoutes, type IamRoutesDeps } from '../../src/api/iam-routes';

/**
 * The /iam router as the gateway registers it (registerIamRoutes, the one list: src/api/iam-routes.ts), with no
 * dependency behind it but those `overrides` gives: registration only builds routes.
 */
export function iamRouter(overrides: Partial<IamRoutesDeps> = {}): Router {
  const router = new Router({ prefix: '/iam' });
  const unused = {} as never; // registration only builds routes; no dependency is called
  registerIamRoutes(router, {
    repository: unused,
    admin: unused,
    sessions: unused,
    grants: unused,
    changes: unused,
    login: unused,
    engine: unused,
    resolutions: unused,
    policy: unused,
    audit: unused,
    jwks: unused,
    metrics: unused,
    clientTypes: ['WEB'],
    browserLogin: { clientType: 'WEB', oidcLoginPath: null, loginPath: '/iam/login' },
    console: unused,
    oidc: unused,
    callers: unused,
    sessionCookie: { secure: true, trustedOrigins: new Set() },
    allowPathParameters: false,
    ...overrides,
  });
  return router;
}

/**
 * The routes the /iam application serves: registerIamRoutes (the one list the gateway registers, src/api/iam-routes.ts)
 * run on a bare router, read back from @koa/router's `stack` (ALL = `router.all`).
 */
export function registeredIamRoutes(): Array<{ method: string; path: string }> {
  const router = iamRouter();
  const routes: Array<{ method: string; path: string }> = [];
  for (const layer of router.stack) {
    if (layer.methods.length === 0 || typeof layer.path !== 'string') continue; // router.use() layers
    const path = layer.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    if (layer.methods.includes('PROPFIND')) routes.push({ method: 'ALL', path });
    else for (const method of layer.methods) if (!(method === 'HEAD' && layer.methods.includes('GET'))) routes.push({ method, path });
  }
  return routes;
}
