import * as client from 'openid-client';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { ProblemError } from '../../domain/problem';

/** The provider and this client (`iam.oidc.*`), as the relying party needs them. */
export interface RelyingPartySettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  postLogoutRedirectUri: string | null;
  scopes: readonly string[];
  /** Asymmetric JWS algorithms accepted on id tokens, logout tokens and access tokens. */
  algorithms: readonly string[];
  clockToleranceMs: number;
  /** Each call to the provider (discovery, token, JWKS). */
  timeoutMs: number;
}

/** What a login needs to remember between the redirect to the provider and the callback. */
export interface PendingLogin {
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** How long a failed discovery is remembered before the provider is asked again (a login does not hammer a down IdP). */
const DISCOVERY_RETRY_MS = 5_000;
/** A JWKS refetch for an unknown `kid` happens at most this often (an unknown-kid storm costs one fetch per window). */
const JWKS_COOLDOWN_MS = 30_000;
/** A JWKS is trusted this long before it is fetched again. */
const JWKS_MAX_AGE_MS = 10 * 60_000;

/**
 * The gateway as an OpenID Connect relying party (openid-client, a certified RP): discovery (lazy, cached, retried),
 * the authorization code flow with PKCE, `state` and `nonce`, and JWT verification against the provider's JWKS for
 * logout tokens and access tokens (jose; cached, refetched at most every 30 s on an unknown `kid`). Every call is
 * bounded by `timeoutMs`: a provider that is down is 502 IAM_IDP_UNAVAILABLE, a slow one 504 IAM_IDP_TIMEOUT.
 */
export class RelyingParty {
  private configuration: Promise<client.Configuration> | null = null;
  private failedAt = 0;
  private jwks: JWTVerifyGetKey | null = null;

  constructor(private readonly settings: RelyingPartySettings) {}

  get issuer(): string {
    return this.settings.issuer;
  }

  get clientId(): string {
    return this.settings.clientId;
  }

