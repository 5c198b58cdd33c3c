import type Router from '@koa/router';
import type { JsonWebKey } from 'node:crypto';
import type { AuditTrail } from '../audit/audit-trail';
import type { LoginService } from '../auth/login-service';
import type { DecisionEngine } from '../authz/decision-engine';
import type { GrantProvider } from '../authz/grant-provider';
import type { AdminRepository } from '../domain/admin-repository';
import type { IamRepository } from '../domain/iam-repository';
import type { PolicyHolder } from '../policy/policy-holder';
import type { SessionService } from '../sessions/session-service';
import { registerAdminRoutes } from './admin-routes';
import { AdminService } from './admin-service';
import { registerAuthRoutes } from './auth-routes';
import { registerAuthorizationRoutes } from './authorization-routes';
import type { PageBranding } from '../http/page-layout';
import { registerLoginPageRoutes } from './login-page-routes';
import { registerConsoleRoutes, type ConsoleFiles } from './console-routes';
import { registerDecisionRoutes, type DecisionRoutesDeps } from './decision-routes';
import { registerOidcRoutes, type OidcRoutesDeps } from './oidc-routes';
import { registerOpenApiRoutes } from './openapi-routes';
import { registerPolicyRoutes, type PolicyRoutesDeps } from './policy-routes';
import { requireSession } from './require-session';
import { registerSessionRoutes } from './session-routes';
import { registerWellKnownRoutes } from './well-known-routes';

export interface IamRoutesDeps {
  repository: IamRepository;
  admin: AdminRepository;
  sessions: SessionService;
  grants: GrantProvider;
  /** Delivers committed changes now (the change feed), for writers that must see them applied. */
  changes: { deliver(): Promise<void> };
  login: LoginService;
  engine: DecisionEngine;
  /** The serving policy (and the last failed reload). */
  policy: Pick<PolicyHolder, 'current' | 'lastError'>;
  /** The candidate policy (`iam.policy.candidate-dir`) and its divergences; null or absent when none is configured. */
  candidate?: PolicyRoutesDeps['candidate'];
  audit: AuditTrail;
  /** The public keys of `/iam/.well-known/jwks.json`. */
  jwks: () => JsonWebKey[];
  /** `iam.session-cookie.*`: which cookie logout clears, and the origins trusted besides the gateway's own. */
  sessionCookie: { secure: boolean; trustedOrigins: ReadonlySet<string> };
  /** `iam.client-types`. */
  clientTypes: string[];
  /**
   * The browser login (`/iam/login`): the client type its sessions get, and the OpenID Connect login path the page
   * hands over to when the authenticator is `oidc` (null: the page shows the password form).
   */
  browserLogin: { clientType: string; oidcLoginPath: string | null; loginPath: string | null };
  /** `iam.ui.*`: the branding of the sign-in and problem pages (default: the gateway's own name, no logo). */
  branding?: PageBranding;
  /** The console's files (`console/` of the package); null: the console is not served. */
  console: ConsoleFiles | null;
  /** Verifies the bearer (or cookie) of a protected endpoint: gateway sessions, and provider JWTs when accepted. */
  bearers: Pick<SessionService, 'verify'>;
  /** The OpenID Connect login and back-channel logout (`iam.authenticator.type: oidc`); null: not served. */
  oidc: Pick<OidcRoutesDeps, 'login' | 'backchannel' | 'rp'> | null;
  /** `iam.gateway.allow-path-parameters`. */
  allowPathParameters: boolean;
  /** The gateway's own `X-IAM-Assertion` verifier (a host sends it back to ask for decisions); null when off. */
  assertions: DecisionRoutesDeps['assertions'];
  metrics: DecisionRoutesDeps['metrics'];
}

/** Every route group of the `/iam` application (docs/http-contract.md); the one list of what it serves. */
export function registerIamRoutes(router: Router, deps: IamRoutesDeps): void {
  const { login, sessions, engine, audit, repository } = deps;
  const sessionGuard = requireSession(deps.bearers, deps.sessionCookie.trustedOrigins);
  // Logout only ends the caller's session: while the token store is down, the durable record vouches for it (#11.35).
  const endingGuard = requireSession(
    { verify: (token) => deps.bearers.verify(token).catch((error: unknown) => sessions.verifyFromRecord(token, error)) },
    deps.sessionCookie.trustedOrigins,
  );
  registerAuthRoutes(router, { login, sessions, clientTypes: deps.clientTypes, requireSession: sessionGuard, endingGuard, secureCookie: deps.sessionCookie.secure });
  registerLoginPageRoutes(router, {
    login,
    clientType: deps.browserLogin.clientType,
    oidcLoginPath: deps.browserLogin.oidcLoginPath,
    secureCookie: deps.sessionCookie.secure,
    trustedOrigins: deps.sessionCookie.trustedOrigins,
    ...(deps.branding === undefined ? {} : { branding: deps.branding }),
  });
  if (deps.oidc) {
    registerOidcRoutes(router, {
      ...deps.oidc,
      sessions,
      secureCookie: deps.sessionCookie.secure,
      trustedOrigins: deps.sessionCookie.trustedOrigins,
      ...(deps.branding === undefined ? {} : { branding: deps.branding }),
    });
  }
  registerSessionRoutes(router, { sessions, requireSession: sessionGuard });
  registerOpenApiRoutes(router);
  registerWellKnownRoutes(router, { jwks: deps.jwks });
  const admin = new AdminService({ admin: deps.admin, repository, sessions, changes: deps.changes, audit });
  const holder = deps.policy;
  registerAuthorizationRoutes(router, {
    login,
    engine,
    policy: () => holder.current,
    subjectOf: (userId, clientType) => admin.subjectOf(userId, clientType),
    secureCookie: deps.sessionCookie.secure,
    audit,
    repository,
    requireSession: sessionGuard,
    allowPathParameters: deps.allowPathParameters,
  });
  registerDecisionRoutes(router, {
    engine,
    policy: () => holder.current,
    bearers: deps.bearers,
    sessions,
    assertions: deps.assertions,
    repository,
    subjectOf: (userId, clientType) => admin.subjectOf(userId, clientType),
    audit,
    metrics: deps.metrics,
    trustedOrigins: deps.sessionCookie.trustedOrigins,
  });
  registerAdminRoutes(router, { admin, engine, grants: deps.grants, requireSession: sessionGuard, clientTypes: deps.clientTypes });
  registerPolicyRoutes(router, { holder, candidate: deps.candidate ?? null, engine, requireSession: sessionGuard });
  if (deps.console) registerConsoleRoutes(router, { files: deps.console, bearers: deps.bearers, loginPath: deps.browserLogin.loginPath, signOutPath: deps.browserLogin.oidcLoginPath === null ? null : '/iam/auth/oidc/logout' });
}
