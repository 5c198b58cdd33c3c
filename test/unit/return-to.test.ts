import fc from 'fast-check';
import { safeReturnTo } from '../../src/http/return-to';

/** The origins a browser may be on when it follows the gateway's `Location` (it resolves it against the page's URL). */
const PAGES = ['http://gateway.invalid/', 'https://gw.example:8443/iam/auth/oidc/callback?code=x', 'http://127.0.0.1:8080/iam/login', 'https://gw.example/a/b/c/'];

/** What must hold of every value the gateway emits as a same-origin `Location`. */
function expectSameOrigin(emitted: string): void {
  expect(emitted[0]).toBe('/');
  expect(['/', '\\']).not.toContain(emitted[1]);
  // eslint-disable-next-line no-control-regex
  expect(emitted).not.toMatch(/[\u0000-\u0020\u007f\\]/);
  for (const page of PAGES) {
    const base = new URL(page);
    expect(new URL(emitted, base).origin).toBe(base.origin);
  }
  // A fixed point: checking the emitted value again changes nothing (the value checked is the value emitted).
  expect(safeReturnTo(emitted)).toBe(emitted);
}

describe('safeReturnTo', () => {
  it('keeps same-origin relative paths with their query and fragment', () => {
    expect(safeReturnTo('/')).toBe('/');
    expect(safeReturnTo('/api/projects?x=1&y=%2F#top')).toBe('/api/projects?x=1&y=%2F#top');
    expect(safeReturnTo('/a/../b')).toBe('/b');
  });

  it.each([
    ['scheme-relative', '//evil.test/x'],
    ['backslash after the slash', '/\\evil.test'],
    ['backslash anywhere', '/a\\b'],
    ['absolute', 'https://evil.test/'],
    ['javascript:', 'javascript:alert(1)'],
    ['relative without a slash', 'evil.test'],
    ['leading space', ' /x'],
    ['tab inside (browsers strip it: /\t/evil.test is //evil.test)', '/\t/evil.test'],
    ['newline', '/x\ny'],
    ['empty', ''],
    ['not a string', ['/x']],
    ['too long', `/${'a'.repeat(2048)}`],
    // Round 3: the raw value passed, the value emitted after dot-segment removal was `//evil.test/x`.
    ['a dot segment before a second slash', '/.//evil.test/x'],
    ['a parent segment before a second slash', '/a/..//evil.test/x'],
    ['an encoded dot segment before a second slash', '/%2e//evil.test/x'],
    ['an upper-case encoded dot segment', '/%2E//evil.test/x'],
    ['an encoded parent segment', '/a/%2e%2e//evil.test/x'],
    ['two dot segments', '/././/evil.test'],
  ])('refuses %s: /', (_name, value) => {
    expect(safeReturnTo(value)).toBe('/');
  });

  it('emits only values that stay on the origin, for generated paths (dot segments, encodings, backslashes, tabs, unicode)', () => {
    // Paths built segment by segment, so empty, dot and encoded-dot segments meet often (the shapes that turn into
    // `//` after dot-segment removal), with hostile characters inside and between the segments.
    const segment = fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('', '.', '..', '%2e', '%2E', '%2e%2e', '.%2e', '%2E.', 'evil.test', 'a') },
      {
        weight: 2,
        arbitrary: fc
          .array(fc.constantFrom('\\', '\t', '\n', '\r', ' ', '@', ':', '?', '#', '%2f', '%2F', '%5c', '%00', '%09', '%', 'http:', 'javascript:', '\u3002', '\uff0e', '\uff0f', '\u2215', '\u2044', '\ufe68', '\uff3c', 'é', 'x'), { maxLength: 4 })
          .map((parts) => parts.join('')),
      },
    );
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 8 }), fc.boolean(), (segments, leadingSlash) => {
        expectSameOrigin(safeReturnTo(`${leadingSlash ? '/' : ''}${segments.join('/')}`));
      }),
      { numRuns: 3000 },
    );
  });

  it('emits only values that stay on the origin, for arbitrary strings that start with a slash', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (tail) => {
        expectSameOrigin(safeReturnTo(`/${tail}`));
      }),
      { numRuns: 3000 },
    );
  });
});
