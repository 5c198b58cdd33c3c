/**
 * The browser session cookie (docs/http-contract.md): the same opaque token as a bearer. `__Host-` (RFC 6265bis
 * §4.1.3.2) makes a browser accept it only with `Secure`, `Path=/` and no `Domain`, so a sibling subdomain cannot
 * set or shadow it; `iam.session-cookie.secure: false` (plain-http development) drops both.
 */
export const SECURE_SESSION_COOKIE = '__Host-iam-session';
export const DEV_SESSION_COOKIE = 'iam-session';

/** The sealed OpenID Connect login state, between the redirect to the provider and the callback (10 minutes). */
export const SECURE_LOGIN_STATE_COOKIE = '__Host-iam-oidc';
export const DEV_LOGIN_STATE_COOKIE = 'iam-oidc';

/** Every name: none ever reaches the host, whichever the gateway is configured to set. */
export const GATEWAY_COOKIE_NAMES: readonly string[] = [SECURE_SESSION_COOKIE, DEV_SESSION_COOKIE, SECURE_LOGIN_STATE_COOKIE, DEV_LOGIN_STATE_COOKIE];

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

export const loginStateCookieName = (secure: boolean): string => (secure ? SECURE_LOGIN_STATE_COOKIE : DEV_LOGIN_STATE_COOKIE);

/**
 * `Set-Cookie` of the sealed login state: `SameSite=Lax` so that the provider's top-level redirect back to the
 * callback carries it; gone after 10 minutes.
 */
export function loginStateCookie(secure: boolean, sealed: string, maxAgeSeconds: number): string {
  return `${loginStateCookieName(secure)}=${sealed}; Max-Age=${maxAgeSeconds}; Path=/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}

export function clearedLoginStateCookie(secure: boolean): string {
  return `${loginStateCookieName(secure)}=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}
