import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type JsonWebKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AuthorizationDecision } from '../authz/decision';
import type { VerifiedSession } from '../sessions/session-service';
import { forwardedAuthorization } from './identity-headers';

export interface AssertionOptions {
  ttlMs: number;
  issuer: string;
  audience: string | null;
  /** PEM Ed25519 private key; null = a key generated now (only one instance can then be verified). */
  keyFile: string | null;
}

/** A public key in the JWK set at `/iam/.well-known/jwks.json` (RFC 7517, RFC 8037 for OKP/Ed25519). */
export type PublicJwk = JsonWebKey & { kid: string; alg: 'EdDSA'; use: 'sig' };

/**
 * Signs the optional `X-IAM-Assertion` (docs/http-contract.md): a short-lived EdDSA JWT (RFC 7519) stating what the
 * gateway authorized — who, which session and profile, which permission, which method and path — so a host
 * can verify the X-IAM-* headers came from the gateway and not from someone who reached it directly.
 */
export class AssertionSigner {
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;
  readonly jwk: PublicJwk;
  private readonly encodedHeader: string;

  constructor(private readonly options: AssertionOptions) {
    this.privateKey = options.keyFile ? createPrivateKey(readFileSync(options.keyFile, 'utf8')) : generateKeyPairSync('ed25519').privateKey;
    if (this.privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`config: iam.forward.assertion.key-file: ${options.keyFile} is not an Ed25519 private key`);
    this.publicKey = createPublicKey(this.privateKey);
    const publicJwk = this.publicKey.export({ format: 'jwk' });
    // RFC 7638 thumbprint as the key id: stable for the same key on every instance.
    const kid = createHash('sha256').update(JSON.stringify({ crv: publicJwk.crv, kty: publicJwk.kty, x: publicJwk.x })).digest('base64url');
    this.jwk = { ...publicJwk, kid, alg: 'EdDSA', use: 'sig' };
    this.encodedHeader = base64url(JSON.stringify({ alg: 'EdDSA', typ: 'JWT', kid }));
  }

  /** The encoded header every assertion of this signer starts with (`<header>.`). */
  get headerPrefix(): string {
    return `${this.encodedHeader}.`;
  }

  /**
   * Verifies an assertion this gateway signed (a host sends it back as a bearer to ask for decisions): the exact
   * header of this signer (its `kid`, `alg: EdDSA`), the signature by this key, `iss`, an `aud` this gateway issues
   * (the configured one, or one of `audiences`: the policy routes'), and `exp` (no tolerance: assertions live
   * `iam.forward.assertion.ttl`). Null for anything else — a provider's token, another gateway's assertion, a tampered
   * or expired one. The caller still checks that the session lives. `htm`/`htu` are not compared: the assertion names
   * a session here, and a host asks about other requests than the one it received.
   */
  verify(token: string, { audiences = NO_AUDIENCES, nowMs = Date.now() }: { audiences?: ReadonlySet<string>; nowMs?: number } = {}): VerifiedAssertion | null {
    if (token.length > 8192 || !token.startsWith(this.headerPrefix)) return null;
    const parts = token.split('.');
    if (parts.length !== 3) return null;
    const [header, payload, signature] = parts as [string, string, string];
    if (!verify(null, Buffer.from(`${header}.${payload}`), this.publicKey, Buffer.from(signature, 'base64url'))) return null;
    let claims: Record<string, unknown>;
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    } catch {
      return null;
    }
    if (claims.iss !== this.options.issuer) return null;
    if (!this.issues(claims.aud, audiences)) return null;
    if (typeof claims.exp !== 'number' || claims.exp * 1000 <= nowMs) return null;
    if (typeof claims.sub !== 'string' || typeof claims.sid !== 'string') return null;
    return { userId: claims.sub, sessionId: claims.sid, expiresAtMs: claims.exp * 1000 };
  }

  /** Whether this gateway signs assertions with this `aud`: the configured one (none, if none is) or a route's. */
  private issues(aud: unknown, audiences: ReadonlySet<string>): boolean {
    if (aud === undefined) return this.options.audience === null;
    return typeof aud === 'string' && (aud === this.options.audience || audiences.has(aud));
  }

  /**
   * `audience`: the matched route's (policy `audience`), else the configured one. `htm`/`htu` are the method and the
   * path exactly as forwarded to the host (normalized; the query, which no decision reads, left out), so a host can
   * refuse the assertion on any other request.
   */
  sign(decision: AuthorizationDecision, session: VerifiedSession, method: string, path: string, requestId: string, audience: string | null = null): string {
    const now = Math.floor(Date.now() / 1000);
    const principal = session.record.principal;
    const forwarded = forwardedAuthorization(decision);
    const claims: Record<string, unknown> = {
      iss: this.options.issuer,
      sub: principal.userId,
      iat: now,
      exp: now + Math.max(1, Math.round(this.options.ttlMs / 1000)),
      jti: requestId,
      sid: session.record.sessionId,
      identity_id: principal.identityId,
      identity_domain: principal.identityDomain,
      // Only what the decision verified: no unchecked profile, no permission on a shadow denial.
      profile_id: forwarded.profileId,
      permission: forwarded.permission,
      decision_id: decision.decisionId,
      htm: method,
      htu: path,
    };
    if (forwarded.shadowDenied !== null) claims.shadow_denied = forwarded.shadowDenied;
    const aud = audience ?? this.options.audience;
    if (aud !== null) claims.aud = aud;
    const signingInput = `${this.encodedHeader}.${base64url(JSON.stringify(claims))}`;
    return `${signingInput}.${sign(null, Buffer.from(signingInput), this.privateKey).toString('base64url')}`;
  }
}

const NO_AUDIENCES: ReadonlySet<string> = new Set();

/** What an assertion names once verified: the session it was issued for. */
export interface VerifiedAssertion {
  userId: string;
  sessionId: string;
  expiresAtMs: number;
}

/** A compact JWS whose header is the signer's own (`alg: EdDSA`, its `kid`): worth verifying as an assertion. */
export function looksLikeAssertion(token: string, signer: AssertionSigner): boolean {
  return token.startsWith(signer.headerPrefix);
}

function base64url(text: string): string {
  return Buffer.from(text).toString('base64url');
}
