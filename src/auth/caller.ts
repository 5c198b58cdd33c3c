import { ProblemError, problems } from '../domain/problem';
import type { RequestCredential } from '../http/request-credential';
import type { SessionService, VerifiedSession } from '../sessions/session-service';
import type { AssertionVerifier, VerifiedAssertion } from './assertion-verifier';
import { looksLikeJwt, type AccessTokenVerifier } from './oidc/access-tokens';

/**
 * How a caller proved who they are: a gateway token as the bearer or in the session cookie, the gateway's own
 * `X-IAM-Assertion` sent back as the bearer, or the provider's JWT access token as the bearer.
 */
export type CallerVia = 'bearer' | 'cookie' | 'assertion' | 'provider-token';

export interface Caller {
  session: VerifiedSession;
  via: CallerVia;
}

/** What a place accepts as a caller; each differs from the plain `/iam` guard only where its answer does. */
export interface CallerAccepts {
  /** The provider's JWT access tokens as bearers (when `iam.oidc.accept-access-tokens` is on). */
  readonly providerTokens: boolean;
  /** A bearer that is the gateway's own `X-IAM-Assertion` names its session (the host decisions). */
  readonly assertion: boolean;
  /** No credential is an anonymous request (null) the policy decides, not a 401 (the proxy and forward-auth). */
  readonly anonymous: boolean;
  /**
   * A credential that names no caller (malformed, unknown, expired, revoked) is no caller (null) rather than a 401;
   * a cross-site cookie is still refused (the OpenID Connect logout ends whatever session it is given, if any).
   */
  readonly optional: boolean;
  /**
   * While the token store is down, the durable record vouches for a gateway session (#11.35): only for requests that
   * can do nothing but end the caller's own session (the logouts).
   */
  readonly durableFallback: boolean;
  /** The detail of this place's 401s instead of the one naming the reason (the console's "sign in"). */
  readonly detail?: string;
}

/** The `/iam` guard's: a gateway token or a provider token, else 401; a cross-site cookie 403. */
export const PROTECTED: CallerAccepts = { providerTokens: true, assertion: false, anonymous: false, optional: false, durableFallback: false };

/** The answer of one credential: the caller, the problem to answer instead, or no caller (where that is allowed). */
export type CallerOutcome = Caller | ProblemError | null;

/** {@link CallerStep.sessionOf}'s answer: synchronous on a warm cache (the proxy's hot path allocates no wrapper). */
export type SessionOutcome = VerifiedSession | ProblemError | null;

export interface CallerStepDeps {
  sessions: Pick<SessionService, 'verify' | 'verifyCached' | 'liveSession' | 'verifyFromRecord'>;
  /** The provider's JWT access tokens (`iam.oidc.accept-access-tokens`); null when off. */
  accessTokens: Pick<AccessTokenVerifier, 'verify' | 'verifyCached'> | null;
  /** The gateway's own assertions; null when `iam.forward.assertion` is off. */
  assertions: Pick<AssertionVerifier, 'looksLikeAssertion' | 'verify' | 'tokenHashOf' | 'learnTokenHash' | 'forgetTokenHash'> | null;
  /** The audiences the live policy's routes sign assertions for (they change with a reload). */
  audiences: () => ReadonlySet<string>;
}

/**
 * The one step from a request's credential (http/request-credential.ts) to its caller or to the problem answered
 * instead (docs/http-contract.md, "Authentication"): the proxy and forward-auth, every protected `/iam` endpoint, the
 * host decisions, the OpenID Connect logout and the console ask it, and nothing else turns a credential into a
 * caller, a 401 or a 403. Each place states what it accepts ({@link CallerAccepts}); the problems are the same
 * everywhere. Store and provider outages reject (the place maps them, 503/502), never a guess.
 */
export class CallerStep {
  constructor(private readonly deps: CallerStepDeps) {}

