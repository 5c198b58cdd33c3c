/** Where a login sends the browser when `returnTo` is missing or refused. */
export const DEFAULT_RETURN_TO = '/';

const MAX_RETURN_TO = 2048;
const BASE = 'http://gateway.invalid';

/**
 * A login's `returnTo` (docs/http-contract.md): only a same-origin relative path is kept — `/` followed by anything
 * but a second `/` or `\` (`//evil.test` and `/\evil.test` are network-path references to another host, for the
 * URL parser and for browsers), no control characters or whitespace, resolving to the gateway's own origin.
 * Everything else (absolute URLs, `javascript:`, empty) is `/`: an open redirect is never possible.
 */
export function safeReturnTo(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_RETURN_TO) return DEFAULT_RETURN_TO;
  if (value[0] !== '/' || value[1] === '/' || value[1] === '\\') return DEFAULT_RETURN_TO;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f\\]/.test(value)) return DEFAULT_RETURN_TO;
  let resolved: URL;
  try {
    resolved = new URL(value, BASE);
  } catch {
    return DEFAULT_RETURN_TO;
  }
  if (resolved.origin !== BASE) return DEFAULT_RETURN_TO;
  return resolved.pathname + resolved.search + resolved.hash;
}
