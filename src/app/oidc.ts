import { AccessTokenVerifier, type AccessTokenDeps } from '../auth/oidc/access-tokens';
import { BackchannelLogout } from '../auth/oidc/backchannel-logout';
import { LoginStateSeal } from '../auth/oidc/login-state';
import { OidcLogin } from '../auth/oidc/oidc-login';
import { RelyingParty } from '../auth/oidc/relying-party';
import type { AuditTrail } from '../audit/audit-trail';
import type { LoginRateLimiter } from '../auth/login-rate-limiter';
import type { LoginService } from '../auth/login-service';
import type { IamRepository } from '../domain/iam-repository';
import type { TokenCounters } from '../domain/token-store';
import type { SessionService } from '../sessions/session-service';
import type { GatewayConfig } from '../config';
import type { Logger } from '../observability/logger';
import { browserClientType } from './iam-api';

/** The OpenID Connect parts of one gateway (docs/oidc.md), or null when the authenticator is not `oidc`. */
export interface OidcParts {
  rp: RelyingParty;
  login: OidcLogin;
  backchannel: BackchannelLogout;
}

/** The relying party when a provider is configured (login, or resource-server mode only); null otherwise. */
export function createRelyingParty(config: GatewayConfig): RelyingParty | null {
  const oidc = config.iam.oidc;
  if (oidc.issuer === null) return null;
  return new RelyingParty({
    issuer: oidc.issuer,
    clientId: oidc.clientId ?? '',
    clientSecret: oidc.clientSecret ?? '',
    redirectUri: oidc.redirectUri ?? '',
    postLogoutRedirectUri: oidc.postLogoutRedirectUri,
    scopes: oidc.scopes,
    algorithms: oidc.algorithms,
    clockToleranceMs: oidc.clockToleranceMs,
    timeoutMs: oidc.timeoutMs,
  });
}

/** The OpenID Connect login and back-channel logout, for `iam.authenticator.type: oidc` (the config check ensures the keys). */
export function createOidc(
  config: GatewayConfig,
  rp: RelyingParty | null,
  deps: { login: LoginService; store: TokenCounters; rateLimiter: LoginRateLimiter; repository: IamRepository; sessions: SessionService; audit: AuditTrail; logger: Logger },
): OidcParts | null {
  if (config.iam.authenticator.type !== 'oidc' || rp === null) return null;
  const oidc = config.iam.oidc;
  const login = new OidcLogin({
    rp,
    audit: deps.audit,
    logger: deps.logger,
    seal: new LoginStateSeal(oidc.clientSecret!),
    login: deps.login,
    store: deps.store,
    rateLimiter: deps.rateLimiter,
    claims: { ...oidc.claims, users: oidc.users, linkBy: oidc.linkBy, allowed: oidc.allowed, profiles: oidc.profiles },
    clientType: browserClientType(config.iam.clientTypes),
  });
  const backchannel = new BackchannelLogout({ rp, store: deps.store, repository: deps.repository, sessions: deps.sessions });
  return { rp, login, backchannel };
}

/** Resource-server mode (`iam.oidc.accept-access-tokens`): the provider's JWT access tokens as bearers; null when off. */
export function createAccessTokenVerifier(
  config: GatewayConfig,
  rp: RelyingParty | null,
  deps: { repository: IamRepository; revocations: AccessTokenDeps['revocations']; audit: AuditTrail },
): AccessTokenVerifier | null {
  const oidc = config.iam.oidc;
  if (!oidc.acceptAccessTokens || rp === null) return null;
  // The configuration check makes the audience explicit and not the client id (docs/oidc.md); never a fallback here.
  if (oidc.audience === null || oidc.audience === oidc.clientId) throw new Error('iam.oidc.audience must be set, and differ from iam.oidc.client-id, with accept-access-tokens');
  return new AccessTokenVerifier({
    rp,
    audience: oidc.audience,
    types: oidc.accessTokenTypes,
    audit: deps.audit,
    claims: { ...oidc.claims, users: oidc.users, linkBy: oidc.linkBy },
    clientType: config.iam.clientTypes.includes('API') ? 'API' : config.iam.clientTypes[0]!,
    repository: deps.repository,
    revocations: deps.revocations,
    maxEntries: config.iam.token.cache.maxEntries,
  });
}
