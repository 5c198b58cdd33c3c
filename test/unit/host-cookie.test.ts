/**
 * The `Cookie` the host may see (http/host-cookie.ts): the gateway's cookies (session, OpenID Connect state) are
 * removed in every spelling a host could read as one of them; the host's own cookies pass unchanged. The inline proxy
 * applies the same rule to every `Cookie` line it forwards (forward-auth's answer: forward-auth-handler.test.ts).
 */
import { hostCookie } from '../../src/http/host-cookie';
import { GATEWAY_COOKIE_NAMES } from '../../src/http/session-cookie';
import { buildUpstreamHeaders } from '../../src/http/upstream-headers';

const TOKEN = `iamt_${'Q'.repeat(43)}`;

describe('hostCookie', () => {
  it.each([
    ['a=1; __Host-iam-session=iamt_x; b=2', 'a=1; b=2'],
    ['__Host-iam-session=iamt_x', ''],
    ['iam-session=iamt_x;iam-session-theme=dark', 'iam-session-theme=dark'],
    ['x-iam-session=1; a=2', 'x-iam-session=1; a=2'],
    ['a=1', 'a=1'],
    // The OpenID Connect login state, both names.
    ['theme=dark; __Host-iam-oidc=v1.a.b.c', 'theme=dark'],
    ['iam-oidc=v1.a.b.c; theme=dark', 'theme=dark'],
    // The name in another case: some hosts (ASP.NET, for one) read cookie names case-insensitively.
    [`IAM-SESSION=${TOKEN}; theme=dark`, 'theme=dark'],
    [`__host-IAM-Session=${TOKEN}`, ''],
    ['Iam-Oidc=v1.x; theme=dark', 'theme=dark'],
    // Whitespace around the name, and the session cookie sent twice.
    [`theme=dark;  iam-session =${TOKEN} ; iam-session=${TOKEN}`, 'theme=dark'],
    [`__Host-iam-session=${TOKEN}; __Host-iam-session=iamt_other; lang=en`, 'lang=en'],
    // Values with `=`: the name ends at the first one; a host cookie's value is kept whole.
    ['pref=a=b==; iam-session=iamt_x=y', 'pref=a=b=='],
    ['theme=iam-session=iamt_x', 'theme=iam-session=iamt_x'],
    // A piece named like a gateway cookie after a `,` (RFC 2109 parsers split there too): the pair goes whole.
    [`theme=dark, iam-session=${TOKEN}; lang=en`, 'lang=en'],
    [`lang=en; a=1,__Host-iam-oidc=v1.x`, 'lang=en'],
    ['date=Mon, 01 Jan 2024; lang=en', 'date=Mon, 01 Jan 2024; lang=en'],
    // No other cookie left: '' (the host then gets no Cookie header at all).
    [`iam-session=${TOKEN}; ; __Host-iam-oidc=x`, ''],
  ])('%s → %j', (header, expected) => {
    expect(hostCookie(header)).toBe(expected);
  });

  it('removes every gateway cookie name, in any case, wherever it stands', () => {
    const spellings = GATEWAY_COOKIE_NAMES.flatMap((name) => [name, name.toUpperCase(), name.toLowerCase(), name[0]!.toUpperCase() + name.slice(1)]);
    for (const name of spellings) {
      for (const header of [`${name}=${TOKEN}`, `a=1; ${name}=${TOKEN}`, `${name}=${TOKEN}; a=1`, `a=1;${name}=v;b=2`, `a=1, ${name}=v`]) {
        const kept = hostCookie(header);
        // Read as RFC 6265 (`;`) and as RFC 2109 (`;` and `,`) parsers read it: no pair has a gateway name.
        const names = kept.split(/[;,]/).map((pair) => pair.split('=')[0]!.trim().toLowerCase());
        expect([header, names.filter((left) => GATEWAY_COOKIE_NAMES.some((gateway) => gateway.toLowerCase() === left))]).toEqual([header, []]);
        expect(kept).not.toContain(TOKEN);
      }
    }
  });

  it('is the rule of the inline proxy: each Cookie line the host receives is hostCookie of the client\'s', () => {
    const lines = [`theme=dark; IAM-Session=${TOKEN}`, `__Host-iam-oidc=v1.x`, `lang=en, iam-session=${TOKEN}`, 'pref=a=b'];
    const rawHeaders = lines.flatMap((line) => ['Cookie', line]);
    const out = buildUpstreamHeaders({ rawHeaders, remoteAddress: '203.0.113.9', trustedProxy: false, protocol: 'http', host: 'gw.local', requestId: 'r', stripAuthorization: false, identity: null });
    const sent = out.flatMap((value, i) => (i % 2 === 1 && out[i - 1]!.toLowerCase() === 'cookie' ? [value] : []));
    expect(sent).toEqual(['theme=dark', 'pref=a=b']);
    expect(sent).toEqual(lines.map(hostCookie).filter((line) => line !== ''));
  });
});
