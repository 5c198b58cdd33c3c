import type { AuditTrail } from '../audit/audit-trail';
import type { Authenticator } from '../auth/authenticator';
import { LoginRateLimiter } from '../auth/login-rate-limiter';
import { LoginService } from '../auth/login-service';
import type { AssertionVerifier } from '../auth/assertion-verifier';
import { CallerStep } from '../auth/caller';
import type { GatewayConfig } from '../config';
import type { IamRepository } from '../domain/iam-repository';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import { createAccessTokenVerifier, createOidc, createRelyingParty } from './oidc';
import type { SessionState } from './sessions';

/** Who may sign in, and who a request's credential names: the login service, OpenID Connect, the caller step. */
export interface Logins {
  login: LoginService;
  /** The OpenID Connect login and back-channel logout; null unless `iam.authenticator.type` is oidc. */
  oidc: ReturnType<typeof createOidc>;
  /**
   * A credential to its caller (auth/caller.ts): gateway tokens by the session service, the gateway's assertions by
   * their verifier, and with `iam.oidc.accept-access-tokens` the provider's JWTs by theirs.
   */
  callers: CallerStep;
}

/** The login subsystem: the configured authenticator behind the rate limits, and the provider when there is one. */
export function startLogins(
  config: GatewayConfig,
  authenticator: Authenticator,
  deps: {
    repository: IamRepository;
    state: SessionState;
    audit: AuditTrail;
    logger: Logger;
    metrics: GatewayMetrics;
    /** The gateway's own assertions (null when off), and the audiences the live policy signs them for. */
    assertions: AssertionVerifier | null;
    audiences: () => ReadonlySet<string>;
  },
): Logins {
  const { repository, state, audit, logger, metrics } = deps;
  const starved = authenticator.starvedVerifications?.bind(authenticator);
  if (starved) metrics.observePasswordStarvations(starved);
  if (authenticator.type === 'none') logger.warn({}, 'iam.authenticator.type is none: logins are off (501 IAM_LOGIN_NOT_CONFIGURED) until an authenticator is configured');
  const rateLimiter = new LoginRateLimiter(state.store, config.iam.login.rateLimit);
  const login = new LoginService({ authenticator, repository, sessions: state.sessions, changes: state.changes, audit, logger, rateLimiter, metrics });
  const rp = createRelyingParty(config);
  const oidc = createOidc(config, rp, { login, store: state.store, rateLimiter, repository, sessions: state.sessions, audit, logger });
  const callers = new CallerStep({
    sessions: state.sessions,
    accessTokens: createAccessTokenVerifier(config, rp, { repository, revocations: state.revocations, audit }),
    assertions: deps.assertions,
    audiences: deps.audiences,
  });
  return { login, oidc, callers };
}
