import { decodeProtectedHeader } from 'jose';
import type { AuditTrail } from '../../audit/audit-trail';
import type { GrantRepository, PrincipalRepository } from '../../domain/iam-repository';
import { ProblemError } from '../../domain/problem';
import { hashToken } from '../../domain/token-hash';
import type { TokenRecord } from '../../domain/token-record';
import type { RevocationRegistry } from '../../sessions/revocation-registry';
import type { VerifiedSession } from '../../sessions/session-service';
import { admitIdentity, principalOf, selectActiveProfile } from '../login-service';
import { attachRule } from './identity-linking';
import type { ClaimMapping } from './oidc-login';
import { identityFromClaims } from './oidc-login';
import { RelyingParty } from './relying-party';
import { isLogoutTokenType, notAnAccessToken } from './token-types';

/** A compact JWS (`header.payload.signature`, base64url) as a bearer: never a gateway token (`iamt_…`). */
const JWT_SHAPE = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const MAX_JWT_LENGTH = 8192;

export const looksLikeJwt = (token: string): boolean => token.length <= MAX_JWT_LENGTH && JWT_SHAPE.test(token);

export interface AccessTokenDeps {
  rp: Pick<RelyingParty, 'issuer' | 'verifyJwt'>;
  /** The `aud` an access token must carry (`iam.oidc.audience`; the configuration makes it differ from the client id). */
  audience: string;
  /** The `typ` values an access token may carry (`iam.oidc.access-token-types`; never the logout token's). */
  types: readonly string[];
  claims: ClaimMapping;
  /** The client type of a provider access token's principal (`API` when configured). */
  clientType: string;
  repository: Pick<PrincipalRepository, 'getUser' | 'ensurePrincipal'> & Pick<GrantRepository, 'listProfiles'>;
  /**
   * Ended sessions, raised user epochs and their instants (every instance's events): a disabled user's tokens stop
   * at once, and a token issued before its user's sessions were all ended is refused whenever it is first presented.
   * The user's record read at a first verification is handed to it too (raiseEpoch), so this instance knows a
   * revocation the database committed before its event arrived.
   */
  revocations: Pick<RevocationRegistry, 'refuses' | 'raiseEpoch'>;
  /** Bound of the verified-token cache. */
  maxEntries: number;
  /** A token whose principal the records refuse is audited (`auth.login.failed`), once per token. */
  audit: Pick<AuditTrail, 'record'>;
}

/** A verified token's session, or null for one whose principal the records refused (remembered briefly). */
interface Entry {
  session: VerifiedSession | null;
  expiresAtMs: number;
}

/**
 * How long a token whose principal the records refused stays refused without asking them again: a client that
 * retries it costs no database reads and no audit row per request; an admin's fix (a link, an enabled user) takes
 * effect for it within this bound.
 */
const REFUSAL_TTL_MS = 30_000;

/**
 * Resource-server mode (`iam.oidc.accept-access-tokens`): `Authorization: Bearer <JWT>` from the provider. The JWT
 * is verified like a logout token (signature by the provider's JWKS with an allowed asymmetric algorithm, `iss`,
 * `aud`, `exp`/`nbf` within the clock tolerance) and must be typed as an access token (RFC 9068: `typ`, and none of
 * an ID token's or logout token's claims). Its claims name the principal exactly as at an OpenID Connect login
 * (same user, identity and domain, the same linking rule), and the gateway's records decide enabled and the active
 * profile. The result is cached by token hash until the token's `exp` (bounded, oldest out first), so only a token's
 * first request reads the database; a user whose sessions are all revoked or who is disabled has every token issued
 * before (its `iat`, which is therefore required as RFC 9068 §2.2 does) refused at once and for good, on every
 * instance, also a token first presented afterwards (the revocation registry's time rule).
 */
export class AccessTokenVerifier {
  private readonly cache = new Map<string, Entry>();

  constructor(private readonly deps: AccessTokenDeps) {
    // The configuration refuses it too; a logout token is never a bearer, whoever builds this verifier.
    if (deps.types.length === 0 || deps.types.some(isLogoutTokenType)) throw new Error('access-token types: at least one, and never logout+jwt');
  }

