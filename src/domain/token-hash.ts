import * as crypto from 'node:crypto';
import { createHash, randomBytes } from 'node:crypto';

/** One-shot `crypto.hash` (Node ≥ 20.12) skips the Hash object: about a third cheaper per request. */
const oneShotHash = (crypto as unknown as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

/** Every access token starts with this marker, so leaked tokens are recognisable by secret scanners (docs/http-contract.md). */
export const TOKEN_PREFIX = 'iamt_';

/** Random bytes per token: 256 bits (docs/http-contract.md). */
export const TOKEN_RANDOM_BYTES = 32;

/** `iamt_` + unpadded base64url of 32 bytes (ceil(32 * 8 / 6) = 43 characters). */
export const TOKEN_LENGTH = TOKEN_PREFIX.length + Math.ceil((TOKEN_RANDOM_BYTES * 8) / 6);

/**
 * The store key of a token: its SHA-256 in lowercase hex. Only this digest is ever stored, so a dump of
 * the token store cannot be replayed as bearer tokens.
 */
export function hashToken(token: string): string {
  return oneShotHash ? oneShotHash('sha256', token, 'hex') : createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A new access token: `iamt_` + base64url (RFC 4648 §5, no padding) of 256 bits from the CSPRNG. */
export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(TOKEN_RANDOM_BYTES).toString('base64url');
}

/**
 * True when `token` has the exact shape `generateToken` produces (prefix, length, base64url alphabet).
 * Runs per request before any store round trip, so it is a plain char scan, not a regex. Accepts `unknown`
 * so a missing or repeated header value is simply refused.
 */
export function isWellFormedToken(token: unknown): boolean {
  if (typeof token !== 'string' || token.length !== TOKEN_LENGTH || !token.startsWith(TOKEN_PREFIX)) {
    return false;
  }
  for (let i = TOKEN_PREFIX.length; i < token.length; i++) {
    const c = token.charCodeAt(i);
    const isBase64Url =
      (c >= 0x41 && c <= 0x5a) || // A-Z
      (c >= 0x61 && c <= 0x7a) || // a-z
      (c >= 0x30 && c <= 0x39) || // 0-9
      c === 0x2d || // -
      c === 0x5f; // _
    if (!isBase64Url) return false;
  }
  return true;
}
