import { verify, type KeyObject } from 'node:crypto';
import { hashToken } from '../domain/token-hash';

/** What verifies the gateway's own assertions: the signer's public key, its header, issuer and configured audience. */
export interface AssertionKey {
  publicKey: KeyObject;
  /** The encoded header every assertion of the signer starts with (`<header>.`): its `kid` and `alg: EdDSA`. */
  headerPrefix: string;
  issuer: string;
  /** `iam.forward.assertion.audience`; null: assertions without a route's audience carry no `aud`. */
  audience: string | null;
}

/** What an assertion names once verified: the session it was issued for. */
export interface VerifiedAssertion {
  userId: string;
  sessionId: string;
  expiresAtMs: number;
}

interface Entry extends VerifiedAssertion {
  /** The `aud` it carries: checked again on every use, since the policy's audiences change with a reload. */
  aud: unknown;
}

/** Bound of the verified-assertion cache and of the sessions' token hashes it remembers. */
const DEFAULT_MAX_ENTRIES = 10_000;
const NO_AUDIENCES: ReadonlySet<string> = new Set();

/**
 * Verifies an `X-IAM-Assertion` this gateway signed (a host sends it back as a bearer to ask for decisions): the exact
 * header of the signer (its `kid`, `alg: EdDSA`), the signature by its key, `iss`, an `aud` this gateway issues (the
 * configured one, or one of `audiences`: the policy routes'), and `exp` (no tolerance: assertions live
 * `iam.forward.assertion.ttl`). Null for anything else — a provider's token, another gateway's assertion, a tampered
 * or expired one. `htm`/`htu` are not compared: the assertion names a session here, and a host asks about other
 * requests than the one it received.
 *
 * A host sends the same assertion for each of its checks: a verified one is kept (bounded, oldest out first, keyed by
 * the token's hash, never by the token) until its `exp`, so only its first use costs a signature verification. The
 * token hash of each session an assertion named is kept too, so a later assertion of that session costs one token
 * store read (none on a warm session cache) instead of the user's index and then the token.
 */
export class AssertionVerifier {
  private readonly verified = new Map<string, Entry>();
  private readonly sessionTokens = new Map<string, string>();

  constructor(
    private readonly key: AssertionKey,
    private readonly maxEntries = DEFAULT_MAX_ENTRIES,
  ) {}

  /** A cheap test before hashing or verifying: the signer's own header. */
  looksLikeAssertion(token: string): boolean {
    return token.length <= 8192 && token.startsWith(this.key.headerPrefix);
  }

  verify(token: string, { audiences = NO_AUDIENCES, nowMs = Date.now() }: { audiences?: ReadonlySet<string>; nowMs?: number } = {}): VerifiedAssertion | null {
    if (!this.looksLikeAssertion(token)) return null;
    const hash = hashToken(token);
    let entry = this.verified.get(hash);
    if (entry === undefined) {
      const fresh = this.verifySignature(token);
      if (fresh === null) return null;
      entry = fresh;
      remember(this.verified, hash, entry, this.maxEntries);
    }
    if (entry.expiresAtMs <= nowMs) {
      this.verified.delete(hash);
      return null;
    }
    if (!this.issues(entry.aud, audiences)) return null;
    return { userId: entry.userId, sessionId: entry.sessionId, expiresAtMs: entry.expiresAtMs };
  }

  /** The token hash of a session an earlier assertion named, if this verifier learnt it. */
  tokenHashOf(assertion: VerifiedAssertion): string | undefined {
    return this.sessionTokens.get(sessionKey(assertion));
  }

  /** Learns the token hash of the session an assertion named (a session keeps its token for life). */
  learnTokenHash(assertion: VerifiedAssertion, tokenHash: string): void {
    remember(this.sessionTokens, sessionKey(assertion), tokenHash, this.maxEntries);
  }

  /** Forgets a session whose token is gone (it ended). */
  forgetTokenHash(assertion: VerifiedAssertion): void {
    this.sessionTokens.delete(sessionKey(assertion));
  }

  private verifySignature(token: string): Entry | null {
    const parts = token.split('.');
    if (parts.length !== 3) return null;
    const [header, payload, signature] = parts as [string, string, string];
    if (!verify(null, Buffer.from(`${header}.${payload}`), this.key.publicKey, Buffer.from(signature, 'base64url'))) return null;
    let claims: Record<string, unknown>;
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    } catch {
      return null;
    }
    if (claims.iss !== this.key.issuer) return null;
    if (typeof claims.exp !== 'number' || !Number.isFinite(claims.exp)) return null;
    if (typeof claims.sub !== 'string' || typeof claims.sid !== 'string') return null;
    return { userId: claims.sub, sessionId: claims.sid, expiresAtMs: claims.exp * 1000, aud: claims.aud };
  }

  /** Whether this gateway signs assertions with this `aud`: the configured one (none, if none is) or a route's. */
  private issues(aud: unknown, audiences: ReadonlySet<string>): boolean {
    if (aud === undefined) return this.key.audience === null;
    return typeof aud === 'string' && (aud === this.key.audience || audiences.has(aud));
  }
}

const sessionKey = (assertion: VerifiedAssertion): string => `${assertion.userId}\u0000${assertion.sessionId}`;

function remember<V>(map: Map<string, V>, key: string, value: V, maxEntries: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > maxEntries) map.delete(map.keys().next().value as string);
}