  /** The cached session of a token, null when it cannot be valid, `'miss'` when only {@link verify} can tell. */
  verifyCached(token: string): VerifiedSession | null | 'miss' {
    const tokenHash = hashToken(token);
    const entry = this.cache.get(tokenHash);
    if (!entry) return 'miss';
    if (entry.session === null) {
      if (entry.expiresAtMs > Date.now()) return null;
      this.cache.delete(tokenHash);
      return 'miss';
    }
    if (entry.expiresAtMs <= Date.now() || this.deps.revocations.refuses(entry.session.record)) {
      this.cache.delete(tokenHash);
      return null;
    }
    return entry.session;
  }

  async verify(token: string): Promise<VerifiedSession | null> {
    const cached = this.verifyCached(token);
    if (cached !== 'miss') return cached;
    let claims;
    try {
      // `iat` is what decides a revocation (RFC 9068 §2.2 requires it): without one, no token could be told apart
      // from one issued before its user's sessions were revoked.
      claims = await this.deps.rp.verifyJwt(token, { audience: this.deps.audience, requiredClaims: ['exp', 'sub', 'iat'] });
    } catch (error) {
      // The provider's keys could not be fetched: 502/504, never a guess. Any other failure: not a valid token.
      const outage = RelyingParty.outageOf(error);
      if (outage) throw outage;
      return null;
    }
    const issuedAtMs = (claims.iat as number) * 1000;
    const expiresAtMs = (claims.exp as number) * 1000;
    // Numbers jose accepts but a Date cannot hold (1e300): not a token, rather than a RangeError later.
    if (!isInstant(issuedAtMs) || !isInstant(expiresAtMs)) return null;
    // Signed by the provider is not enough: its ID tokens and logout tokens are too (RFC 8725 §3.11).
    if (notAnAccessToken(decodeProtectedHeader(token), claims, this.deps.types) !== null) return null;
    let identity;
    try {
      identity = identityFromClaims(claims, this.deps.claims, this.deps.rp.issuer);
    } catch (error) {
      if (error instanceof ProblemError) return null;
      throw error;
    }
    const tokenHash = hashToken(token);
    // The same records decide as for a login (the same rules, the same linking, the same refusals).
    const admitted = await admitIdentity(this.deps.repository, identity, {
      mustExist: this.deps.claims.users === 'existing',
      attach: attachRule(claims, identity, this.deps.claims.linkBy),
    });
    if ('refused' in admitted) {
      this.deps.audit.record({
        action: 'auth.login.failed',
        actorUserId: null,
        targetType: 'user',
        targetId: admitted.userId,
        outcome: 'failure',
        details: { reason: admitted.refused, authenticator: 'oidc-access-token', username: String(claims.sub).slice(0, 200) },
      });
      this.remember(tokenHash, { session: null, expiresAtMs: Math.min((claims.exp as number) * 1000, Date.now() + REFUSAL_TTL_MS) });
      return null;
    }
    const { user } = admitted;
    // What the database says now: a revocation committed on another instance whose event has not arrived yet.
    this.deps.revocations.raiseEpoch(user.userId, user.sessionEpoch ?? 0, user.sessionsRevokedAt?.getTime());
    const profiles = await this.deps.repository.listProfiles(identity.userId);
    const principal = principalOf(identity, admitted, selectActiveProfile(profiles, this.deps.clientType)?.profileId ?? null);
    const record: TokenRecord = {
      // What the host receives as X-IAM-Session-Id: the token's own id when it has one.
      sessionId: `at:${typeof claims.jti === 'string' && claims.jti.length <= 100 ? claims.jti : tokenHash.slice(0, 32)}`,
      principal,
      clientType: this.deps.clientType,
      // The provider's issue time (whole seconds, its clock): the revocation registry compares it with the user's
      // revocation instant.
      createdAt: new Date(issuedAtMs).toISOString(),
      expiresAt: new Date(expiresAtMs).toISOString(),
      idleTimeoutMs: 0,
      sessionEpoch: user.sessionEpoch ?? 0,
      source: 'access-token',
    };
    const session: VerifiedSession = { tokenHash, record };
    if (this.deps.revocations.refuses(record)) return null;
    this.remember(tokenHash, { session, expiresAtMs });
    return session;
  }

  private remember(tokenHash: string, entry: Entry): void {
    this.cache.delete(tokenHash);
    this.cache.set(tokenHash, entry);
    while (this.cache.size > this.deps.maxEntries) {
      const oldest = this.cache.keys().next().value as string;
      this.cache.delete(oldest);
    }
  }
}

/** True for epoch milliseconds a Date can hold (ECMA-262: ±8.64e15). */
const isInstant = (ms: number): boolean => Number.isFinite(ms) && Math.abs(ms) <= 8.64e15;
