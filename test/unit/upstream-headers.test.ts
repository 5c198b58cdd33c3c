import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { buildUpstreamHeaders, unmapIpv4, type UpstreamHeaderInput } from '../../src/http/upstream-headers';

/** #11.17: headers hosts and frameworks read as the client address or the original host. */
const CLIENT_ADDRESS_HEADERS = [
  'true-client-ip', 'x-client-ip', 'cf-connecting-ip', 'client-ip', 'x-cluster-client-ip', 'x-original-host', 'x-host', 'x-real-ip',
  'fastly-client-ip', 'x-proxyuser-ip', 'fly-client-ip', 'x-appengine-user-ip', 'x-azure-clientip', 'x-envoy-external-address',
  'x-originating-ip', 'x-remote-ip', 'x-remote-addr', 'forwarded-for', 'x-forwarded', 'forwarded', 'cf-connecting-ipv6', 'wl-proxy-client-ip',
];

const IDENTITY: ReadonlyArray<readonly [string, string]> = [
  ['X-IAM-User-Id', 'user-1'],
  ['X-IAM-Profile-Id', 'profile-1'],
];

function input(overrides: Partial<UpstreamHeaderInput>): UpstreamHeaderInput {
  return {
    rawHeaders: [],
    remoteAddress: '203.0.113.9',
    trustedProxy: false,
    protocol: 'http',
    host: 'gw.local',
    requestId: 'req-1',
    stripAuthorization: false,
    identity: IDENTITY,
    ...overrides,
  };
}

/** All values sent under `name` (any case), in order. */
function valuesOf(headers: string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if ((headers[i] as string).toLowerCase() === name.toLowerCase()) values.push(headers[i + 1] as string);
  return values;
}

type Row = {
  name: string;
  input: Partial<UpstreamHeaderInput>;
  keepUpgrade?: boolean;
  /** Exact values per header name (case-insensitive); `[]` means absent. */
  expect: Record<string, string[]>;
};

