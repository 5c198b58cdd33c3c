/**
 * The one credential step (src/http/request-credential.ts): which credential a request carries, and for the session
 * cookie the CSRF verdict. Every reader of a caller's token (the proxy and forward-auth, the protected /iam endpoints,
 * the host decisions, the OpenID Connect logout, the console page) goes through it, and hands the credential to the one
 * caller step (src/auth/caller.ts) that turns it into a caller or a 401/403; the last tests hold src/ to both.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { CookieSession } from '../../src/http/prepare-request';
import { requestCredential, type CredentialContext } from '../../src/http/request-credential';

const TOKEN = `iamt_${'A'.repeat(43)}`;
const OTHER = `iamt_${'B'.repeat(43)}`;
const cookie = (browser: Partial<CookieSession> = {}): CookieSession => ({ token: OTHER, origin: null, fetchSite: null, host: 'gw.example', ...browser });
const context = (extra: Partial<CredentialContext> = {}): CredentialContext => ({ method: 'GET', trustedOrigins: new Set(), ...extra });

describe('requestCredential', () => {
  it('reads a bearer, and then never the cookie', () => {
    expect(requestCredential({ authorization: `Bearer ${TOKEN}`, cookieSession: cookie({ fetchSite: 'cross-site' }) }, context({ method: 'POST' }))).toEqual({ kind: 'bearer', token: TOKEN });
    expect(requestCredential({ authorization: `bearer   ${TOKEN}`, cookieSession: null }, context())).toEqual({ kind: 'bearer', token: TOKEN });
  });

  it.each([`Bearer\t${TOKEN}`, 'Bearer', 'Bearer ', `Bea(rer ${TOKEN}`, ` Bearer ${TOKEN}`, `Bearer ${TOKEN} extra`])(
    'a malformed Authorization (%j) is malformed, and the cookie is not read in its place',
    (authorization) => {
      const credential = requestCredential({ authorization, cookieSession: cookie() }, context());
      expect(credential).toEqual({ kind: 'malformed' });
    },
  );

  it('reads the cookie without an Authorization, or beside another scheme (the host\'s)', () => {
    expect(requestCredential({ authorization: null, cookieSession: cookie() }, context())).toEqual({ kind: 'cookie', token: OTHER, crossSite: false });
    expect(requestCredential({ authorization: 'Basic dTpw', cookieSession: cookie() }, context())).toEqual({ kind: 'cookie', token: OTHER, crossSite: false });
    expect(requestCredential({ authorization: 'Basic dTpw', cookieSession: null }, context())).toEqual({ kind: 'none' });
    expect(requestCredential({ authorization: null, cookieSession: null }, context())).toEqual({ kind: 'none' });
  });

  it.each([
    ['a safe method from another site', { fetchSite: 'cross-site' }, context(), false],
    ['an unsafe method from another site (Sec-Fetch-Site)', { fetchSite: 'cross-site' }, context({ method: 'POST' }), true],
    ['an unsafe method from another origin', { origin: 'https://evil.example' }, context({ method: 'DELETE' }), true],
    ['an unsafe method from the gateway itself', { origin: 'https://gw.example', fetchSite: 'same-origin' }, context({ method: 'PUT' }), false],
    ['an unsafe method from a trusted origin', { origin: 'https://app.example' }, context({ method: 'POST', trustedOrigins: new Set(['https://app.example']) }), false],
    ['an unsafe method without Origin or Sec-Fetch-Site (not a browser sending it on its own)', {}, context({ method: 'POST' }), false],
    ['a WebSocket upgrade (a GET) from another site', { origin: 'https://evil.example' }, context({ upgrade: true }), true],
    ['a GET that changes state (unsafe: true) from another site', { fetchSite: 'cross-site' }, context({ unsafe: true }), true],
  ])('the CSRF verdict of a cookie: %s', (_case, browser, how, crossSite) => {
    expect(requestCredential({ authorization: null, cookieSession: cookie(browser) }, how)).toEqual({ kind: 'cookie', token: OTHER, crossSite });
  });
});

describe('one place decides', () => {
  const SRC = join(__dirname, '..', '..', 'src');
  const files = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
    });

  it('no module but the step reads the bearer or the session cookie of a request itself', () => {
    const readers = files(SRC)
      // the step, and the two parsers it reads: the cookie's (prepare-request) and the Authorization syntax's (inbound-headers)
      .filter((file) => !['request-credential.ts', 'prepare-request.ts', 'inbound-headers.ts'].some((home) => file.endsWith(join('http', home))))
      .filter((file) => /\bparseBearerToken\(|\.cookieSession\?*\.token|cookieSession\s*\?/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(SRC, file));
    expect(readers).toEqual([]);
  });

  it('no module but the caller step turns a credential into a caller, a 401 or a 403', () => {
    // The verifiers themselves (their own caches call their own methods) and the problem catalog define what the step
    // uses. The other 401/403s are no credential's: a decision's (the engine's problem for its failed step), a login
    // refused (login-service), a session refused while it is issued (session-service), a login form posted from
    // another site (login CSRF: the form carries no credential).
    const homes: Record<string, RegExp> = {
      [join('auth', 'caller.ts')]: /(?:)/,
      [join('auth', 'assertion-verifier.ts')]: /(?:)/,
      [join('auth', 'oidc', 'access-tokens.ts')]: /(?:)/,
      [join('sessions', 'session-service.ts')]: /(?:)/,
      [join('domain', 'problem', 'problems.ts')]: /(?:)/,
      [join('authz', 'decision-engine.ts')]: /problems\.unauthenticated\(/,
      [join('auth', 'login-service.ts')]: /problems\.unauthenticated\(/,
      [join('api', 'login-page-routes.ts')]: /problems\.crossSiteCookie\(/,
      // a subject session the body of a check names, for a caller already admitted: no credential of the request
      [join('api', 'decision-routes.ts')]: /\.liveSession\(/,
    };
    const turning = [
      /problems\.unauthenticated\(/, // a 401 with its challenge
      /problems\.crossSiteCookie\(/, // the CSRF refusal of a cookie
      /\.crossSite\b/, // acting on the CSRF verdict
      /\bcredentialToken\(|credential\.token\b/, // taking the token out of a credential
      /\.verifyCached\(|\.verifyFromRecord\(/, // verifying a token
      /\.liveSession\(/, // an assertion's session
      /\b(?:bearers|sessions|accessTokens)\.verify\(|\bassertions\??\.verify\(|new AssertionVerifier\(.*\)\.verify\(/,
    ];
    const offenders = files(SRC).flatMap((file) => {
      const home = Object.entries(homes).find(([path]) => file.endsWith(path))?.[1];
      const text = readFileSync(file, 'utf8');
      return turning.filter((pattern) => pattern.test(text) && !(home !== undefined && (home.source === '(?:)' || home.source === pattern.source))).map((pattern) => `${relative(SRC, file)}: ${pattern.source}`);
    });
    expect(offenders).toEqual([]);
  });
});
