import type { IncomingMessage, ServerResponse } from 'node:http';
import { createIamApp } from '../api/iam-app';
import { registerIamRoutes, type IamRoutesDeps } from '../api/iam-routes';
import { OIDC_BACKCHANNEL_PATH, OIDC_LOGIN_PATH, OIDC_LOGOUT_PATH } from '../api/oidc-routes';
import { findConsoleDir, loadConsoleFiles } from '../api/console-routes';
import { POLICY_COVERAGE_BODY_LIMIT, POLICY_COVERAGE_PATH } from '../api/policy-routes';
import type { Logger } from '../observability/logger';
import type { OutageLog } from '../observability/outage-log';
import type { GatewayConfig } from '../config';

/** The `/iam` application with every route group (docs/http-contract.md), as a Node request listener. */
export function createIamApi(
  config: GatewayConfig,
  deps: Omit<IamRoutesDeps, 'clientTypes' | 'allowPathParameters' | 'sessionCookie' | 'browserLogin' | 'console'> & { logger: Logger; outages: OutageLog },
): (req: IncomingMessage, res: ServerResponse) => unknown {
  // The console ships with the package (console/); a checkout without it serves no console.
  const consoleDir = findConsoleDir();
  const consoleFiles = consoleDir === null ? null : loadConsoleFiles(consoleDir);
  const app = createIamApp({
    logger: deps.logger,
    outages: deps.outages,
    bodyLimit: config.server.iamBodyLimit,
    formPaths: new Set(['/iam/login', OIDC_BACKCHANNEL_PATH]),
    documentPaths: new Map([[POLICY_COVERAGE_PATH, POLICY_COVERAGE_BODY_LIMIT]]),
    branding: deps.branding ?? config.iam.ui,
    register: (router) =>
      registerIamRoutes(router, {
        ...deps,
        clientTypes: config.iam.clientTypes,
        browserLogin: {
          clientType: browserClientType(config.iam.clientTypes),
          oidcLoginPath: config.iam.authenticator.type === 'oidc' ? OIDC_LOGIN_PATH : null,
          loginPath: browserLoginPath(config),
        },
        console: consoleFiles,
        branding: deps.branding ?? config.iam.ui,
        sessionCookie: { secure: config.iam.sessionCookie.secure, trustedOrigins: new Set(config.iam.sessionCookie.trustedOrigins) },
        allowPathParameters: config.iam.gateway.allowPathParameters,
      }),
  });
  return app.callback();
}

/** Sessions from a browser login are `WEB` sessions when that client type is configured (else the first one). */
export function browserClientType(clientTypes: readonly string[]): string {
  return clientTypes.includes('WEB') ? 'WEB' : clientTypes[0]!;
}

/**
 * Where a browser without a session is sent to sign in: the login page for the password authenticators, the OpenID
 * Connect login for `oidc`; null with `none` (nobody can log in, so an API-style 401 is the honest answer).
 */
export function browserLoginPath(config: GatewayConfig): string | null {
  if (config.iam.authenticator.type === 'none') return null;
  return config.iam.authenticator.type === 'oidc' ? OIDC_LOGIN_PATH : '/iam/login';
}

/**
 * Where a browser signs out by navigating, linked from the 403 page: the OpenID Connect logout (ends the session here,
 * then at the provider); for a password login, the console's Me page, whose "Sign out" button ends the session (its
 * logout is a POST with the CSRF header, which a link cannot send); null when neither exists.
 */
export function browserSignOutPath(config: GatewayConfig): string | null {
  if (config.iam.authenticator.type === 'oidc') return OIDC_LOGOUT_PATH;
  if (config.iam.authenticator.type === 'none') return null;
  return findConsoleDir() === null ? null : CONSOLE_ME_PATH;
}

/** The console page where a signed-in user sees their profiles and signs out. */
export const CONSOLE_ME_PATH = '/iam/console/me';
