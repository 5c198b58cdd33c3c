/*
 * Request header checks that run before anything else looks at a request (docs/http-contract.md). They close
 * the framing ambiguities used for request smuggling and the credential ambiguities used to slip a
 * second token past the gateway.
 */

/** Outcome of {@link inspectRequestHeaders}. */
export type InboundHeaderInspection = { ok: true; authorization: string | null } | { ok: false; reason: string };

/** Outcome of {@link parseBearerToken}. */
export type BearerCredential =
  | { kind: 'none' }
  | { kind: 'bearer'; token: string }
  /** Another scheme (e.g. Basic): meant for the host, not for the gateway. */
  | { kind: 'other' }
  | { kind: 'malformed' };

import { authorizationCarriesToken, containsGatewayToken } from './forbidden-content';
import { hostCookie } from './host-cookie';

const AUTHORIZATION = 'authorization';
const HOST = 'host';
const CONTENT_LENGTH = 'content-length';
const TRANSFER_ENCODING = 'transfer-encoding';
const CHUNKED = 'chunked';
const BEARER = 'bearer';

/** Compares an ASCII string with a lower-case ASCII constant without allocating. */
function isNamed(value: string, lower: string): boolean {
  return value.length === lower.length && startsWithIgnoreCase(value, lower);
}

/** True when `value` starts with the lower-case ASCII constant `lower`, compared case-insensitively. */
function startsWithIgnoreCase(value: string, lower: string): boolean {
  if (value.length < lower.length) return false;
  for (let i = 0; i < lower.length; i++) {
    const c = value.charCodeAt(i);
    if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== lower.charCodeAt(i)) return false;
  }
  return true;
}

function isOptionalWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

/** RFC 9112 §6.3: Content-Length = 1*DIGIT (a list such as `5, 5` is refused rather than merged). */
function isValidContentLength(value: string): boolean {
  let start = 0;
  let end = value.length;
  while (start < end && isOptionalWhitespace(value.charCodeAt(start))) start++;
  while (end > start && isOptionalWhitespace(value.charCodeAt(end - 1))) end--;
  if (start === end) return false;
  for (let i = start; i < end; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

/** True when the Transfer-Encoding value is exactly `chunked` (case-insensitive, surrounding OWS ignored). */
function isChunkedOnly(value: string): boolean {
  let start = 0;
  let end = value.length;
  while (start < end && isOptionalWhitespace(value.charCodeAt(start))) start++;
  while (end > start && isOptionalWhitespace(value.charCodeAt(end - 1))) end--;
  if (end - start !== CHUNKED.length) return false;
  for (let i = 0; i < CHUNKED.length; i++) {
    const c = value.charCodeAt(start + i);
    if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== CHUNKED.charCodeAt(i)) return false;
  }
  return true;
}

/**
 * Refuses requests whose framing or credentials two parsers could read differently, and returns the
 * single Authorization header. `rawHeaders` is Node's `req.rawHeaders` (name, value, name, value...).
 *
 * - RFC 9112 §6.1 / §6.3 (3): Transfer-Encoding together with Content-Length is refused, not "fixed".
 * - RFC 9112 §6.3 (5): more than one Content-Length, or one that is not 1*DIGIT, is refused.
 * - Transfer-Encoding other than exactly `chunked` (one header) is refused: the gateway streams
 *   bodies as they came, and `gzip, chunked`, `chunked, identity` or `xchunked` are classic
 *   desynchronisation vectors between a proxy and its host.
 * - RFC 9110 §7.2: more than one Host is refused.
 * - docs/http-contract.md: two Authorization headers are a 400 (which one a host reads is undefined).
 * - Method-override headers (`X-HTTP-Method-Override`, `X-HTTP-Method`, `X-Method-Override`) are refused:
 *   the host would run another method than the one authorized.
 * - A gateway token anywhere but `Authorization: Bearer` or the session cookie (another scheme, Basic's base64,
 *   another header or cookie) is refused: the gateway strips only those two, the host would receive the rest.
 */
export function inspectRequestHeaders(rawHeaders: string[]): InboundHeaderInspection {
  let authorization: string | null = null;
  let authorizationCount = 0;
  let hostCount = 0;
  let contentLengthCount = 0;
  let transferEncodingCount = 0;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const value = rawHeaders[i + 1] as string;
    // Cheap dispatch on length before the case-insensitive comparison.
    switch (name.length) {
      case 4:
        if (isNamed(name, HOST)) hostCount++;
        break;
      case 13:
        if (isNamed(name, AUTHORIZATION)) {
          authorizationCount++;
          authorization = value;
          continue;
        }
        if (isNamed(name, 'x-http-method')) return methodOverride(name);
        break;
      case 14:
        if (isNamed(name, CONTENT_LENGTH)) {
          contentLengthCount++;
          if (!isValidContentLength(value)) return { ok: false, reason: 'invalid Content-Length header' };
        }
        break;
      case 17:
        if (isNamed(name, TRANSFER_ENCODING)) {
          transferEncodingCount++;
          if (!isChunkedOnly(value)) return { ok: false, reason: "Transfer-Encoding other than 'chunked'" };
        } else if (isNamed(name, 'x-method-override')) {
          return methodOverride(name);
        }
        break;
      case 22:
        if (isNamed(name, 'x-http-method-override')) return methodOverride(name);
        break;
      default:
        break;
    }
    // The gateway's token belongs in `Authorization: Bearer` or the session cookie (which the gateway removes before
    // forwarding) only; anywhere else the host would receive it.
    if (value.length > 20 && containsGatewayToken(name.length === 6 && isNamed(name, 'cookie') ? hostCookie(value) : value)) {
      return { ok: false, reason: `a gateway access token in the ${name} header (send it as Authorization: Bearer or the session cookie only)` };
    }
  }
  if (authorization !== null && parseBearerToken(authorization).kind === 'other' && authorizationCarriesToken(authorization)) {
    return { ok: false, reason: 'a gateway access token under an Authorization scheme other than Bearer' };
  }
  if (authorizationCount > 1) return { ok: false, reason: 'more than one Authorization header' };
  if (hostCount > 1) return { ok: false, reason: 'more than one Host header' };
  if (contentLengthCount > 1) return { ok: false, reason: 'more than one Content-Length header' };
  if (transferEncodingCount > 1) return { ok: false, reason: 'more than one Transfer-Encoding header' };
  if (transferEncodingCount > 0 && contentLengthCount > 0) {
    return { ok: false, reason: 'both Transfer-Encoding and Content-Length' };
  }
  return { ok: true, authorization };
}

