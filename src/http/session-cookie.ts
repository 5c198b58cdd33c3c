/**
 * The browser session cookie (docs/http-contract.md): the same opaque token as a bearer. `__Host-` (RFC 6265bis
 * §4.1.3.2) makes a browser accept it only with `Secure`, `Path=/` and no `Domain`, so a sibling subdomain cannot
 * set or shadow it; `iam.session-cookie.secure: false` (plain-http development) drops both.
 */
export const SECURE_SESSION_COOKIE = '__Host-iam-session';
export const DEV_SESSION_COOKIE = 'iam-session';

/** Both names: neither ever reaches the host, whichever the gateway is configured to set. */
export const SESSION_COOKIE_NAMES: readonly string[] = [SECURE_SESSION_COOKIE, DEV_SESSION_COOKIE];

export const sessionCookieName = (secure: boolean): string => (secure ? SECURE_SESSION_COOKIE : DEV_SESSION_COOKIE);

/**
 * `Set-Cookie` of a browser login: `HttpOnly` (no script reads it), `SameSite=Lax` (not sent on cross-site
 * subrequests or posts), `Path=/`, `Secure` unless configured off. No `Max-Age`: the cookie lives with the browser
 * session, and the token's own expiry and revocation are enforced by the gateway whatever the browser keeps.
 */
export function sessionCookie(secure: boolean, token: string): string {
  return `${sessionCookieName(secure)}=${token}; Path=/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}

/** `Set-Cookie` that removes the session cookie (logout): same name and attributes, empty, `Max-Age=0`. */
export function clearedSessionCookie(secure: boolean): string {
  return `${sessionCookieName(secure)}=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}
