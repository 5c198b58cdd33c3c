import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import fc from 'fast-check';
import { parsePolicyFile, parseWellFormed, parseWithDocument, type ParsedPolicyFile } from '../../src/policy/policy-parser';

// A policy file is read by a fast reader (js-yaml's events) when it is well formed, and by the `yaml`
// library otherwise. The two must agree on every value and every line, or a policy would mean one thing
// to the gateway and another to the file's author; this holds them together.

const ROOT = join(__dirname, '../..');

function policyFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ya?ml|json)$/.test(name) && /^(version|default|routes|resources|match)\s*:/m.test(readFileSync(path, 'utf8'))) found.push(path);
    }
  };
  for (const dir of ['policies', 'examples', 'test/fixtures', 'deploy']) walk(join(ROOT, dir));
  return found;
}

/** Every path into a value: object keys and array indexes, with the root. */
function pathsOf(value: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  const paths: Array<Array<string | number>> = [prefix];
  if (Array.isArray(value)) value.forEach((item, index) => paths.push(...pathsOf(item, [...prefix, index])));
  else if (value !== null && typeof value === 'object') for (const [key, item] of Object.entries(value)) paths.push(...pathsOf(item, [...prefix, key]));
  return paths;
}

function expectSameReading(fast: ParsedPolicyFile, thorough: ParsedPolicyFile, value: unknown): void {
  expect(fast.document).toEqual(thorough.document);
  expect(fast.issues).toEqual(thorough.issues);
  for (const path of [...pathsOf(value), ['no-such-key'], ['routes', 999, 'path']]) {
    expect([path, fast.lineOf(path)]).toEqual([path, thorough.lineOf(path)]);
  }
}