/** What the host receives (docs/http-contract.md). */
const rows: Row[] = [
  {
    name: 'Connection cannot remove gateway or framing headers, but removes the client header it names',
    input: {
      rawHeaders: ['Host', 'gw.local', 'Connection', 'x-iam-user-id, content-length, keep-alive, x-foo', 'X-Foo', 'bar', 'Content-Length', '5', 'Keep-Alive', 'timeout=5', 'Content-Type', 'text/plain'],
    },
    expect: { 'x-foo': [], 'content-length': ['5'], 'content-type': ['text/plain'], 'x-iam-user-id': ['user-1'], 'x-iam-profile-id': ['profile-1'], connection: [], 'keep-alive': [], host: [] },
  },
  {
    name: 'Connection cannot remove forwarding headers from a trusted proxy, nor X-Request-Id',
    input: {
      trustedProxy: true,
      remoteAddress: '10.0.0.2',
      rawHeaders: ['Connection', 'X-Forwarded-For, forwarded, x-request-id, x-forwarded-proto, Content-Type', 'X-Forwarded-For', '1.2.3.4', 'Forwarded', 'for=1.2.3.4', 'X-Forwarded-Proto', 'https', 'Content-Type', 'a/b'],
    },
    expect: { 'x-forwarded-for': ['1.2.3.4, 10.0.0.2'], forwarded: ['for=1.2.3.4'], 'x-forwarded-proto': ['https'], 'x-request-id': ['req-1'], 'content-type': ['a/b'] },
  },
  {
    name: 'spoofed X-IAM-* headers are removed, in any case',
    input: { rawHeaders: ['X-IAM-User-Id', 'admin', 'x-iam-profile-id', 'root', 'X-Iam-Session-Id', 's', 'X-IAM-Assertion', 'forged'] },
    expect: { 'x-iam-user-id': ['user-1'], 'x-iam-profile-id': ['profile-1'], 'x-iam-session-id': [], 'x-iam-assertion': [] },
  },
  {
    name: 'spoofed X-IAM-* headers are removed for anonymous requests too',
    input: { identity: null, rawHeaders: ['X-IAM-User-Id', 'admin', 'Accept', '*/*'] },
    expect: { 'x-iam-user-id': [], accept: ['*/*'] },
  },
  {
    name: "names containing '_' are removed (they alias '-' in CGI-style hosts)",
    input: { rawHeaders: ['X_IAM_User_Id', 'admin', 'x_forwarded_for', '1.1.1.1', 'Some_Header', 'v', 'Some-Header', 'kept'] },
    expect: { x_iam_user_id: [], x_forwarded_for: [], some_header: [], 'some-header': ['kept'], 'x-forwarded-for': ['203.0.113.9'] },
  },
  {
    name: 'an untrusted client cannot set forwarding headers',
    input: {
      remoteAddress: '::ffff:10.0.0.7',
      rawHeaders: ['X-Forwarded-For', '1.2.3.4', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'evil.example', 'Forwarded', 'for=1.2.3.4', 'X-Forwarded-Prefix', '/admin', 'X-Real-IP', '1.2.3.4'],
    },
    expect: { 'x-forwarded-for': ['10.0.0.7'], 'x-forwarded-proto': ['http'], 'x-forwarded-host': ['gw.local'], forwarded: [], 'x-forwarded-prefix': [], 'x-real-ip': [] },
  },
  {
    name: 'a trusted proxy keeps its forwarding headers; X-Forwarded-For lines are joined and the socket appended',
    input: {
      trustedProxy: true,
      remoteAddress: '::ffff:10.0.0.2',
      protocol: 'http',
      rawHeaders: ['X-Forwarded-For', '1.2.3.4', 'x-forwarded-for', '5.6.7.8', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'app.example', 'Forwarded', 'for=1.2.3.4;proto=https', 'X-Real-IP', '1.2.3.4'],
    },
    expect: { 'x-forwarded-for': ['1.2.3.4, 5.6.7.8, 10.0.0.2'], 'x-forwarded-proto': ['https'], 'x-forwarded-host': ['app.example'], forwarded: ['for=1.2.3.4;proto=https'], 'x-real-ip': ['1.2.3.4'] },
  },
  {
    name: 'a trusted proxy that sent no forwarding headers gets them from the socket',
    input: { trustedProxy: true, remoteAddress: '2001:db8::1', protocol: 'https', host: 'gw.local:8443' },
    expect: { 'x-forwarded-for': ['2001:db8::1'], 'x-forwarded-proto': ['https'], 'x-forwarded-host': ['gw.local:8443'] },
  },
  {
    name: 'no Host: no X-Forwarded-Host',
    input: { host: undefined, rawHeaders: ['X-Forwarded-Host', 'evil.example'] },
    expect: { 'x-forwarded-host': [] },
  },
  {
    name: '#11.17: client-address and original-host headers from an untrusted client are removed',
    input: {
      trustedProxy: false,
      rawHeaders: CLIENT_ADDRESS_HEADERS.flatMap((name) => [name.toUpperCase(), '6.6.6.6']).concat(['Accept', 'application/json']),
    },
    expect: { ...Object.fromEntries(CLIENT_ADDRESS_HEADERS.map((name) => [name, []])), accept: ['application/json'] },
  },
  {
    name: '#11.17: the same headers from a trusted proxy are kept, and Connection cannot remove them',
    input: {
      trustedProxy: true,
      rawHeaders: ['True-Client-IP', '203.0.113.7', 'CF-Connecting-IP', '203.0.113.7', 'X-Original-Host', 'app.example', 'Connection', 'true-client-ip, x-original-host'],
    },
    expect: { 'true-client-ip': ['203.0.113.7'], 'cf-connecting-ip': ['203.0.113.7'], 'x-original-host': ['app.example'] },
  },
  {
    name: 'method-override and internal-URL headers are removed (CVE-2025-29927)',
    input: {
      rawHeaders: ['X-HTTP-Method-Override', 'DELETE', 'x-http-method', 'PUT', 'X-Method-Override', 'PATCH', 'X-Original-URL', '/admin', 'X-Rewrite-URL', '/admin', 'x-middleware-subrequest', 'middleware:middleware', 'Accept', 'application/json'],
    },
    expect: { 'x-http-method-override': [], 'x-http-method': [], 'x-method-override': [], 'x-original-url': [], 'x-rewrite-url': [], 'x-middleware-subrequest': [], accept: ['application/json'] },
  },
  {
    name: 'hop-by-hop headers (RFC 9110 §7.6.1), Host and Expect are removed',
    input: {
      rawHeaders: ['Host', 'gw.local', 'TE', 'trailers', 'Trailer', 'X-Checksum', 'Transfer-Encoding', 'chunked', 'Upgrade', 'websocket', 'Proxy-Authorization', 'Basic eDp5', 'Proxy-Authenticate', 'Basic', 'Proxy-Connection', 'keep-alive', 'Expect', '100-continue', 'Connection', 'close'],
    },
    expect: { host: [], te: [], trailer: [], 'transfer-encoding': [], upgrade: [], 'proxy-authorization': [], 'proxy-authenticate': [], 'proxy-connection': [], expect: [], connection: [] },
  },
  {
    name: "the gateway's bearer token is removed",
    input: { stripAuthorization: true, rawHeaders: ['Authorization', 'Bearer iamt_secret'] },
    expect: { authorization: [] },
  },
  {
    name: 'another Authorization scheme is meant for the host and kept',
    input: { stripAuthorization: false, rawHeaders: ['Authorization', 'Basic eDp5'] },
    expect: { authorization: ['Basic eDp5'] },
  },
  {
    name: "the client's X-Request-Id is replaced by the gateway's",
    input: { rawHeaders: ['X-Request-Id', 'forged', 'x-request-id', 'forged-2'] },
    expect: { 'x-request-id': ['req-1'] },
  },
  {
    name: 'end-to-end headers pass through in order, repeated lines included',
    input: { rawHeaders: ['Accept', 'text/html', 'Cookie', 'a=1', 'cookie', 'b=2', 'If-None-Match', '"x"'] },
    expect: { accept: ['text/html'], cookie: ['a=1', 'b=2'], 'if-none-match': ['"x"'] },
  },
  {
    name: 'a WebSocket handshake keeps Upgrade and Sec-WebSocket-*, with Connection: upgrade',
    keepUpgrade: true,
    input: {
      rawHeaders: ['Connection', 'Upgrade, x-foo', 'Upgrade', 'websocket', 'Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version', '13', 'X-Foo', 'bar'],
    },
    expect: { connection: ['upgrade'], upgrade: ['websocket'], 'sec-websocket-key': ['dGhlIHNhbXBsZSBub25jZQ=='], 'sec-websocket-version': ['13'], 'x-foo': [] },
  },
];

