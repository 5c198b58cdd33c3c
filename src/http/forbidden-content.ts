/*
 * Request content the gateway refuses because the host would read it as something the gateway did not
 * authorize: a method override (the host runs another method than the one decided), a gateway token
 * anywhere but `Authorization: Bearer` (the host would receive a credential that works at the gateway), and
 * path characters that turn into ASCII under compatibility normalization (another path at the host).
 */
import { TOKEN_PREFIX } from '../domain/token-hash';

/** Query parameter names read as a method override, after decoding: `_method` (Rails, Laravel, Symfony, method-override). */
const OVERRIDE_PARAMETERS: readonly string[] = ['_method', 'x-http-method-override', 'x-http-method', 'x-method-override'];

/** `iamt`: the token prefix without its `_`, which may also arrive as `%5F`. */
const STEM = TOKEN_PREFIX.slice(0, -1);

/** Base64url characters after the prefix that make text look like a usable token (a token has 43). */
const TOKEN_BODY_MIN = 20;

function isTokenChar(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f;
}

/** True when `text` contains `iamt_` followed by token characters, also with the `_` written `%5F`. */
export function containsGatewayToken(text: string): boolean {
  let from = 0;
  for (;;) {
    const at = text.indexOf(STEM, from);
    if (at < 0) return false;
    let i = at + STEM.length;
    if (text.charCodeAt(i) === 0x5f) i += 1;
    else if (text.charCodeAt(i) === 0x25 && text.charCodeAt(i + 1) === 0x35 && (text.charCodeAt(i + 2) | 0x20) === 0x66) i += 3;
    else {
      from = at + STEM.length;
      continue;
    }
    const start = i;
    while (i < text.length && isTokenChar(text.charCodeAt(i))) i++;
    if (i - start >= TOKEN_BODY_MIN) return true;
    from = at + STEM.length;
  }
}

/**
 * True when an Authorization value that is not a Bearer credential carries a gateway token: as is
 * (`Token iamt_…`, `Basic iamt_…`) or inside Basic's base64 `user:password` (RFC 7617).
 */
export function authorizationCarriesToken(value: string): boolean {
  if (containsGatewayToken(value)) return true;
  const space = value.indexOf(' ');
  if (space < 0 || value.slice(0, space).toLowerCase() !== 'basic') return false;
  const decoded = Buffer.from(value.slice(space + 1).trim(), 'base64').toString('latin1');
  return containsGatewayToken(decoded);
}

/** Percent-decodes `%XX` and `+` (form encoding) without throwing; other bytes stay as they are. */
function decodeFormText(text: string): string {
  if (text.indexOf('%') < 0 && text.indexOf('+') < 0) return text;
  return text.replace(/\+/g, ' ').replace(/%([0-9A-Fa-f]{2})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/**
 * The first query parameter a host would read as a method override, or null. Names are decoded, compared
 * case-insensitively, and PHP's rewriting of ` `, `.` and `[` into `_` is applied (`.method` is `_method`
 * to PHP); `&` and `;` both separate parameters. `search` is the query with its `?`.
 */
export function findMethodOverrideParameter(search: string): string | null {
  if (search.length < 2) return null;
  const lower = search.toLowerCase();
  // Fast path: neither the word nor an escape that could spell it.
  if (lower.indexOf('method') < 0 && lower.indexOf('%') < 0) return null;
  for (const pair of search.slice(1).split(/[&;]/)) {
    const equals = pair.indexOf('=');
    const rawName = equals < 0 ? pair : pair.slice(0, equals);
    if (rawName.length === 0) continue;
    const name = decodeFormText(rawName).toLowerCase();
    const php = name.length > 0 && (name[0] === ' ' || name[0] === '.' || name[0] === '[') ? `_${name.slice(1)}` : name;
    for (const candidate of [name, php]) {
      for (const override of OVERRIDE_PARAMETERS) {
        // `_method[]` / `_method[x]` are the same parameter to PHP and Rack.
        if (candidate === override || candidate.startsWith(`${override}[`)) return rawName;
      }
    }
  }
  return null;
}

/**
 * Slash look-alikes that Windows "best fit" code-page conversion turns into `/` or `\` although NFKC keeps
 * them: DIVISION SLASH, FRACTION SLASH, SET MINUS, BIG SOLIDUS / REVERSE SOLIDUS, REVERSE SOLIDUS OPERATOR.
 */
const SLASH_LOOKALIKES = new Set([0x2044, 0x2215, 0x2216, 0x29f5, 0x29f8, 0x29f9]);
const lookalikeCache = new Map<number, boolean>();

/**
 * True when a non-ASCII code point becomes ASCII under Unicode compatibility normalization (NFKC: fullwidth
 * `．／＼％Ａ`, `․` one dot leader, `ſ`, the Kelvin sign...) or is a slash look-alike. A host that applies
 * NFKC (or a best-fit code page) after decoding would see dot segments, slashes or other letters than the
 * path that was matched and authorized, so such characters are refused, never forwarded.
 */
export function isAsciiLookalike(codePoint: number): boolean {
  let known = lookalikeCache.get(codePoint);
  if (known === undefined) {
    // eslint-disable-next-line no-control-regex -- asks whether the NFKC form is ASCII, U+0000 included
    known = SLASH_LOOKALIKES.has(codePoint) || /[\u0000-\u007f]/.test(String.fromCodePoint(codePoint).normalize('NFKC'));
    if (lookalikeCache.size < 4096) lookalikeCache.set(codePoint, known);
  }
  return known;
}
