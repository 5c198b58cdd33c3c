import { inspectRequestHeaders, parseBearerToken, type BearerCredential } from '../../src/http/inbound-headers';

type InspectRow = { name: string; rawHeaders: string[]; expect: { authorization: string | null } | { refused: string } };

const TOKEN = 'iamt_Zm9vYmFyYmF6cXV4LV9-';

/** Request smuggling (RFC 9112 §6.1, §6.3) and credential ambiguity (docs/http-contract.md). */
const inspectRows: InspectRow[] = [
  { name: 'no headers', rawHeaders: [], expect: { authorization: null } },
  { name: 'one Authorization, any case', rawHeaders: ['Host', 'gw', 'aUtHoRiZaTiOn', `Bearer ${TOKEN}`], expect: { authorization: `Bearer ${TOKEN}` } },
  { name: 'two Authorization headers', rawHeaders: ['Authorization', `Bearer ${TOKEN}`, 'authorization', 'Basic eDp5'], expect: { refused: 'Authorization' } },
  { name: 'two identical Authorization headers', rawHeaders: ['Authorization', 'Bearer a', 'AUTHORIZATION', 'Bearer a'], expect: { refused: 'Authorization' } },
  { name: 'two Host headers', rawHeaders: ['Host', 'gw.local', 'host', 'evil.example'], expect: { refused: 'Host' } },
  { name: 'Transfer-Encoding with Content-Length (CL.TE)', rawHeaders: ['Content-Length', '5', 'Transfer-Encoding', 'chunked'], expect: { refused: 'Transfer-Encoding' } },
  { name: 'Content-Length after Transfer-Encoding (TE.CL)', rawHeaders: ['transfer-encoding', 'chunked', 'content-length', '0'], expect: { refused: 'Content-Length' } },
  { name: 'two Content-Length headers, same value', rawHeaders: ['Content-Length', '5', 'Content-Length', '5'], expect: { refused: 'Content-Length' } },
  { name: 'a Content-Length list', rawHeaders: ['Content-Length', '5, 5'], expect: { refused: 'Content-Length' } },
  { name: 'a signed Content-Length', rawHeaders: ['Content-Length', '+5'], expect: { refused: 'Content-Length' } },
  { name: 'a valid Content-Length', rawHeaders: ['Content-Length', '42', 'Authorization', 'Basic eDp5'], expect: { authorization: 'Basic eDp5' } },
  { name: 'Transfer-Encoding: chunked, any case, padded', rawHeaders: ['Transfer-Encoding', ' ChUnKeD '], expect: { authorization: null } },
  { name: 'Transfer-Encoding: gzip, chunked', rawHeaders: ['Transfer-Encoding', 'gzip, chunked'], expect: { refused: 'Transfer-Encoding' } },
  { name: 'Transfer-Encoding: chunked, identity', rawHeaders: ['Transfer-Encoding', 'chunked, identity'], expect: { refused: 'Transfer-Encoding' } },
  { name: 'Transfer-Encoding: xchunked', rawHeaders: ['Transfer-Encoding', 'xchunked'], expect: { refused: 'Transfer-Encoding' } },
  { name: 'Transfer-Encoding: identity', rawHeaders: ['Transfer-Encoding', 'identity'], expect: { refused: 'Transfer-Encoding' } },
  { name: 'two Transfer-Encoding: chunked headers', rawHeaders: ['Transfer-Encoding', 'chunked', 'transfer-encoding', 'chunked'], expect: { refused: 'Transfer-Encoding' } },
  { name: 'look-alike names are not counted', rawHeaders: ['X-Authorization', 'a', 'Authorization', 'Bearer b', 'Authorization-X', 'c', 'Hosts', 'd', 'Host', 'e'], expect: { authorization: 'Bearer b' } },
];

const GATEWAY_TOKEN = `iamt_${'Q'.repeat(43)}`;
const basic = (userPass: string): string => `Basic ${Buffer.from(userPass).toString('base64')}`;

