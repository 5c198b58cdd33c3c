import { containsGatewayToken, findMethodOverrideParameter, isAsciiLookalike } from './forbidden-content';
import type { NormalizeOptions, NormalizedTarget } from './request-target';

/*
 * One left-to-right scan of the request target (docs/http-contract.md). The matcher, the decision and the host
 * all see the path this returns, so any byte sequence two parsers could read differently is refused
 * instead of guessed: encoded '/' and '\' (CVE-2021-29492-style slash smuggling), double encoding,
 * invalid UTF-8, NUL and controls, `;` path parameters (Tomcat `/..;/` traversal) unless enabled.
 *
 * While nothing needs rewriting the output is implicitly `raw[pathStart, i)`; the first rewrite
 * materializes it, so an already normal path is returned as a substring with no building.
 */

const PERCENT = 0x25;
const SLASH = 0x2f;
const QUESTION = 0x3f;
const HASH = 0x23;
const BACKSLASH = 0x5c;
const SEMICOLON = 0x3b;
const DOT = 0x2e;

const UPPER_HEX = '0123456789ABCDEF';

/** RFC 3986 §2.3 unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~" (indexed by byte). */
const UNRESERVED = new Uint8Array(128);
for (let c = 0x30; c <= 0x39; c++) UNRESERVED[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) UNRESERVED[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) UNRESERVED[c] = 1;
for (const c of [0x2d, 0x2e, 0x5f, 0x7e]) UNRESERVED[c] = 1;

function refuse(reason: string): NormalizedTarget {
  return { ok: false, reason };
}

/** Value of one hex digit, or -1. */
function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  const lower = code | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/** True when `raw[i..]` starts with `prefix` compared case-insensitively (`prefix` is lower case ASCII). */
function startsWithIgnoreCase(raw: string, i: number, prefix: string): boolean {
  if (raw.length - i < prefix.length) return false;
  for (let k = 0; k < prefix.length; k++) {
    const c = raw.charCodeAt(i + k);
    const lower = c >= 0x41 && c <= 0x5a ? c | 0x20 : c;
    if (lower !== prefix.charCodeAt(k)) return false;
  }
  return true;
}

function equalsIgnoreCase(raw: string, start: number, end: number, expected: string): boolean {
  return end - start === expected.length && startsWithIgnoreCase(raw, start, expected.toLowerCase());
}

/**
 * Where the path of an absolute-form target starts (RFC 9112 §3.2.2), -1 when its authority is not
 * this gateway's Host, or a refusal reason.
 */
function absoluteFormPathStart(raw: string, host: string | undefined): number | string {
  let i: number;
  if (startsWithIgnoreCase(raw, 0, 'http://')) i = 7;
  else if (startsWithIgnoreCase(raw, 0, 'https://')) i = 8;
  else return 'request target must be an absolute path';
  const authorityStart = i;
  while (i < raw.length) {
    const c = raw.charCodeAt(i);
    if (c === SLASH || c === QUESTION) break;
    // RFC 9110 §4.2.4: userinfo in an http(s) URI is an error; '#' is never part of a request target.
    if (c === 0x40 || c === HASH) return 'request target with userinfo or fragment';
    i++;
  }
  if (host === undefined || !equalsIgnoreCase(raw, authorityStart, i, host) || i === authorityStart) {
    return 'absolute-form target names another host';
  }
  return i;
}

/**
 * Normalizes a request target once, before matching (docs/http-contract.md): percent-decodes unreserved
 * characters only (other escapes kept, upper-case hex), removes dot segments (RFC 3986 §5.2.4), merges
 * repeated `/`, keeps a trailing `/`, and returns the query untouched. Refuses whatever cannot be
 * interpreted the same way by every parser behind the gateway. `rawTarget` is Node's `req.url`.
 */
