/**
 * PreparedRequest.host, the host whose origin is the gateway's own for the CSRF rule: `X-Forwarded-Host` only from a
 * trusted proxy (nginx's auth subrequest arrives with `Host: iam_gateway`), `Host` otherwise; a value from a trusted
 * proxy that is not one host is no host at all (refused as cross-site), never a guess.
 */
import type { IncomingMessage } from 'node:http';
import { isCrossSiteRequest } from '../../src/http/csrf';
import { prepareRequest, type PreparedRequest } from '../../src/http/prepare-request';
import { compileTrustedProxies } from '../../src/http/trusted-proxies';

const TOKEN = `iamt_${'Q'.repeat(43)}`;
const isTrustedProxy = compileTrustedProxies(['10.0.0.0/8']);

/** The request Node would hand the front door, from `rawHeaders` and the peer's address. */
function prepared(remoteAddress: string, rawHeaders: string[]): PreparedRequest {
  const headers: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    // Node's joining of repeated lines: `; ` for Cookie, `, ` for the rest.
    headers[name] = headers[name] === undefined ? rawHeaders[i + 1]! : `${headers[name]}${name === 'cookie' ? '; ' : ', '}${rawHeaders[i + 1]!}`;
  }
  const req = { method: 'POST', url: '/api/projects', headers, rawHeaders, socket: { remoteAddress }, httpVersionMajor: 1, httpVersionMinor: 1 } as unknown as IncomingMessage;
  const result = prepareRequest(req, { allowPathParameters: false, maxUrlLength: 8192, isTrustedProxy, sessionCookie: '__Host-iam-session' });
  if (!result.ok) throw new Error(result.problem.message);
  return result.request;
}

const cookie = ['Cookie', `__Host-iam-session=${TOKEN}`];

it.each([
  ['a trusted proxy\'s X-Forwarded-Host', '10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'app.example.test:8443'], 'app.example.test:8443'],
  ['Host when a trusted proxy sends none', '10.1.2.3', ['Host', 'app.example.test'], 'app.example.test'],
  ['Host, not the X-Forwarded-Host of an untrusted client', '203.0.113.9', ['Host', 'app.example.test', 'X-Forwarded-Host', 'evil.test'], 'app.example.test'],
  ['Host, not the X-Forwarded-Host of an untrusted client (IPv4-mapped)', '::ffff:203.0.113.9', ['Host', 'app.example.test', 'X-Forwarded-Host', 'evil.test'], 'app.example.test'],
  ['none for a list from a trusted proxy', '10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'evil.test, app.example.test'], null],
  ['none for two lines from a trusted proxy', '10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'app.example.test', 'X-Forwarded-Host', 'evil.test'], null],
  ['none for a URL from a trusted proxy', '10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'https://evil.test/'], null],
  ['none for an empty value from a trusted proxy', '10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', ''], null],
  ['an IPv6 literal with a port', '10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', '[2001:db8::1]:8080'], '[2001:db8::1]:8080'],
])('%s', (_name, peer, rawHeaders, expected) => {
  const request = prepared(peer, [...rawHeaders, ...cookie]);
  expect(request.host).toBe(expected);
  expect(request.cookieSession?.host).toBe(expected);
});

describe('the CSRF rule judges a cookie POST by that host', () => {
  const crossSite = (peer: string, rawHeaders: string[]): boolean => isCrossSiteRequest(prepared(peer, [...rawHeaders, ...cookie]).cookieSession!, 'POST', false, new Set());

  it('behind a trusted proxy that rewrote Host: its own origin is same-origin, another is not', () => {
    expect(crossSite('10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'app.example.test', 'Origin', 'https://app.example.test'])).toBe(false);
    expect(crossSite('10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'app.example.test', 'Origin', 'https://evil.test'])).toBe(true);
    expect(crossSite('10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'app.example.test', 'Sec-Fetch-Site', 'cross-site'])).toBe(true);
  });

  it('an untrusted client cannot make its own origin the gateway\'s by sending X-Forwarded-Host', () => {
    expect(crossSite('203.0.113.9', ['Host', 'app.example.test', 'X-Forwarded-Host', 'evil.test', 'Origin', 'https://evil.test'])).toBe(true);
    expect(crossSite('203.0.113.9', ['Host', 'app.example.test', 'X-Forwarded-Host', 'evil.test', 'Origin', 'https://app.example.test'])).toBe(false);
  });

  it('a list from a trusted proxy is never same-origin', () => {
    expect(crossSite('10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'evil.test, app.example.test', 'Origin', 'https://evil.test'])).toBe(true);
    expect(crossSite('10.1.2.3', ['Host', 'iam_gateway', 'X-Forwarded-Host', 'evil.test, app.example.test', 'Origin', 'https://app.example.test'])).toBe(true);
  });
});
