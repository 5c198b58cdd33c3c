import { safeReturnTo } from '../../src/http/return-to';

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
  ])('refuses %s: /', (_name, value) => {
    expect(safeReturnTo(value)).toBe('/');
  });
});