/** A method-override header (the host would run another method than the one authorized). */
function methodOverride(name: string): InboundHeaderInspection {
  return { ok: false, reason: `method-override header ${name} (send the real method)` };
}

/** RFC 9110 §5.6.2 tchar. */
function isTokenChar(c: number): boolean {
  if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) return true;
  switch (c) {
    case 0x21: case 0x23: case 0x24: case 0x25: case 0x26: case 0x27: case 0x2a:
    case 0x2b: case 0x2d: case 0x2e: case 0x5e: case 0x5f: case 0x60: case 0x7c: case 0x7e:
      return true;
    default:
      return false;
  }
}

/** RFC 6750 §2.1 b64token characters before the `=` padding. */
function isB64TokenChar(c: number): boolean {
  return (
    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) ||
    c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e || c === 0x2b || c === 0x2f
  );
}

/**
 * Reads the gateway's bearer token from the Authorization header (RFC 6750 §2.1:
 * `"Bearer" 1*SP b64token`, scheme case-insensitive per RFC 9110 §11.1). Several spaces after the scheme
 * are tolerated. A scheme that is not an RFC 9110 token (e.g. `Bearer\tabc`) is `malformed`, so an odd
 * separator can never make a bearer token look like another scheme and be forwarded to the host.
 */
export function parseBearerToken(authorization: string | null): BearerCredential {
  if (authorization === null) return { kind: 'none' };
  const length = authorization.length;
  let i = 0;
  while (i < length && authorization.charCodeAt(i) !== 0x20) {
    if (!isTokenChar(authorization.charCodeAt(i))) return { kind: 'malformed' };
    i++;
  }
  if (i === 0) return { kind: 'malformed' };
  if (i !== BEARER.length || !startsWithIgnoreCase(authorization, BEARER)) return { kind: 'other' };
  while (i < length && authorization.charCodeAt(i) === 0x20) i++;
  const tokenStart = i;
  while (i < length && isB64TokenChar(authorization.charCodeAt(i))) i++;
  if (i === tokenStart) return { kind: 'malformed' };
  while (i < length && authorization.charCodeAt(i) === 0x3d) i++;
  if (i !== length) return { kind: 'malformed' };
  return { kind: 'bearer', token: authorization.slice(tokenStart) };
}
