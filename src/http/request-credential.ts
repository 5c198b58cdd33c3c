import { isCrossSiteRequest } from './csrf';
import { parseBearerToken } from './inbound-headers';
import type { PreparedRequest } from './prepare-request';

/**
 * The credential a request carries, decided once (docs/http-contract.md, "Authentication"). Every place that reads
 * a caller's token goes through {@link requestCredential}: the proxy and forward-auth (gateway/request-authorizer.ts),
 * the protected `/iam` endpoints (api/require-session.ts), the host decisions (api/decision-routes.ts), the OpenID
 * Connect logout and the console page; each hands it to the one caller step (auth/caller.ts), which alone turns it into
 * a caller — a gateway token, the provider's JWT access token, the gateway's own `X-IAM-Assertion` sent back as the
 * bearer — or into the 401/403 answered instead. This parse stays here, below sessions and auth (which tell those
 * bearers apart), so the raw request is read in one place.
 *
 * - `bearer`: `Authorization: Bearer <token>`. A bearer wins: the session cookie is then never read.
 * - `malformed`: an Authorization header that is no well-formed credential (`Bearer<TAB>…`, `Bearer` alone, a
 *   scheme with invalid characters). Never a reason to fall back to the cookie: a protected endpoint answers 401.
 * - `cookie`: no bearer (no Authorization, or another scheme such as Basic, which is the host's), and exactly one
 *   well-formed session cookie. `crossSite`: the CSRF verdict — an unsafe method, a WebSocket upgrade or an action
 *   that counts as one (`unsafe: true`), sent from another site; such a cookie must be refused (403), never used.
 * - `none`: nothing the gateway reads as a credential.
 */
export type RequestCredential =
  | { readonly kind: 'none' }
  | { readonly kind: 'malformed' }
  | { readonly kind: 'bearer'; readonly token: string }
  | { readonly kind: 'cookie'; readonly token: string; readonly crossSite: boolean };

export interface CredentialContext {
  /** The request method; safe methods are never cross-site refusals (unless `unsafe`). */
  method: string;
  /** A WebSocket upgrade: checked like an unsafe method (a cross-site page can open one with the cookie). */
  upgrade?: boolean;
  /** The action changes state although the method is safe (the OpenID Connect logout is a GET). */
  unsafe?: boolean;
  /** `iam.session-cookie.trusted-origins`: origins besides the gateway's own that may use the cookie. */
  trustedOrigins: ReadonlySet<string>;
}

const NONE: RequestCredential = { kind: 'none' };
const MALFORMED: RequestCredential = { kind: 'malformed' };

/** The credential of a prepared request, and for a cookie the CSRF verdict. */
export function requestCredential(request: Pick<PreparedRequest, 'authorization' | 'cookieSession'>, context: CredentialContext): RequestCredential {
  const bearer = parseBearerToken(request.authorization);
  if (bearer.kind === 'bearer') return bearer;
  if (bearer.kind === 'malformed') return MALFORMED;
  const cookie = request.cookieSession;
  if (cookie === null) return NONE;
  const crossSite = isCrossSiteRequest(cookie, context.unsafe === true ? 'POST' : context.method, context.upgrade === true, context.trustedOrigins);
  return { kind: 'cookie', token: cookie.token, crossSite };
}
