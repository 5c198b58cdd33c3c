import type Router from '@koa/router';
import type { PublicJwk } from '../gateway/assertion-signer';
import type { AuditTrail } from '../audit/audit-trail';
import { PROTECTED, type CallerAccepts, type CallerStep } from '../auth/caller';
import type { LoginService } from '../auth/login-service';
import type { DecisionEngine } from '../authz/decision-engine';
import type { GrantProvider } from '../authz/grant-provider';
import type { ResolutionBudget } from '../authz/resolution-budget';
import type { AdminRepository } from '../domain/admin-repository';
import type { IamRepository } from '../domain/iam-repository';
import type { PolicyHolder } from '../policy/policy-holder';
import type { SessionService } from '../sessions/session-service';
import { registerAdminRoutes } from './admin-routes';
import { AdminService } from './admin-service';
import { authRoutes } from './auth-routes';
import { registerAuthorizationRoutes } from './authorization-routes';
import type { PageBranding } from '../http/page-layout';
import { loginPageRoutes } from './login-page-routes';
import { consoleContext, consoleRoutes, type ConsoleFiles } from './console-routes';
import { decisionRoutes, type DecisionRoutesDeps } from './decision-routes';
import { forwardAuthRoutes } from './forward-auth-route';
import { metaRoutes } from './meta-routes';
import { oidcRoutes, type OidcRoutesDeps } from './oidc-routes';
import { openApiDocument } from './openapi-document';
import { registerPolicyRoutes, type PolicyRoutesDeps } from './policy-routes';
import { requireSession } from './require-session';
import { registerDeclaredRoutes } from './route-declaration';
import { registerSessionRoutes } from './session-routes';

export interface IamRoutesDeps {
  repository: IamRepository;
  admin: AdminRepository;
  sessions: SessionService;
  grants: GrantProvider;
  /** Delivers committed changes now (the change feed), for writers that must see them applied. */
  changes: { deliver(): Promise<void> };
  login: LoginService;
  engine: DecisionEngine;
  /** What a caller's check and diagnostics may have resolved (their own budget and pool); the proxy never asks it. */
  resolutions: Pick<ResolutionBudget, 'forCall'>;
  /** The serving policy (and the last failed reload). */
  policy: Pick<PolicyHolder, 'current' | 'lastError'>;
  /** The candidate policy (`iam.policy.candidate-dir`) and its divergences; null or absent when none is configured. */
  candidate?: PolicyRoutesDeps['candidate'];
  audit: AuditTrail;
  /** The public keys of `/iam/.well-known/jwks.json`. */
  jwks: () => PublicJwk[];
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
  /** A request's credential to its caller (auth/caller.ts): gateway sessions, assertions, provider JWTs when accepted. */
  callers: Pick<CallerStep, 'callerOf'>;
  /** The OpenID Connect login and back-channel logout (`iam.authenticator.type: oidc`); null: not served. */
  oidc: Pick<OidcRoutesDeps, 'login' | 'backchannel' | 'rp'> | null;
  /** `iam.gateway.allow-path-parameters`. */
  allowPathParameters: boolean;
  metrics: DecisionRoutesDeps['metrics'];
}

/** The logouts' guard: what a protected endpoint accepts, and the durable record while the token store is down. */
const ENDING: CallerAccepts = { ...PROTECTED, durableFallback: true };

/**
 * Every route group of the `/iam` application (docs/http-contract.md); the one list of what it serves. Every route
 * is a declaration (route-declaration.ts) of a group listed in `DECLARED_ROUTES` (openapi-document.ts).
 */
export function registerIamRoutes(router: Router, deps: IamRoutesDeps): void {
  const { login, sessions, engine, audit, repository } = deps;
  const sessionGuard = requireSession(deps.callers, deps.sessionCookie.trustedOrigins);
  // Logout only ends the caller's session: while the token store is down, the durable record vouches for it (#11.35).
  const endingGuard = requireSession(deps.callers, deps.sessionCookie.trustedOrigins, ENDING);
  registerDeclaredRoutes(router, authRoutes, { login, sessions, clientTypes: deps.clientTypes, endingGuard, secureCookie: deps.sessionCookie.secure }, { requireSession: sessionGuard });
  registerDeclaredRoutes(router, loginPageRoutes, {
    login,
    clientType: deps.browserLogin.clientType,
    oidcLoginPath: deps.browserLogin.oidcLoginPath,
    secureCookie: deps.sessionCookie.secure,
    trustedOrigins: deps.sessionCookie.trustedOrigins,
    ...(deps.branding === undefined ? {} : { branding: deps.branding }),
  });
  if (deps.oidc) {
    registerDeclaredRoutes(router, oidcRoutes, {
      ...deps.oidc,
      sessions,
      repository,
      callers: deps.callers,
      secureCookie: deps.sessionCookie.secure,
      trustedOrigins: deps.sessionCookie.trustedOrigins,
      ...(deps.branding === undefined ? {} : { branding: deps.branding }),
    });
  }
  registerSessionRoutes(router, { sessions, requireSession: sessionGuard });
  // The document is constant for the life of the process: serialized once, at registration.
  registerDeclaredRoutes(router, metaRoutes, { openApiJson: JSON.stringify(openApiDocument), jwks: deps.jwks });
  const admin = new AdminService({ admin: deps.admin, repository, sessions, changes: deps.changes, audit });
  const holder = deps.policy;
  registerAuthorizationRoutes(router, {
    login,
    engine,
    resolutions: deps.resolutions,
    policy: () => holder.current,
    subjectOf: (userId, clientType) => admin.subjectOf(userId, clientType),
    secureCookie: deps.sessionCookie.secure,
    audit,
    repository,
    requireSession: sessionGuard,
    allowPathParameters: deps.allowPathParameters,
  });
  // Answered before the /iam app (GET and HEAD); declared for its other methods (forward-auth-route.ts).
  registerDeclaredRoutes(router, forwardAuthRoutes, undefined);
  registerDeclaredRoutes(router, decisionRoutes, {
    engine,
    resolutions: deps.resolutions,
    policy: () => holder.current,
    callers: deps.callers,
    sessions,
    repository,
    subjectOf: (userId, clientType) => admin.subjectOf(userId, clientType),
    audit,
    metrics: deps.metrics,
    trustedOrigins: deps.sessionCookie.trustedOrigins,
  });
  registerAdminRoutes(router, { admin, engine, grants: deps.grants, requireSession: sessionGuard, clientTypes: deps.clientTypes });
  registerPolicyRoutes(router, { holder, candidate: deps.candidate ?? null, engine, requireSession: sessionGuard });
  if (deps.console) {
    const signOutPath = deps.browserLogin.oidcLoginPath === null ? null : '/iam/auth/oidc/logout';
    registerDeclaredRoutes(router, consoleRoutes, consoleContext({ files: deps.console, callers: deps.callers, loginPath: deps.browserLogin.loginPath, signOutPath }));
  }
}
