import type { JWTPayload } from 'jose';
import type { PrincipalRepository, SessionRepository } from '../../domain/iam-repository';
import { ProblemError } from '../../domain/problem';
import { hashToken } from '../../domain/token-hash';
import type { TokenCounters } from '../../domain/token-store';
import type { RequestFacts, SessionService } from '../../sessions/session-service';
import { oidcIdentityId } from './oidc-login';
import { RelyingParty } from './relying-party';

/** OpenID Connect Back-Channel Logout 1.0 §2.4: the event a logout token must carry. */
export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/** A logout token older than this (by `iat`) is refused, so its `jti` need only be remembered this long. */
const MAX_TOKEN_AGE_SECONDS = 10 * 60;

/** The audit actor of what the provider ended. */
export const IDENTITY_PROVIDER_ACTOR = 'identity-provider';

export interface BackchannelLogoutDeps {
  rp: RelyingParty;
  /** A logout token's `jti` is accepted once, on every instance (an atomic counter with a limit of 1). */
  store: Pick<TokenCounters, 'takeCounters'>;
  repository: Pick<SessionRepository, 'listSessionsOfIdpSession'> & Pick<PrincipalRepository, 'getIdentity'>;
  sessions: Pick<SessionService, 'revokeById' | 'revokeUser'>;
}

/**
 * `POST /iam/auth/oidc/backchannel-logout`: the provider says a user's session with it ended. The logout token is
 * verified (§2.6: signature by the provider's JWKS with an allowed algorithm, `iss`, `aud` = our client id, `iat`,
 * the back-channel `events` member, no `nonce`, `sid` or `sub`, `jti` never seen before), then every gateway
 * session opened in that provider session (`sid`), or every session of that user (`sub` alone), is revoked on every
 * instance — the same revocation as an admin's.
 */
export class BackchannelLogout {
  constructor(private readonly deps: BackchannelLogoutDeps) {}

  /** Resolves how many sessions were ended; throws 400 IAM_LOGOUT_TOKEN_INVALID for a token that fails a check. */
  async handle(logoutToken: unknown, facts: RequestFacts): Promise<number> {
    if (typeof logoutToken !== 'string' || logoutToken.length === 0 || logoutToken.length > 16_384) throw invalid('a logout_token form field is required');
    const claims = await this.verify(logoutToken);
    const once = await this.deps.store.takeCounters([`oidc-logout-jti:${hashToken(String(claims.jti))}`], [1], (MAX_TOKEN_AGE_SECONDS + 600) * 1000);
    if (!once.allowed) throw invalid('this logout token was already used (jti replayed)');
    const sid = typeof claims.sid === 'string' ? claims.sid : null;
    const subject = typeof claims.sub === 'string' ? claims.sub : null;
    if (sid !== null) {
      const userId = subject === null ? null : ((await this.deps.repository.getIdentity(oidcIdentityId(subject)))?.userId ?? null);
      const sessions = (await this.deps.repository.listSessionsOfIdpSession(sid)).filter((session) => subject === null || session.userId === userId);
      for (const session of sessions) await this.deps.sessions.revokeById(session.sessionId, 'idp_logout', IDENTITY_PROVIDER_ACTOR, facts);
      return sessions.length;
    }
    const identity = await this.deps.repository.getIdentity(oidcIdentityId(subject!));
    if (!identity) return 0;
    return this.deps.sessions.revokeUser(identity.userId, 'idp_logout', IDENTITY_PROVIDER_ACTOR, facts);
  }

  private async verify(token: string): Promise<JWTPayload> {
    let claims: JWTPayload;
    try {
      claims = await this.deps.rp.verifyJwt(token, { audience: this.deps.rp.clientId, requiredClaims: ['iat', 'jti', 'events'], maxTokenAgeSeconds: MAX_TOKEN_AGE_SECONDS });
    } catch (error) {
      const outage = RelyingParty.outageOf(error);
      if (outage) throw outage;
      throw invalid((error as Error).message ?? 'the token could not be verified', error);
    }
    const events = claims.events as Record<string, unknown> | undefined;
    const event = events && typeof events === 'object' ? events[BACKCHANNEL_LOGOUT_EVENT] : undefined;
    if (event === null || typeof event !== 'object' || Array.isArray(event)) throw invalid(`events must contain ${BACKCHANNEL_LOGOUT_EVENT} with an object value`);
    if ('nonce' in claims) throw invalid('a logout token must not contain a nonce');
    if (typeof claims.sid !== 'string' && typeof claims.sub !== 'string') throw invalid('a logout token must contain sid or sub');
    if (typeof claims.jti !== 'string' || claims.jti.length === 0) throw invalid('jti must be a string');
    return claims;
  }
}

function invalid(reason: string, cause?: unknown): ProblemError {
  return new ProblemError('IAM_LOGOUT_TOKEN_INVALID', `The logout token was refused: ${reason}.`, cause === undefined ? {} : { cause });
}