describe('buildUpstreamHeaders', () => {
  it.each(rows)('$name', ({ input: overrides, keepUpgrade, expect: expected }) => {
    const headers = buildUpstreamHeaders(input(overrides), keepUpgrade === undefined ? undefined : { keepUpgrade });
    expect(headers.length % 2).toBe(0);
    for (const [name, values] of Object.entries(expected)) {
      expect([name, valuesOf(headers, name)]).toEqual([name, values]);
    }
    // Always: exactly one X-Request-Id and one X-Forwarded-For, from the gateway.
    expect(valuesOf(headers, 'x-request-id')).toEqual(['req-1']);
    expect(valuesOf(headers, 'x-forwarded-for')).toHaveLength(1);
  });

  it('keeps the client spelling of passed-through names and uses canonical case for added ones', () => {
    const headers = buildUpstreamHeaders(input({ rawHeaders: ['accept-LANGUAGE', 'fr'] }));
    expect(headers).toEqual([
      'accept-LANGUAGE', 'fr',
      'X-Forwarded-For', '203.0.113.9',
      'X-Forwarded-Proto', 'http',
      'X-Forwarded-Host', 'gw.local',
      'X-Request-Id', 'req-1',
      'X-IAM-User-Id', 'user-1',
      'X-IAM-Profile-Id', 'profile-1',
    ]);
  });

  it('produces a list undici sends as is, and the host sees only the gateway-decided headers', async () => {
    let received: IncomingHttpHeaders = {};
    const server = createServer((req, res) => {
      received = req.headers;
      req.resume().on('end', () => res.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const headers = buildUpstreamHeaders(
        input({
          rawHeaders: ['Host', 'gw.local', 'Connection', 'keep-alive, x-iam-user-id, x-foo', 'Keep-Alive', 'timeout=5', 'Expect', '100-continue', 'Transfer-Encoding', 'chunked', 'TE', 'trailers', 'Upgrade', 'h2c', 'X-Foo', '1', 'X-IAM-User-Id', 'admin', 'X_IAM_User_Id', 'admin', 'Content-Type', 'text/plain', 'Content-Length', '2'],
        }),
      );
      const response = await request(`http://127.0.0.1:${port}/x`, { method: 'POST', headers, body: 'hi' });
      await response.body.text();
      expect(received['x-iam-user-id']).toBe('user-1');
      expect(received['x-foo']).toBeUndefined();
      expect(received['x_iam_user_id']).toBeUndefined();
      expect(received['content-length']).toBe('2');
      expect(received['x-forwarded-host']).toBe('gw.local');
      expect(received.host).toBe(`127.0.0.1:${port}`);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('unmapIpv4', () => {
  it.each([
    ['::ffff:10.0.0.7', '10.0.0.7'],
    ['::FFFF:192.0.2.1', '192.0.2.1'],
    ['10.0.0.7', '10.0.0.7'],
    ['2001:db8::1', '2001:db8::1'],
    ['::ffff:0a00:0007', '::ffff:0a00:0007'],
  ])('%s → %s', (address, expected) => {
    expect(unmapIpv4(address)).toBe(expected);
  });
});
