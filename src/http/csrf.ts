import type { CookieSession } from './prepare-request';

/** What a browser says about where a request comes from. */
export type BrowserContext = Pick<CookieSession, 'origin' | 'fetchSite' | 'host'>;

/** Methods a browser may send cross-site without consequence (RFC 9110 §9.2.1 safe methods). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/**
 * True when a request authenticated by the session cookie must be refused as cross-site (OWASP CSRF cheat sheet:
 * Fetch Metadata, then Origin). Applies to unsafe methods and to WebSocket upgrades (a cross-site page can open a
 * WebSocket carrying the cookie). Refused: `Sec-Fetch-Site: cross-site`, or an `Origin` that is neither the
 * gateway's own (the request's Host, either scheme) nor in `trustedOrigins`. A request with neither header is not
 * from a browser that sends cookies cross-site on its own, and passes.
 */
export function isCrossSiteRequest(session: BrowserContext, method: string, upgrade: boolean, trustedOrigins: ReadonlySet<string>): boolean {
  if (!upgrade && SAFE_METHODS.has(method)) return false;
  if (session.fetchSite === 'cross-site') return true;
  const origin = session.origin;
  if (origin === null) return false;
  if (trustedOrigins.has(origin)) return false;
  if (session.host === null) return true;
  return origin !== `https://${session.host}` && origin !== `http://${session.host}`;
}
