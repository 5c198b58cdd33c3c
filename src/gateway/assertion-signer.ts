import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, type JsonWebKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AssertionKey } from '../auth/assertion-verifier';
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
export type PublicJwk = JsonWebKey & { kty: 'OKP'; kid: string; alg: 'EdDSA'; use: 'sig' };

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
    // Ed25519 is an OKP key (RFC 8037): the exported `kty` already says so, its type does not.
    this.jwk = { ...publicJwk, kty: 'OKP', kid, alg: 'EdDSA', use: 'sig' };
    this.encodedHeader = base64url(JSON.stringify({ alg: 'EdDSA', typ: 'JWT', kid }));
  }

  /** The encoded header every assertion of this signer starts with (`<header>.`). */
  get headerPrefix(): string {
    return `${this.encodedHeader}.`;
  }

  /** What verifies this signer's assertions (auth/assertion-verifier.ts): its public key, header, issuer, audience. */
  get key(): AssertionKey {
    return { publicKey: this.publicKey, headerPrefix: this.headerPrefix, issuer: this.options.issuer, audience: this.options.audience };
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

function base64url(text: string): string {
  return Buffer.from(text).toString('base64url');
}
