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

  it('agree on generated policy files', () => {
    let fastReads = 0;
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
    fc.assert(
      fc.property(tree, fc.boolean(), (root, useBlock) => {
        const text = `version: 1\nroutes:${useBlock ? block(root, '  ') : ` ${flow(root)}`}\n`;
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
