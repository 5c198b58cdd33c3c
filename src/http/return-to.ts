/** Where a login sends the browser when `returnTo` is missing or refused. */
export const DEFAULT_RETURN_TO = '/';

const MAX_RETURN_TO = 2048;
const BASE = 'http://gateway.invalid';

/**
 * A login's `returnTo` (docs/http-contract.md): only a same-origin relative path is kept. What is checked is the
 * value the gateway will emit as `Location`, not the value it was given: the input is resolved with the WHATWG URL
 * parser (dot segments removed, `%2e` read as `.`), and the result must itself be a path-absolute reference — `/`
 * followed by anything but a second `/` or `\` (`//evil.test` and `/\evil.test` are network-path references to
 * another host, for the URL parser and for browsers) — with no control characters or whitespace, that resolves to
 * the gateway's own origin and back to itself. `/.//evil.test/x`, `/a/..//x` and `/%2e//x` all resolve to a
 * `//…` path and are refused. Everything else (absolute URLs, `javascript:`, empty) is `/`: an open redirect is never
 * possible. The result is a fixed point: `safeReturnTo(safeReturnTo(x)) === safeReturnTo(x)`.
 */
export function safeReturnTo(value: unknown): string {
  if (typeof value !== 'string' || !isPathAbsolute(value)) return DEFAULT_RETURN_TO;
  let resolved: URL;
  try {
    resolved = new URL(value, BASE);
  } catch {
    return DEFAULT_RETURN_TO;
  }
  if (resolved.origin !== BASE) return DEFAULT_RETURN_TO;
  const emitted = resolved.pathname + resolved.search + resolved.hash;
  // The emitted form is checked again: dot-segment removal can turn `/.//x` into `//x`.
  if (!isPathAbsolute(emitted)) return DEFAULT_RETURN_TO;
  return emitted;
}

/** `/` then not `/` or `\`, no control character, space or backslash, not too long. */
function isPathAbsolute(value: string): boolean {
  if (value.length === 0 || value.length > MAX_RETURN_TO) return false;
  if (value[0] !== '/' || value[1] === '/' || value[1] === '\\') return false;
  // eslint-disable-next-line no-control-regex
  return !/[\u0000-\u0020\u007f\\]/.test(value);
}
