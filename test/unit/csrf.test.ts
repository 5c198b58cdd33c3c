/** The CSRF rule for cookie-authenticated requests, and the removal of the session cookie before forwarding. */
import { isCrossSiteRequest } from '../../src/http/csrf';
import type { CookieSession } from '../../src/http/prepare-request';
import { withoutCookies } from '../../src/http/upstream-headers';

const session = (headers: Partial<CookieSession>): CookieSession => ({ token: 't', origin: null, fetchSite: null, host: 'gw.example.test', ...headers });
const trusted = new Set(['https://app.example.test']);

describe('isCrossSiteRequest', () => {
  it.each([
    ['a safe method from anywhere', 'GET', false, { origin: 'https://evil.test', fetchSite: 'cross-site' }, false],
    ['a POST from another site (Fetch Metadata)', 'POST', false, { fetchSite: 'cross-site' }, true],
    ['a POST from another origin', 'POST', false, { origin: 'https://evil.test' }, true],
    ['an opaque origin', 'DELETE', false, { origin: 'null' }, true],
    ['a look-alike host', 'PUT', false, { origin: 'https://gw.example.test.evil.test' }, true],
    ['the gateway itself', 'POST', false, { origin: 'https://gw.example.test', fetchSite: 'same-origin' }, false],
    ['a trusted origin', 'PATCH', false, { origin: 'https://app.example.test', fetchSite: 'same-site' }, false],
    ['no browser headers (not a browser)', 'POST', false, {}, false],
    ['a WebSocket upgrade (GET) from another site', 'GET', true, { origin: 'https://evil.test' }, true],
    ['a WebSocket upgrade from the gateway itself', 'GET', true, { origin: 'http://gw.example.test' }, false],
    ['an Origin but no Host', 'POST', false, { origin: 'https://gw.example.test', host: null }, true],
  ])('%s → %s', (_name, method, upgrade, headers, expected) => {
    expect(isCrossSiteRequest(session(headers as Partial<CookieSession>), method as string, upgrade as boolean, trusted)).toBe(expected);
  });
});

describe('withoutCookies', () => {
  const names = ['__Host-iam-session', 'iam-session'];
  it.each([
    ['a=1; __Host-iam-session=iamt_x; b=2', 'a=1; b=2'],
    ['__Host-iam-session=iamt_x', ''],
    ['iam-session=iamt_x;iam-session-theme=dark', 'iam-session-theme=dark'],
    ['x-iam-session=1; a=2', 'x-iam-session=1; a=2'],
    ['a=1', 'a=1'],
  ])('%s → %s', (header, expected) => {
    expect(withoutCookies(header, names)).toBe(expected);
  });
});
