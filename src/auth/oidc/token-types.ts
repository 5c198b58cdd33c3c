import type { JWTPayload, ProtectedHeaderParameters } from 'jose';

/** RFC 9068 §2.1: the `typ` of a JWT access token (either spelling; see {@link normalizeTyp}). */
export const DEFAULT_ACCESS_TOKEN_TYPES: readonly string[] = ['at+jwt', 'application/at+jwt'];

/** OpenID Connect Back-Channel Logout 1.0 §2.4: the `typ` of a logout token; never an access token's. */
const LOGOUT_TOKEN_TYPE = 'logout+jwt';

/**
 * Claims only the provider's other JWTs carry: an ID token's `nonce`, `at_hash`, `c_hash` (OpenID Connect Core 1.0
 * §2, §3.3.2.11) and `s_hash` (FAPI), a logout token's (or any security event token's) `events` (RFC 8417 §2.2).
 */
const FOREIGN_CLAIMS = ['nonce', 'at_hash', 'c_hash', 's_hash', 'events'] as const;

/**
 * A `typ` as compared: media types are case-insensitive, and RFC 7515 §4.1.9 lets `application/` be left out, so
 * `application/AT+JWT` and `at+jwt` are the same type.
 */
export function normalizeTyp(typ: string): string {
  const lower = typ.toLowerCase();
  return lower.startsWith('application/') && !lower.slice('application/'.length).includes('/') ? lower.slice('application/'.length) : lower;
}

/** True for a type that names a logout token (refused as an access-token type whatever the configuration says). */
export const isLogoutTokenType = (typ: string): boolean => normalizeTyp(typ) === LOGOUT_TOKEN_TYPE;

/**
 * Why a verified JWT is not an access token (RFC 8725 §3.11, RFC 9068 §4), or null when it is one: its `typ` must be
 * one of `allowedTypes` and never the logout token's, and it must carry none of the claims that mark an ID token or
 * a logout token. The provider signs all three with the same keys, and an ID token's `aud` is a client id, so
 * without this an ID token (or a logout token) for that audience would pass as a bearer.
 */
export function notAnAccessToken(header: ProtectedHeaderParameters, claims: JWTPayload, allowedTypes: readonly string[]): string | null {
  const typ = typeof header.typ === 'string' ? header.typ : null;
  if (typ === null) return 'no typ header (an access token is explicitly typed)';
  if (isLogoutTokenType(typ) || !allowedTypes.some((allowed) => normalizeTyp(allowed) === normalizeTyp(typ))) return `typ "${typ.slice(0, 50)}" is not an access-token type`;
  const foreign = FOREIGN_CLAIMS.find((claim) => claim in claims);
  return foreign === undefined ? null : `it carries "${foreign}" (an ID token or logout token claim)`;
}