  /** The caller of a credential, with how they proved it; a problem to answer instead, or null where allowed. */
  async callerOf(credential: RequestCredential, accepts: CallerAccepts): Promise<CallerOutcome> {
    if (credential.kind === 'bearer' && accepts.assertion) {
      const viaAssertion = this.assertionSession(credential.token);
      if (viaAssertion !== undefined) {
        const session = await viaAssertion;
        return session instanceof ProblemError ? session : { session, via: 'assertion' };
      }
    }
    const session = await this.sessionOf(credential, accepts);
    if (session === null || session instanceof ProblemError) return session;
    return { session, via: credential.kind === 'cookie' ? 'cookie' : session.record.source === 'access-token' ? 'provider-token' : 'bearer' };
  }

  /**
   * The session of a bearer or cookie credential, without a promise when the caches vouch for it (the proxy's warm
   * path); the assertion is not a credential here ({@link callerOf} reads it).
   */
  sessionOf(credential: RequestCredential, accepts: CallerAccepts): SessionOutcome | Promise<SessionOutcome> {
    if (credential.kind === 'none') return accepts.anonymous || accepts.optional ? null : missing(accepts);
    if (credential.kind === 'malformed') return accepts.optional ? null : problems.unauthenticated(accepts.detail ?? 'The bearer token is malformed.', true);
    if (credential.kind === 'cookie' && credential.crossSite) return problems.crossSiteCookie();
    const token = credential.token;
    const accessTokens = this.deps.accessTokens;
    const verifier = accepts.providerTokens && accessTokens !== null && looksLikeJwt(token) ? accessTokens : this.deps.sessions;
    if (accepts.durableFallback) {
      return verifier
        .verify(token)
        .catch((error: unknown) => this.deps.sessions.verifyFromRecord(token, error))
        .then((session) => session ?? invalid(accepts));
    }
    const cached = verifier.verifyCached(token);
    if (cached !== 'miss') return cached ?? invalid(accepts);
    return verifier.verify(token).then((session) => session ?? invalid(accepts));
  }

  /**
   * A bearer that is this gateway's assertion: its session while it lives (a logout or revocation refuses it at
   * once), else 401. Undefined for any other bearer, which is then read as a token.
   */
  private assertionSession(token: string): Promise<VerifiedSession | ProblemError> | undefined {
    const assertions = this.deps.assertions;
    if (assertions === null || !assertions.looksLikeAssertion(token)) return undefined;
    const assertion = assertions.verify(token, { audiences: this.deps.audiences() });
    if (assertion === null) return undefined;
    return this.liveSession(assertions, assertion).then((session) => session ?? problems.unauthenticated('The session of this assertion has ended.', true));
  }

  /** The assertion's session, reading the user's index only the first time a session is named. */
  private async liveSession(assertions: NonNullable<CallerStepDeps['assertions']>, assertion: VerifiedAssertion): Promise<VerifiedSession | null> {
    const known = assertions.tokenHashOf(assertion);
    const session = await this.deps.sessions.liveSession(assertion.userId, assertion.sessionId, known);
    if (session !== null && known === undefined) assertions.learnTokenHash(assertion, session.tokenHash);
    if (session === null && known !== undefined) assertions.forgetTokenHash(assertion);
    return session;
  }
}

/**
 * The 401 of a request the policy refused for want of a caller (no credential, or a route that needs one): the same
 * challenge as every other, `invalid_token` when a token was sent.
 */
export function authenticationRequired(tokenSent: boolean): ProblemError {
  return problems.unauthenticated('Authentication is required.', tokenSent);
}

function missing(accepts: CallerAccepts): ProblemError {
  const detail = accepts.assertion ? 'A bearer token, the session cookie or an X-IAM-Assertion (as the bearer) is required.' : 'A bearer access token (or the session cookie) is required.';
  return problems.unauthenticated(accepts.detail ?? detail, false);
}

function invalid(accepts: CallerAccepts): ProblemError | null {
  return accepts.optional ? null : problems.unauthenticated(accepts.detail ?? 'The access token is invalid, expired or revoked.', true);
}