/** #11.17 method overrides and #11.20 gateway tokens outside `Authorization: Bearer`: refused, never forwarded. */
inspectRows.push(
  { name: '#11.17: X-HTTP-Method-Override', rawHeaders: ['X-HTTP-Method-Override', 'DELETE'], expect: { refused: 'method-override' } },
  { name: '#11.17: x-http-method', rawHeaders: ['x-http-method', 'PUT'], expect: { refused: 'method-override' } },
  { name: '#11.17: X-METHOD-OVERRIDE', rawHeaders: ['X-METHOD-OVERRIDE', 'PATCH'], expect: { refused: 'method-override' } },
  { name: '#11.20: Basic with the token as is', rawHeaders: ['Authorization', `Basic ${GATEWAY_TOKEN}`], expect: { refused: 'gateway access token' } },
  { name: '#11.20: Token scheme', rawHeaders: ['Authorization', `Token ${GATEWAY_TOKEN}`], expect: { refused: 'gateway access token' } },
  { name: '#11.20: Basic base64 user:token', rawHeaders: ['Authorization', basic(`x:${GATEWAY_TOKEN}`)], expect: { refused: 'gateway access token' } },
  { name: '#11.20: Basic base64 token:', rawHeaders: ['Authorization', basic(`${GATEWAY_TOKEN}:`)], expect: { refused: 'gateway access token' } },
  { name: '#11.20: in a cookie', rawHeaders: ['Cookie', `session=${GATEWAY_TOKEN}`], expect: { refused: 'gateway access token' } },
  { name: '#11.20: in another header, %5F-encoded', rawHeaders: ['X-Auth-Token', `iamt%5F${'Q'.repeat(43)}`], expect: { refused: 'gateway access token' } },
  { name: '#11.20: in Proxy-Authorization', rawHeaders: ['Proxy-Authorization', `Bearer ${GATEWAY_TOKEN}`], expect: { refused: 'gateway access token' } },
  { name: '#11.20: lowercase bearer is the gateway credential (read, then stripped)', rawHeaders: ['Authorization', `bearer ${GATEWAY_TOKEN}`], expect: { authorization: `bearer ${GATEWAY_TOKEN}` } },
  { name: '#11.20: a Basic credential without a token is the host\'s', rawHeaders: ['Authorization', basic('alice:iamt_')], expect: { authorization: basic('alice:iamt_') } },
);

describe('inspectRequestHeaders', () => {
  it.each(inspectRows)('$name', ({ rawHeaders, expect: expected }) => {
    const result = inspectRequestHeaders(rawHeaders);
    if ('refused' in expected) {
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.reason).toContain(expected.refused);
    } else {
      expect(result).toEqual({ ok: true, authorization: expected.authorization });
    }
  });
});

type BearerRow = { name: string; header: string | null; expect: BearerCredential };

/** RFC 6750 §2.1: `Bearer 1*SP b64token`, b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=". */
const bearerRows: BearerRow[] = [
  { name: 'no header', header: null, expect: { kind: 'none' } },
  { name: 'a bearer token', header: `Bearer ${TOKEN}`, expect: { kind: 'bearer', token: TOKEN } },
  { name: 'scheme is case-insensitive', header: `bEARER ${TOKEN}`, expect: { kind: 'bearer', token: TOKEN } },
  { name: 'several spaces are tolerated', header: `Bearer   ${TOKEN}`, expect: { kind: 'bearer', token: TOKEN } },
  { name: 'every b64token character and padding', header: 'Bearer aZ09-._~+/==', expect: { kind: 'bearer', token: 'aZ09-._~+/==' } },
  { name: 'Basic is for the host', header: 'Basic dXNlcjpwYXNz', expect: { kind: 'other' } },
  { name: 'a scheme without credentials', header: 'Negotiate', expect: { kind: 'other' } },
  { name: 'a longer scheme starting with Bearer', header: `Bearerx ${TOKEN}`, expect: { kind: 'other' } },
  { name: 'Bearer without a token', header: 'Bearer', expect: { kind: 'malformed' } },
  { name: 'Bearer and spaces only', header: 'Bearer   ', expect: { kind: 'malformed' } },
  { name: 'tab as separator', header: `Bearer\t${TOKEN}`, expect: { kind: 'malformed' } },
  { name: 'a space inside the token', header: 'Bearer abc def', expect: { kind: 'malformed' } },
  { name: 'a comma list (two credentials)', header: 'Bearer abc, Bearer def', expect: { kind: 'malformed' } },
  { name: 'characters after the padding', header: 'Bearer abc=d', expect: { kind: 'malformed' } },
  { name: 'padding only', header: 'Bearer ==', expect: { kind: 'malformed' } },
  { name: 'a non-b64token character', header: 'Bearer abc"def', expect: { kind: 'malformed' } },
  { name: 'a trailing space', header: 'Bearer abc ', expect: { kind: 'malformed' } },
  { name: 'an empty header', header: '', expect: { kind: 'malformed' } },
  { name: 'a leading space', header: ` Bearer ${TOKEN}`, expect: { kind: 'malformed' } },
];

describe('parseBearerToken', () => {
  it.each(bearerRows)('$name', ({ header, expect: expected }) => {
    expect(parseBearerToken(header)).toEqual(expected);
  });
});
