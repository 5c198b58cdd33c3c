/** The CSRF rule for cookie-authenticated requests (the removal of the gateway's cookies: host-cookie.test.ts). */
import { isCrossSiteRequest } from '../../src/http/csrf';
import type { CookieSession } from '../../src/http/prepare-request';

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
