import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import fc from 'fast-check';
import { terminalOutput, terminalText } from '../../src/observability/terminal-text';
import { formatReplayReport, ReplayTally } from '../../src/policy-tools/policy-replay';

// What a terminal would obey: C0 but tab, DEL, C1, the Unicode line separators and the bidirectional controls.
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const STEERING = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('terminalText', () => {
  it.each([
    ['ESC (a retitle and a clear screen)', '\x1b]0;pwned\x07\x1b[2J', '\\u001b]0;pwned\\u0007\\u001b[2J'],
    ['BEL', 'a\x07b', 'a\\u0007b'],
    ['a carriage return that would overwrite the line', 'ok\rFAIL', 'ok\\rFAIL'],
    ['backspace and form feed', '\b\f', '\\b\\f'],
    ['NUL and DEL', '\x00\x7f', '\\u0000\\u007f'],
    ['the C1 controls (U+009B is a CSI of its own)', '\x80\x85\x9b2J\x9f', '\\u0080\\u0085\\u009b2J\\u009f'],
    ['the bidirectional overrides and isolates', '\u202eexe.txt\u202c \u2066x\u2069', '\\u202eexe.txt\\u202c \\u2066x\\u2069'],
    ['the invisible direction marks', '\u200e\u200f\u061c', '\\u200e\\u200f\\u061c'],
    ['the Unicode line separators', 'a\u2028b\u2029c', 'a\\u2028b\\u2029c'],
    ['a line feed inside one value', 'GET /a\nGET /b', 'GET /a\\nGET /b'],
    ['a tab stays', 'a\tb', 'a\tb'],
    ['text stays as it is', '/api/caf\u00e9 → 日本 ✓ "q" \\u001b', '/api/caf\u00e9 → 日本 ✓ "q" \\u001b'],
  ])('%s', (_name, text, shown) => {
    expect(terminalText(text)).toBe(shown);
  });

  it('keeps the line feeds of composed output when asked, and nothing else', () => {
    expect(terminalText('line 1\nline \x1b[2J2\r\n', 'keep')).toBe('line 1\nline \\u001b[2J2\\r\n');
  });

  it('leaves no steering character, whatever the text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(terminalText(text)).not.toMatch(STEERING);
        expect(terminalText(text, 'keep').replace(/\n/g, '')).not.toMatch(STEERING);
      }),
      { numRuns: 500 },
    );
  });

  it('keeps JSON valid and its values the same, so --json output goes through the same filter', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: 'binary' }), (value, text) => {
        for (const json of [JSON.stringify({ value, text }), JSON.stringify({ value, text }, null, 2)]) {
          expect(JSON.parse(terminalText(json, 'keep'))).toEqual(JSON.parse(json));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('terminalOutput writes every chunk through it, line breaks kept', () => {
    let written = '';
    const output = terminalOutput({ write: (text: string) => (written += text) });
    output.write('iam-gateway: unknown command "\x1b]0;x\x07"\n');
    output.write('  \x9b2J\n');
    expect(written).toBe('iam-gateway: unknown command "\\u001b]0;x\\u0007"\n  \\u009b2J\n');
  });
});

describe('policy replay shows each recorded field on its own line', () => {
  it('a line feed in a recorded path or user cannot forge a report line', () => {
    const tally = new ReplayTally();
    const record = { method: 'GET', path: '/a\nroute /b: 0 allow→deny', route: '/a', verdict: 'allow' as const, step: null, userId: 'u\nuser x', profileId: 'p', clientType: 'browser', origin: 'log:1' };
    tally.add(record, { verdict: 'deny', step: 'PERMISSION_DENIED', route: '/a', reused: false });
    const lines = formatReplayReport(tally.report());
    expect(lines.some((line) => line.includes('/a\\nroute /b: 0 allow→deny u\\nuser x: allow → deny (PERMISSION_DENIED)'))).toBe(true);
    expect(lines.some((line) => line.startsWith('user u\\nuser x:'))).toBe(true);
    for (const line of lines) expect(line).not.toContain('\n');
  });
});

describe('the CLI writes in one place', () => {
  it('no module of src/ but src/cli/main.ts writes to process.stdout or process.stderr', () => {
    const src = join(__dirname, '../../src');
    const writers: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (name.endsWith('.ts') && /process\.std(?:out|err)\b/.test(readFileSync(path, 'utf8').replace(/\/\/.*|\/\*[\s\S]*?\*\//g, ''))) writers.push(relative(src, path));
      }
    };
    walk(src);
    expect(writers).toEqual(['cli/main.ts']);
  });
});
