import fc from 'fast-check';
import { normalizeRequestTarget } from '../../src/http/normalize-target';
import type { NormalizeOptions } from '../../src/http/request-target';

const defaults: NormalizeOptions = { allowPathParameters: false, host: 'gw.local' };

type Row = [target: string, expected: { path: string; search?: string } | 'refused', options?: Partial<NormalizeOptions>];

/** The request-target rules of docs/http-contract.md. Each row names what a naive normalizer gets wrong. */
const rows: Row[] = [
  // Dot segments and repeated slashes (RFC 3986 §5.2.4).
  ['/a/./b/../c', { path: '/a/c' }],
  ['/a//b///c', { path: '/a/b/c' }],
  ['//evil.example/x', { path: '/evil.example/x' }],
  ['/../../etc', { path: '/etc' }],
  ['/a/b/../../../c', { path: '/c' }],
  ['/a/b/..', { path: '/a/' }],
  ['/a/b/.', { path: '/a/b/' }],
  ['/.', { path: '/' }],
  ['/..', { path: '/' }],
  ['//', { path: '/' }],
  ['/a/../', { path: '/' }],
  ['/a//', { path: '/a/' }],
  ['/api/projects/', { path: '/api/projects/' }],
  ['/a/.b/..c/.../b..', { path: '/a/.b/..c/.../b..' }],
  ['/', { path: '/' }],
  // Unreserved decoding happens before dot removal, so encoded dots are dot segments.
  ['/%61%70%69/x', { path: '/api/x' }],
  ['/%7e%41%2d%5F', { path: '/~A-_' }],
  ['/a/%2e%2e/admin', { path: '/admin' }],
  ['/a/.%2E/admin', { path: '/admin' }],
  ['/a/%2e/b', { path: '/a/b' }],
  ['/a/%2E%2E%2Fadmin', 'refused'],
  // Other escapes stay encoded, upper-case hex.
  ['/a%20b', { path: '/a%20b' }],
  ['/a%3fb%23c', { path: '/a%3Fb%23c' }],
  ['/caf%C3%A9', { path: '/caf%C3%A9' }],
  ['/caf%c3%a9', { path: '/caf%C3%A9' }],
  ['/x%F0%9F%98%80/y', { path: '/x%F0%9F%98%80/y' }],
  ['/x%EF%BF%BF', { path: '/x%EF%BF%BF' }],
  // Encoded separators, controls, double encoding, malformed escapes.
  ['/a%2fb', 'refused'],
  ['/a%2Fb', 'refused'],
  ['/a%5cb', 'refused'],
  ['/a\\b', 'refused'],
  ['/a%00b', 'refused'],
  ['/a%1fb', 'refused'],
  ['/a%7Fb', 'refused'],
  ['/a%252Fb', 'refused'],
  ['/a%252e%252e/x', 'refused'],
  ['/a%25%32%46b', 'refused'], // unreserved decoding would build %2F's double encoding
  ['/a%25', 'refused'],
  ['/a%zz', 'refused'],
  ['/a%2', 'refused'],
  ['/a%', 'refused'],
  ['/a%2?x', 'refused'],
  // UTF-8 in escapes (RFC 3629): invalid, surrogate, overlong, truncated, out of range.
  ['/x%C3%28', 'refused'],
  ['/x%ED%A0%80', 'refused'],
  ['/x%C0%AF', 'refused'],
  ['/x%E0%80%AF', 'refused'],
  ['/x%F0%80%80%AF', 'refused'],
  ['/x%F4%90%80%80', 'refused'],
  ['/x%80', 'refused'],
  ['/x%C3', 'refused'],
  ['/x%C3/%A9', 'refused'],
  ['/x%C3a', 'refused'],
  ['/x%F5%80%80%80', 'refused'],
  // Raw bytes outside printable ASCII.
  ['/caf\u00e9', 'refused'],
  ['/a\tb', 'refused'],
  ['/a\u007fb', 'refused'],
  ['/a b', 'refused'],
  ['/a\u0000b', 'refused'],
  ['/\u2215etc', 'refused'],
  // Path parameters.
  ['/a;jsessionid=1/b', 'refused'],
  ['/a;jsessionid=1/b', { path: '/a;jsessionid=1/b' }, { allowPathParameters: true }],
  ['/a%3Bb', 'refused'],
  ['/a%3bb', { path: '/a%3Bb' }, { allowPathParameters: true }],
  ['/..;/admin', 'refused', { allowPathParameters: true }],
  ['/a/.;x/b', 'refused', { allowPathParameters: true }],
  ['/a/%2e%2e%3bx/b', 'refused', { allowPathParameters: true }],
  ['/a/;x/b', 'refused', { allowPathParameters: true }],
  // Request-target forms (RFC 9112 §3.2).
  ['http://evil.example/admin', 'refused'],
  ['http://gw.local:8080/api?x', { path: '/api', search: '?x' }, { host: 'gw.local:8080' }],
  ['HTTPS://GW.Local/a/../b', { path: '/b' }],
  ['http://gw.local', { path: '/' }],
  ['http://gw.local?x=1', { path: '/', search: '?x=1' }],
  ['http://gw.local:9090/api', 'refused', { host: 'gw.local:8080' }],
  ['http://gw.local.evil/api', 'refused'],
  ['http://user@gw.local/api', 'refused'],
  ['http://gw.local#x', 'refused'],
  ['ftp://gw.local/api', 'refused'],
  ['http://gw.local/api', 'refused', { host: undefined }],
  ['*', 'refused'],
  ['gw.local:443', 'refused'],
  ['api/x', 'refused'],
  ['', 'refused'],
  // Query: returned untouched, refused only for controls, non-ASCII or a fragment.
  ['/api?x=%2F', { path: '/api', search: '?x=%2F' }],
  ['/api/projects/42?x=1', { path: '/api/projects/42', search: '?x=1' }],
  ['/a/../b?p=/../%zz;', { path: '/b', search: '?p=/../%zz;' }],
  ['/api?', { path: '/api', search: '?' }],
  ['/api?x=\u0001', 'refused'],
  ['/api?x=caf\u00e9', 'refused'],
  ['/api?x=\u007f', 'refused'],
  ['/a#frag', 'refused'],
  ['/a?b#frag', 'refused'],
];

