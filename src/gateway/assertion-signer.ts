import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, type JsonWebKey, type KeyObject } from 'node:crypto';
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
  readonly jwk: PublicJwk;
  private readonly encodedHeader: string;

  constructor(private readonly options: AssertionOptions) {
    this.privateKey = options.keyFile ? createPrivateKey(readFileSync(options.keyFile, 'utf8')) : generateKeyPairSync('ed25519').privateKey;
    if (this.privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`config: iam.forward.assertion.key-file: ${options.keyFile} is not an Ed25519 private key`);
    const publicJwk = createPublicKey(this.privateKey).export({ format: 'jwk' });
    // RFC 7638 thumbprint as the key id: stable for the same key on every instance.
    const kid = createHash('sha256').update(JSON.stringify({ crv: publicJwk.crv, kty: publicJwk.kty, x: publicJwk.x })).digest('base64url');
    this.jwk = { ...publicJwk, kid, alg: 'EdDSA', use: 'sig' };
    this.encodedHeader = base64url(JSON.stringify({ alg: 'EdDSA', typ: 'JWT', kid }));
  }

  sign(decision: AuthorizationDecision, session: VerifiedSession, method: string, path: string, requestId: string): string {
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
    if (this.options.audience !== null) claims.aud = this.options.audience;
    const signingInput = `${this.encodedHeader}.${base64url(JSON.stringify(claims))}`;
    return `${signingInput}.${sign(null, Buffer.from(signingInput), this.privateKey).toString('base64url')}`;
  }
}

function base64url(text: string): string {
  return Buffer.from(text).toString('base64url');
}