  /** The provider's authorization URL for a new login, and what the callback must check it against. */
  async beginLogin(): Promise<{ url: URL; pending: PendingLogin }> {
    const config = await this.discovered();
    const pending: PendingLogin = { state: client.randomState(), nonce: client.randomNonce(), codeVerifier: client.randomPKCECodeVerifier() };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: this.settings.redirectUri,
      scope: ['openid', ...this.settings.scopes.filter((scope) => scope !== 'openid')].join(' '),
      code_challenge: await client.calculatePKCECodeChallenge(pending.codeVerifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    return { url, pending };
  }

  /**
   * The callback: checks `state` (and the `iss` parameter, RFC 9207, when the provider sends it), redeems the code
   * with the PKCE verifier, validates the id token (signature against the JWKS, `iss`, `aud`, `exp`, `iat`, `nonce`)
   * and answers its claims. A provider error or any failed check is 401 IAM_OIDC_LOGIN_FAILED.
   */
  async completeLogin(query: URLSearchParams, pending: PendingLogin): Promise<{ claims: JWTPayload; idToken: string }> {
    const config = await this.discovered();
    const callback = new URL(this.settings.redirectUri);
    callback.search = query.toString();
    try {
      const tokens = await client.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
      const claims = tokens.claims();
      if (!claims || typeof tokens.id_token !== 'string') throw new ProblemError('IAM_OIDC_LOGIN_FAILED', 'The identity provider answered without an id token.');
      return { claims: claims as JWTPayload, idToken: tokens.id_token };
    } catch (error) {
      throw this.problemOf(error, 'The identity provider did not complete the login');
    }
  }

  /**
   * RP-initiated logout at the provider, when it offers `end_session_endpoint`; null otherwise. `idTokenHint`: the ID
   * token of the login being ended (OpenID Connect RP-Initiated Logout 1.0 `id_token_hint`), which lets the provider
   * end its own session without asking and honour `post_logout_redirect_uri`.
   */
  async endSessionUrl(idTokenHint: string | null = null): Promise<URL | null> {
    const config = await this.discovered();
    if (!config.serverMetadata().end_session_endpoint) return null;
    const parameters: Record<string, string> = { client_id: this.settings.clientId };
    if (idTokenHint !== null) parameters.id_token_hint = idTokenHint;
    if (this.settings.postLogoutRedirectUri) parameters.post_logout_redirect_uri = this.settings.postLogoutRedirectUri;
    return client.buildEndSessionUrl(config, parameters);
  }

  /**
   * Verifies a JWT the provider signed (a logout token, an access token): signature by a key of the provider's JWKS
   * with an allowed asymmetric algorithm (never `none`, never HMAC), `iss`, `aud`, `exp`/`nbf`/`iat` within the clock
   * tolerance. Answers the payload, or throws jose's error (the caller decides the answer).
   */
  async verifyJwt(token: string, options: { audience: string; typ?: string; requiredClaims?: string[]; maxTokenAgeSeconds?: number }): Promise<JWTPayload> {
    const jwks = await this.keySet();
    const { payload } = await jwtVerify(token, jwks, {
      issuer: this.settings.issuer,
      audience: options.audience,
      algorithms: [...this.settings.algorithms],
      clockTolerance: Math.round(this.settings.clockToleranceMs / 1000),
      ...(options.typ ? { typ: options.typ } : {}),
      ...(options.requiredClaims ? { requiredClaims: options.requiredClaims } : {}),
      ...(options.maxTokenAgeSeconds ? { maxTokenAge: options.maxTokenAgeSeconds } : {}),
    });
    return payload;
  }

  /**
   * The problem for an error of {@link verifyJwt} that means the provider or its keys could not be reached (502, or
   * 504 on a timeout), not that the token is bad; null for a bad token.
   */
  static outageOf(error: unknown): ProblemError | null {
    if (error instanceof ProblemError) return error;
    if (error instanceof joseErrors.JWKSTimeout) return new ProblemError('IAM_IDP_TIMEOUT', "The identity provider's keys did not arrive in time.", { cause: error });
    // A fetch that failed, a JWKS that is not one, a non-200 answer (jose's generic error).
    if (isFetchFailure(error) || error instanceof joseErrors.JWKSInvalid || (error instanceof joseErrors.JOSEError && error.code === 'ERR_JOSE_GENERIC')) {
      return new ProblemError('IAM_IDP_UNAVAILABLE', "The identity provider's keys could not be fetched.", { cause: error });
    }
    return null;
  }

  private async keySet(): Promise<JWTVerifyGetKey> {
    if (this.jwks) return this.jwks;
    const config = await this.discovered();
    const uri = config.serverMetadata().jwks_uri;
    if (!uri) throw new ProblemError('IAM_IDP_UNAVAILABLE', 'The identity provider publishes no jwks_uri.');
    this.jwks = createRemoteJWKSet(new URL(uri), { timeoutDuration: this.settings.timeoutMs, cooldownDuration: JWKS_COOLDOWN_MS, cacheMaxAge: JWKS_MAX_AGE_MS });
    return this.jwks;
  }

  /** Discovery once; a failure is remembered for a few seconds, then the next login asks again. */
  private discovered(): Promise<client.Configuration> {
    if (this.configuration && !(this.failedAt > 0 && Date.now() - this.failedAt > DISCOVERY_RETRY_MS)) return this.configuration;
    this.failedAt = 0;
    const { issuer, clientId, clientSecret, algorithms, timeoutMs } = this.settings;
    const insecure = new URL(issuer).protocol === 'http:';
    this.configuration = client
      .discovery(
        new URL(issuer),
        clientId,
        // The id token's algorithm must be one of ours (oauth4webapi accepts a list here); clock tolerance in seconds.
        { id_token_signed_response_alg: [...algorithms] as unknown as string, [client.clockTolerance]: Math.round(this.settings.clockToleranceMs / 1000) },
        // Resource-server mode alone has no secret: it only reads the provider's metadata and keys.
        clientSecret ? client.ClientSecretBasic(clientSecret) : client.None(),
        { timeout: Math.max(1, Math.ceil(timeoutMs / 1000)), execute: [...(insecure ? [client.allowInsecureRequests] : []), client.enableNonRepudiationChecks] },
      )
      .catch((error: unknown) => {
        this.failedAt = Date.now();
        throw this.problemOf(error, 'The identity provider could not be discovered');
      });
    return this.configuration;
  }

  /** An openid-client or network failure → the problem the browser sees (the cause goes to the log). */
  private problemOf(error: unknown, context: string): ProblemError {
    if (error instanceof ProblemError) return error;
    const cause = error as { name?: string; code?: string; error?: string; error_description?: string; cause?: { name?: string; code?: string } };
    const names = [cause?.name, cause?.code, cause?.cause?.name, cause?.cause?.code];
    if (names.some((name) => name === 'TimeoutError' || name === 'AbortError' || name === 'UND_ERR_CONNECT_TIMEOUT' || name === 'UND_ERR_HEADERS_TIMEOUT')) {
      return new ProblemError('IAM_IDP_TIMEOUT', `${context}: it did not answer within ${this.settings.timeoutMs} ms.`, { cause: error });
    }
    if (cause?.name === 'ResponseBodyError' && typeof cause.error === 'string') {
      // The provider refused (an expired or replayed code, a wrong verifier...): a failed login, not an outage.
      return new ProblemError('IAM_OIDC_LOGIN_FAILED', `${context}: it answered ${cause.error}.`, { cause: error });
    }
    if (cause?.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' || cause?.code === 'OAUTH_RESPONSE_IS_NOT_JSON' || isFetchFailure(error) || names.some((name) => name === 'ECONNREFUSED' || name === 'ENOTFOUND' || name === 'ECONNRESET' || name === 'UND_ERR_SOCKET')) {
      return new ProblemError('IAM_IDP_UNAVAILABLE', `${context}: it could not be reached or did not answer usefully.`, { cause: error });
    }
    // A bug of ours (a bad argument) is no refusal by the provider: 500, logged.
    if (cause?.code === 'ERR_INVALID_ARG_VALUE' || cause?.code === 'ERR_INVALID_ARG_TYPE') return new ProblemError('IAM_INTERNAL_ERROR', 'An internal error occurred.', { cause: error });
    // Every other check that failed (state, iss, nonce, signature, expiry, audience...): the login is refused.
    return new ProblemError('IAM_OIDC_LOGIN_FAILED', `${context}: ${cause?.error_description ?? 'a check of its answer failed'}.`, { cause: error });
  }
}

/** `fetch()` rejected (nothing listening, reset, DNS): undici's `TypeError('fetch failed')` with the network error as cause. */
function isFetchFailure(error: unknown): boolean {
  // By name, not instanceof: the error may come from another realm (undici's, a test runner's).
  let current = error as { name?: unknown; message?: unknown; cause?: unknown } | null | undefined;
  for (let depth = 0; current !== null && typeof current === 'object' && depth < 3; depth++) {
    if (current.name === 'TypeError' && current.message === 'fetch failed') return true;
    current = current.cause as typeof current;
  }
  return false;
}