describe('normalizeRequestTarget', () => {
  // Rows are spread into one argument: jest treats an extra declared parameter as a `done` callback.
  it.each(rows.map((row) => ({ row, title: JSON.stringify(row) })))('$title', ({ row: [target, expected, overrides] }) => {
    const result = normalizeRequestTarget(target, { ...defaults, ...overrides });
    if (expected === 'refused') {
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.reason.length).toBeGreaterThan(0);
    } else {
      expect(result).toEqual({ ok: true, path: expected.path, search: expected.search ?? '' });
    }
  });

  it('names the reason in a short sentence the client may see', () => {
    expect(normalizeRequestTarget('/a%2fb', defaults)).toEqual({ ok: false, reason: "encoded '/' in path" });
    expect(normalizeRequestTarget('/a%5Cb', defaults)).toEqual({ ok: false, reason: "encoded '\\' in path" });
    expect(normalizeRequestTarget('/x%C0%AF', defaults)).toEqual({ ok: false, reason: 'invalid UTF-8 in path' });
    expect(normalizeRequestTarget('http://evil.example/', defaults)).toEqual({ ok: false, reason: 'absolute-form target names another host' });
  });

  it('refuses targets longer than maxLength, counting the query', () => {
    expect(normalizeRequestTarget('/abc?de', { ...defaults, maxLength: 7 }).ok).toBe(true);
    expect(normalizeRequestTarget('/abc?def', { ...defaults, maxLength: 7 })).toEqual({ ok: false, reason: 'request target too long' });
  });

  const piece = fc.constantFrom('/', '//', '.', '..', '%2e', '%2E', 'a', 'B', '%41', '%c3%a9', '%C3', '%a9', ';', '%3b', '%25', '%2f', '%', '~', '%7e', '?', '%20');
  const target = fc.array(piece, { maxLength: 12 }).map((parts) => '/' + parts.join(''));

  it('is idempotent: a normalized target normalizes to itself', () => {
    fc.assert(
      fc.property(target, fc.boolean(), (raw, allowPathParameters) => {
        const first = normalizeRequestTarget(raw, { ...defaults, allowPathParameters });
        if (!first.ok) return;
        const again = normalizeRequestTarget(first.path + first.search, { ...defaults, allowPathParameters });
        expect(again).toEqual(first);
      }),
      { numRuns: 3000 },
    );
  });

  it('never returns a path a host could read as a dot segment, an empty segment or an encoded slash', () => {
    fc.assert(
      fc.property(target, (raw) => {
        const result = normalizeRequestTarget(raw, defaults);
        if (!result.ok) return;
        expect(result.path.startsWith('/')).toBe(true);
        const segments = result.path.split('/').slice(1);
        segments.forEach((segment, index) => {
          const decoded = decodeURIComponent(segment);
          expect(decoded === '.' || decoded === '..').toBe(false);
          expect(decoded.includes('/') || decoded.includes('%')).toBe(false);
          // #11.20: nor after compatibility normalization (a host applying NFKC after decoding).
          const compatible = decoded.normalize('NFKC');
          expect(compatible === '.' || compatible === '..' || /[/\\%]/.test(compatible)).toBe(false);
          if (index < segments.length - 1) expect(segment).not.toBe('');
        });
      }),
      { numRuns: 3000 },
    );
  });
});