export function normalizeRequestTarget(rawTarget: string, options: NormalizeOptions): NormalizedTarget {
  const raw = rawTarget;
  if (options.maxLength !== undefined && raw.length > options.maxLength) return refuse('request target too long');
  if (raw.length === 0) return refuse('empty request target');

  let pathStart = 0;
  const first = raw.charCodeAt(0);
  if (first !== SLASH) {
    // RFC 9112 §3.2.3/§3.2.4: asterisk-form is for OPTIONS to the server itself, authority-form for
    // CONNECT; neither names a host resource.
    if (raw === '*') return refuse('asterisk-form target not accepted');
    const start = absoluteFormPathStart(raw, options.host);
    if (typeof start === 'string') return refuse(start);
    pathStart = start;
  }

  // Locate the query first so the path scan knows where it ends.
  let pathEnd = pathStart;
  while (pathEnd < raw.length && raw.charCodeAt(pathEnd) !== QUESTION) pathEnd++;
  for (let q = pathEnd + 1; q < raw.length; q++) {
    const c = raw.charCodeAt(q);
    if (c <= 0x20 || c >= 0x7f) return refuse('control or non-ASCII character in query');
    if (c === HASH) return refuse('fragment in request target');
  }
  const search = pathEnd < raw.length ? raw.slice(pathEnd) : '';
  if (search.length > 0 && findMethodOverrideParameter(search) !== null) return refuse('method-override parameter in query (send the real method)');
  if (raw.length > 24 && containsGatewayToken(raw)) return refuse('a gateway access token in the request target (send it as Authorization: Bearer only)');

  // Absolute-form with an empty path means "/" (RFC 9112 §3.2.2).
  if (pathStart === pathEnd) return { ok: true, path: '/', search };

  const allowParameters = options.allowPathParameters;
  /** The output built so far, or null while it still equals `raw.slice(pathStart, slash)`. */
  let out: string | null = null;
  let i = pathStart; // always on a '/' at the top of the loop

  while (i < pathEnd) {
    const slash = i;
    const segmentStart = ++i;
    /** This segment rewritten, or null while it equals `raw.slice(segmentStart, i)`. */
    let segment: string | null = null;
    let copyFrom = segmentStart;
    let nameLength = 0; // decoded characters before the first ';'
    let nameAllDots = true;
    let inParameters = false;
    // RFC 3629 §4: remaining continuation bytes and the allowed range of the next one.
    let utf8Needed = 0;
    let utf8Low = 0x80;
    let utf8High = 0xbf;
    let codePoint = 0;

    while (i < pathEnd) {
      const c = raw.charCodeAt(i);
      if (c === SLASH) break;
      if (c !== PERCENT) {
        if (utf8Needed !== 0) return refuse('invalid UTF-8 in path');
        if (c <= 0x20 || c >= 0x7f) return refuse('control or non-ASCII character in path');
        if (c === BACKSLASH) return refuse("'\\' in path");
        if (c === HASH) return refuse('fragment in request target');
        if (c === SEMICOLON) {
          if (!allowParameters) return refuse("';' path parameter in path");
          inParameters = true;
        } else if (!inParameters) {
          nameLength++;
          if (c !== DOT) nameAllDots = false;
        }
        i++;
        continue;
      }

      const high = i + 2 < pathEnd ? hexValue(raw.charCodeAt(i + 1)) : -1;
      const low = high >= 0 ? hexValue(raw.charCodeAt(i + 2)) : -1;
      if (low < 0) return refuse("'%' not followed by two hex digits");
      const byte = (high << 4) | low;

      if (utf8Needed !== 0) {
        if (byte < utf8Low || byte > utf8High) return refuse('invalid UTF-8 in path');
        utf8Needed--;
        utf8Low = 0x80;
        utf8High = 0xbf;
        codePoint = (codePoint << 6) | (byte & 0x3f);
        if (utf8Needed === 0 && isAsciiLookalike(codePoint)) return refuse('a compatibility character that means an ASCII character in path (e.g. fullwidth ．／)');
      } else if (byte >= 0x80) {
        codePoint = byte & (byte >= 0xf0 ? 0x07 : byte >= 0xe0 ? 0x0f : 0x1f);
        // RFC 3629 §4 table: E0 and F0 exclude overlongs, ED excludes UTF-16 surrogates, F4 stops at U+10FFFF.
        if (byte >= 0xc2 && byte <= 0xdf) utf8Needed = 1;
        else if (byte >= 0xe0 && byte <= 0xef) utf8Needed = 2;
        else if (byte >= 0xf0 && byte <= 0xf4) utf8Needed = 3;
        if (byte === 0xe0) utf8Low = 0xa0;
        else if (byte === 0xed) utf8High = 0x9f;
        else if (byte === 0xf0) utf8Low = 0x90;
        else if (byte === 0xf4) utf8High = 0x8f;
        if (utf8Needed === 0) return refuse('invalid UTF-8 in path'); // stray continuation, C0/C1 overlong, F5..FF
      } else if (UNRESERVED[byte] === 1) {
        // Decoded, so `%2e%2e` is the dot segment it means to every host (RFC 3986 §6.2.2.2).
        segment = (segment ?? '') + raw.slice(copyFrom, i) + String.fromCharCode(byte);
        copyFrom = i + 3;
        if (!inParameters) {
          nameLength++;
          if (byte !== DOT) nameAllDots = false;
        }
        i += 3;
        continue;
      } else if (byte === SLASH) {
        return refuse("encoded '/' in path");
      } else if (byte === BACKSLASH) {
        return refuse("encoded '\\' in path");
      } else if (byte < 0x20 || byte === 0x7f) {
        return refuse('encoded control character in path');
      } else if (byte === PERCENT) {
        // Any encoded '%' is refused (as Spring's StrictHttpFirewall does): `%252F`, `%25%32%46` (which
        // unreserved decoding would turn into `%252F`) and a trailing `%25` all decode a second time
        // into something else in some host.
        return refuse("encoded '%' in path (double encoding)");
      } else if (byte === SEMICOLON) {
        if (!allowParameters) return refuse("';' path parameter in path");
        inParameters = true;
      }

      if (!inParameters && byte !== SEMICOLON) {
        nameLength++;
        nameAllDots = false;
      }
      // Kept encoded; RFC 3986 §6.2.2.1: upper-case hex is the normal form.
      const c1 = raw.charCodeAt(i + 1);
      const c2 = raw.charCodeAt(i + 2);
      if ((c1 >= 0x61 && c1 <= 0x66) || (c2 >= 0x61 && c2 <= 0x66)) {
        segment = (segment ?? '') + raw.slice(copyFrom, i) + '%' + UPPER_HEX[high] + UPPER_HEX[low];
        copyFrom = i + 3;
      }
      i += 3;
    }
    if (utf8Needed !== 0) return refuse('invalid UTF-8 in path');

    const isLast = i >= pathEnd;
    if (inParameters && nameAllDots && nameLength <= 2) {
      // Tomcat and Jetty drop `;...` before resolving dots: `/..;x/admin` would climb for them.
      return refuse("path parameter on an empty or dot segment");
    }
    const isEmpty = i === segmentStart;
    const isDot = !inParameters && nameAllDots && (nameLength === 1 || nameLength === 2) && !isEmpty;

    if (isEmpty && isLast) {
      // A trailing '/' is kept: `/a/b/` and `/a/b` are different resources to many hosts.
      if (out !== null) out += '/';
      break;
    }
    if (isEmpty || isDot) {
      if (out === null) out = raw.slice(pathStart, slash);
      if (isDot && nameLength === 2) {
        // RFC 3986 §5.2.4 step 2C: drop the last output segment; `..` above the root stays at the root.
        const previous = out.lastIndexOf('/');
        out = previous <= 0 ? '' : out.slice(0, previous);
      }
      if (isLast) out += '/';
      continue;
    }
    if (segment !== null) {
      segment += raw.slice(copyFrom, i);
      if (out === null) out = raw.slice(pathStart, slash);
      out += '/' + segment;
    } else if (out !== null) {
      out += raw.slice(slash, i);
    }
  }

  if (out === null) return { ok: true, path: pathStart === 0 && pathEnd === raw.length ? raw : raw.slice(pathStart, pathEnd), search };
  return { ok: true, path: out === '' ? '/' : out, search };
}