/** Generated policy files: a tree of maps, sequences and scalars under `routes`, written in flow or block style. */
const scalar = fc.oneof(
  fc.constantFrom('/a', '/a/:id', '/**', 'a:read', '*:*', 'true', 'false', 'null', '1', '0o7', '.inf', 'yes', 'GET', '"x y"', "'q'", '"\\u00e9"', 'a # c', '[x]', '{}', ''),
  fc.stringMatching(/^[a-z/:*]{1,8}$/),
);
const key = fc.constantFrom('path', 'methods', 'permission', 'public', 'authenticated', 'routes', 'mode', '"quoted"', 'x y');
type Tree = { kind: 'scalar'; text: string } | { kind: 'map'; entries: Array<[string, Tree]> } | { kind: 'seq'; items: Tree[] };
const { tree } = fc.letrec<{ tree: Tree }>((tie) => ({
  tree: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar.map((text): Tree => ({ kind: 'scalar', text })),
    fc.uniqueArray(fc.tuple(key, tie('tree')), { maxLength: 4, selector: ([k]) => k.replace(/"/g, '') }).map((entries): Tree => ({ kind: 'map', entries })),
    fc.array(tie('tree'), { maxLength: 4 }).map((items): Tree => ({ kind: 'seq', items })),
  ),
}));
const flow = (node: Tree): string => node.kind === 'scalar'
  ? (node.text === '' || /^[[{]|#/.test(node.text) ? JSON.stringify(node.text) : node.text)
  : node.kind === 'map'
    ? `{ ${node.entries.map(([k, v]) => `${k}: ${flow(v)}`).join(', ')} }`
    : `[${node.items.map(flow).join(', ')}]`;
const block = (node: Tree, indent: string): string => {
  if (node.kind === 'map' && node.entries.length > 0) return node.entries.map(([k, v]) => `\n${indent}${k}:${block(v, `${indent}  `)}`).join('');
  if (node.kind === 'seq' && node.items.length > 0) return node.items.map((item) => `\n${indent}-${block(item, `${indent}  `)}`).join('');
  return ` ${flow(node)}`;
};
const generatedFile = (root: Tree, useBlock: boolean): string => `version: 1\nroutes:${useBlock ? block(root, '  ') : ` ${flow(root)}`}\n`;

describe('policy files: the fast reader and the thorough reader agree', () => {
  const files = policyFiles();

  it('finds the repository’s policy files', () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it.each(files.map((path) => [relative(ROOT, path)]))('%s', (file) => {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const thorough = parseWithDocument(file, text);
    const fast = parseWellFormed(file, text);
    if (fast === null) {
      // Only files the fast reader may not read fall back: syntax errors, aliases, several documents.
      expect(thorough.issues.some((issue) => issue.kind === 'parse') || /[&*][A-Za-z]/.test(text)).toBe(true);
      return;
    }
    const value = JSON.parse(JSON.stringify(thorough.document ?? parseWithDocumentValue(text)));
    expectSameReading(fast, thorough, value);
  });

  it.each([
    ['block and flow styles, comments, quoting', 'version: 1 # one\ndefault: "deny"\nroutes:\n  - path: \'/a\'\n    methods: [GET, "POST"]\n    permission: a:read\n  -\n    path: /b\n    public: true\n'],
    ['JSON', '{\n  "version": 1,\n  "routes": [\n    { "path": "/a",\n      "authenticated": true }\n  ]\n}\n'],
    ['block scalars and empty lines', 'version: 1\n\n\nroutes:\n  - path: >-\n      /folded\n    public: true\n  - path: |-\n      /literal\n    public: true\n'],
    ['a schema error keeps its line', 'version: 1\nroutes:\n  - path: /a\n    permision: a:read\n'],
    ['a wrong type', 'version: 1\nroutes:\n  - path: /a\n    public: yes\n'],
    ['YAML 1.1 words stay strings', 'version: 1\nroutes:\n  - path: on\n    permission: no:off\n'],
    ['null, ~ and empty values', 'version: 1\ndefault:\nresources: ~\nroutes: []\n'],
    ['numbers', 'version: 0x1\nroutes:\n  - { path: /a, permission: 1e3 }\n'],
    ['keys in quotes and a document start', '---\n"version": 1\n\'routes\':\n  - { "path": /a, public: true }\n...\n'],
    ['windows line ends', 'version: 1\r\nroutes:\r\n  - path: /a\r\n    public: true\r\n'],
    ['a tab after a value', 'version: 1\t\nroutes: [ ]\n'],
    ['windows line ends with comments and a block scalar', 'version: 1 # one\r\nroutes:\r\n  - path: |-\r\n      /a\r\n    public: true # two\r\n'],
    ['% and ! inside values and comments', 'version: 1 # %YAML 1.1 !!float\nroutes:\n  - path: /a!b%c\n    permission: "!x:%y"\n    methods: [ \'!\' ]\n'],
    ['characters beyond ASCII', 'version: 1 # é ü 日本 \u200f\nroutes:\n  - path: /caf\u00e9\n    public: true\n'],
  ])('%s', (_name, text) => {
    const thorough = parseWithDocument('t.yaml', text);
    const fast = parseWellFormed('t.yaml', text);
    expect(fast).not.toBeNull();
    expectSameReading(fast!, thorough, parseWithDocumentValue(text));
  });

  it.each([
    ['a syntax error', 'version: 1\nroutes: [\n'],
    ['a duplicate key', 'version: 1\nversion: 1\n'],
    ['an alias', 'version: 1\nx: &a { public: true }\nroutes:\n  - *a\n'],
    ['two documents', 'version: 1\n---\nversion: 1\n'],
    ['an empty file', ''],
    ['only a comment', '# nothing\n'],
    ['an unknown tag', 'version: !weird 1\n'],
    ['a merge key (a plain key to both, but not a word)', 'version: 1\nroutes:\n  - <<: { public: true }\n    path: /a\n'],
    ['an empty key', 'version: 1\nroutes: [:]\n'],
    ['a null key', 'version: 1\nnull: 1\n'],
    ['a number key', 'version: 1\n0x1: 1\n'],
    ['a collection key', 'version: 1\n? [a]\n: 1\n'],
  ])('%s goes to the thorough reader, whose issues the user sees', (_name, text) => {
    expect(parseWellFormed('t.yaml', text)).toBeNull();
    expect(parsePolicyFile('t.yaml', text)).toEqual(expect.objectContaining({ issues: parseWithDocument('t.yaml', text).issues }));
  });

  // What the two readers (or an editor and the readers) would take two ways is refused, with its line, whichever
  // reader the rest of the file would have gone to.
  it.each([
    ['a lone CR ending a comment', 'version: 1\nroutes:\n  - path: /a # note\r    public: true\n', 3],
    ['a lone CR ending a value', 'version: 1\nroutes:\n  - path: /a\r    public: true\n', 3],
    ['a lone CR in a quoted value', 'version: 1\nroutes:\n  - path: "/a\rb"\n    public: true\n', 3],
    ['a lone CR in a file that also has an alias', 'version: 1\nx: &a { public: true }\nroutes:\n  - *a # c\r  - path: /b\n', 4],
    ['old Mac line ends', 'version: 1\rroutes: []\r', 1],
    ['CR CR LF', 'version: 1\nroutes: []\r\r\n', 2],
    ['NEL', 'version: 1\nroutes:\n  - path: /a # c\u0085    public: true\n', 3],
    ['U+2028 in a comment', 'version: 1\nroutes:\n  - path: /a # c\u2028    public: true\n', 3],
    ['U+2029 in a value', 'version: 1\nroutes:\n  - path: "/a\u2029"\n', 3],
    ['ESC in a quoted value', 'version: 1\nroutes:\n  - path: "/a\u001b[2J"\n    public: true\n', 3],
    ['DEL', 'version: 1\nroutes: [] # \u007f\n', 2],
    ['a C1 control', 'version: 1\nroutes: [] # \u009b2J\n', 2],
    ['a bidirectional override in a comment', 'version: 1\nroutes:\n  - path: /a # \u202e\n    public: true\n', 3],
    ['a bidirectional isolate', 'version: 1\nroutes: [] # \u2066x\u2069\n', 2],
    ['%YAML 1.1 (yes is true to one reader)', '%YAML 1.1\n---\nversion: 1\nroutes:\n  - path: /a\n    public: yes\n', 1],
    ['%YAML 1.2', '# the version\n%YAML 1.2\n---\nversion: 1\nroutes: []\n', 2],
    ['%TAG', '%TAG !e! tag:example.com,2000:\n---\nversion: 1\nroutes: []\n', 1],
    ['an unknown directive', '%FOO bar\n---\nversion: 1\nroutes: []\n', 1],
    ['a directive after a byte order mark', '\ufeff%YAML 1.2\n---\nversion: 1\nroutes: []\n', 1],
    ['a directive after the document', 'version: 1\nroutes: []\n...\n%YAML 1.1\n', 4],
    ['!!float on the version', 'version: !!float 1\nroutes: []\n', 1],
    ['!!str on a value', 'version: 1\nroutes:\n  - path: !!str /a\n    public: true\n', 3],
    ['!!bool on a value', 'version: 1\nroutes:\n  - path: /a\n    public: !!bool true\n', 4],
    ['the non-specific tag', 'version: 1\nroutes:\n  - path: ! /a\n    public: true\n', 3],
    ['a verbatim tag', 'version: !<tag:yaml.org,2002:int> 1\nroutes: []\n', 1],
    ['a custom tag', 'version: 1\nroutes:\n  - path: !route /a\n    public: true\n', 3],
    ['a tag on a key', 'version: 1\n!!str routes: []\n', 2],
    ['a tag on a collection', 'version: 1\nroutes: !!seq []\n', 2],
    ['a tag on the document', '--- !!map\nversion: 1\nroutes: []\n', 1],
  ])('refused: %s', (_name, text, line) => {
    expect(parseWellFormed('t.yaml', text)).toBeNull();
    const read = parsePolicyFile('t.yaml', text);
    expect(read.document).toBeNull();
    expect(read.issues).toContainEqual(expect.objectContaining({ severity: 'error', kind: 'parse', source: { file: 't.yaml', line } }));
    expect(read.issues).toEqual(parseWithDocument('t.yaml', text).issues);
  });

  it('refuse, whichever reader a file goes to, what would be read two ways: generated files with a CR, a directive or a tag', () => {
    let accepted = 0;
    const hazard = fc.constantFrom(
      '\r', '\r\n', '\n', '\u0085', '\u2028', '\u2029', '\u001b', '\u202e', '\t', ' ',
      '%YAML 1.1\n---\n', '\n%YAML 1.1\n', '%TAG !! tag:e,1:\n---\n', '!!str ', '!!float ', '!!int ', '!!bool ', '! ', '!e ',
    );
    fc.assert(
      fc.property(tree, fc.boolean(), fc.array(fc.tuple(fc.nat(), hazard), { minLength: 1, maxLength: 3 }), fc.boolean(), (root, useBlock, inserts, withAlias) => {
        let text = generatedFile(root, useBlock);
        for (const [at, piece] of inserts) {
          const where = at % (text.length + 1);
          text = text.slice(0, where) + piece + text.slice(where);
        }
        // An alias sends the whole file to the thorough reader: the rest of it must not change meaning for that.
        if (withAlias) text += 'x: &a 1\ny: *a\n';
        const thorough = parseWithDocument('g.yaml', text);
        const fast = parseWellFormed('g.yaml', text);
        if (fast !== null) expectSameReading(fast, thorough, parseWithDocumentValue(text));
        expect(parsePolicyFile('g.yaml', text).issues).toEqual((fast ?? thorough).issues);
        if (thorough.issues.some((issue) => issue.severity === 'error' && issue.kind === 'parse')) return true;
        accepted += 1;
        // Text that gets past the reading means to the gateway what it shows in an editor that ends a line at
        // every line separator.
        expect(parseWithDocumentValue(text.replace(/\r\n?|[\u0085\u2028\u2029]/g, '\n'))).toEqual(parseWithDocumentValue(text));
        return true;
      }),
      { numRuns: 1000 },
    );
    expect(accepted).toBeGreaterThan(30);
  });

  it('agree on generated policy files', () => {
    let fastReads = 0;
    fc.assert(
      fc.property(tree, fc.boolean(), (root, useBlock) => {
        const text = generatedFile(root, useBlock);
        const thorough = parseWithDocument('g.yaml', text);
        const fast = parseWellFormed('g.yaml', text);
        // Falling back is always safe (the thorough reader decides); most generated files must not need it.
        if (fast === null) return true;
        fastReads += 1;
        expectSameReading(fast, thorough, parseWithDocumentValue(text));
        return true;
      }),
      { numRuns: 1000 },
    );
    expect(fastReads).toBeGreaterThan(500);
  });
});

/** The value the thorough reader sees, also when the schema rejects it (its `document` is then null). */
function parseWithDocumentValue(text: string): unknown {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { parse } = require('yaml') as typeof import('yaml');
  return parse(text);
}