describe('#11.20 compatibility characters cannot become ASCII at the host', () => {
  it.each([
    ['/api/%EF%BC%8E%EF%BC%8E/admin', 'fullwidth full stops (NFKC ..)'],
    ['/api/x/%EF%BC%8E%EF%BC%8E%EF%BC%8Fadmin', 'fullwidth ../'],
    ['/api%EF%BC%8Fadmin', 'fullwidth solidus (NFKC /)'],
    ['/api%EF%BC%BCadmin', 'fullwidth reverse solidus (NFKC \\)'],
    ['/a/%E2%80%A4%E2%80%A4/b', 'one dot leader (NFKC .)'],
    ['/a/%E2%80%A5/b', 'two dot leader (NFKC ..)'],
    ['/a/%EF%B9%92/b', 'small full stop (NFKC .)'],
    ['/a/%EF%BC%85%32%46', 'fullwidth percent (NFKC %)'],
    ['/api/%EF%BC%A1DMIN', 'fullwidth A (NFKC A)'],
    ['/api/%C5%BFtats', 'long s (NFKC s)'],
    ['/api/%E2%84%AA', 'Kelvin sign (NFKC K)'],
    ['/a%E2%88%95b', 'division slash (best-fit /)'],
    ['/a%E2%81%84b', 'fraction slash'],
    ['/a%E2%88%96b', 'set minus (best-fit \\)'],
  ])('#11.20: %s is refused (%s)', (target) => {
    const result = normalizeRequestTarget(target, defaults);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(/compatibility character/);
  });

  it.each(['/caf%C3%A9', '/x/%E6%97%A5%E6%9C%AC', '/x%F0%9F%98%80', '/%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82', '/e%CC%81'])('#11.20: ordinary non-ASCII text %s still passes', (target) => {
    expect(normalizeRequestTarget(target, defaults).ok).toBe(true);
  });
});

describe('#11.17 method-override query parameters are refused', () => {
  it.each([
    '/x?_method=DELETE', '/x?a=1&_method=PUT', '/x?a=1;_method=PUT', '/x?%5Fmethod=PUT', '/x?%5fMETHOD=PUT', '/x?_METHOD=put', '/x?_method[]=DELETE',
    '/x?.method=PUT', '/x?+method=PUT', '/x?%20method=PUT', '/x?[method=PUT', '/x?_%6Dethod=PUT', '/x?x-http-method-override=DELETE', '/x?X-HTTP-Method=PUT',
    '/x?_method', '/x?x-method-override=PATCH',
  ])('#11.17: %s', (target) => {
    const result = normalizeRequestTarget(target, defaults);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(/method-override/);
  });

  it.each(['/x?method=GET', '/x?methods=a', '/x?my_method=1', '/x?a=_method', '/x?_methodology=1', '/x?q=x-http-method'])('#11.17: %s is an ordinary parameter', (target) => {
    expect(normalizeRequestTarget(target, defaults).ok).toBe(true);
  });
});

describe('#11.20 a gateway token in the request target is refused', () => {
  const token = `iamt_${'A'.repeat(43)}`;
  it.each([`/x?access_token=${token}`, `/x?t=iamt%5F${'b'.repeat(43)}`, `/api/${token}`])('#11.20: %s', (target) => {
    const result = normalizeRequestTarget(target, defaults);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(/gateway access token/);
  });

  it('#11.20: the word without a token is fine', () => {
    expect(normalizeRequestTarget('/iamt_/x?q=iamt_short', defaults).ok).toBe(true);
  });
});
