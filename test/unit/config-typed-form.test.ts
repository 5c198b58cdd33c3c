import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { AUTHENTICATORS } from '../../src/auth/authenticators';
import { listConfigKeys, loadConfig, parseByteSize, parseDuration, type GatewayConfig } from '../../src/config';
import { configSchema } from '../../src/config/config-schema';
import { typedKeys, type TypedKey } from '../../src/config/key-forms';

let workDir: string;
beforeAll(() => {
  workDir = mkdtempSync(path.join(tmpdir(), 'iam-config-typed-'));
});
afterAll(() => rmSync(workDir, { recursive: true, force: true }));

/** The nullable paths set, so that their conversion runs too (their default is null). */
const SET_PATHS = {
  'iam.provision.file': 'provision.yaml',
  'iam.policy.candidate-dir': 'candidate-policies',
  'iam.forward.assertion.key-file': 'keys/assertion.pem',
  'iam.ui.templates-dir': 'templates',
} as const;

function loadWithPathsSet(): GatewayConfig {
  const file = path.join(workDir, 'config.yaml');
  writeFileSync(
    file,
    [
      'iam:',
      '  provision:',
      `    file: ${SET_PATHS['iam.provision.file']}`,
      '  policy:',
      `    candidate-dir: ${SET_PATHS['iam.policy.candidate-dir']}`,
      '  forward:',
      '    assertion:',
      `      key-file: ${SET_PATHS['iam.forward.assertion.key-file']}`,
      '  ui:',
      `    templates-dir: ${SET_PATHS['iam.ui.templates-dir']}`,
      '',
    ].join('\n'),
  );
  return loadConfig({ file, env: {}, cwd: workDir });
}

/** The value a key is written with here: the one set above, else its default (a section: its keys' defaults). */
function writtenValue(key: string): unknown {
  if (key in SET_PATHS) return SET_PATHS[key as keyof typeof SET_PATHS];
  const leaves = listConfigKeys().filter((leaf) => leaf.key === key || leaf.key.startsWith(`${key}.`));
  if (leaves.length === 1 && leaves[0].key === key) return leaves[0].schema.default;
  return Object.fromEntries(leaves.map((leaf) => [leaf.key.slice(key.length + 1), leaf.schema.default]));
}

const at = (config: unknown, typedPath: string[]): unknown => typedPath.reduce<unknown>((node, name) => (node as Record<string, unknown> | undefined)?.[name], config);

describe('the typed form of the configuration (GatewayConfig) is read off the schema', () => {
  const keys = typedKeys(configSchema);

  it('every key of the schema has a typed form: no leaf is left without one', () => {
    const covered = (key: string): boolean => keys.some((typed) => key === typed.key || key.startsWith(`${typed.key}.`));
    expect(listConfigKeys().filter(({ key }) => !covered(key)).map(({ key }) => key)).toEqual([]);
  });

  it('every key reaches GatewayConfig under its typed name, converted as it declares', () => {
    const config = loadWithPathsSet();
    const expected = (typed: TypedKey): unknown => {
      const written = writtenValue(typed.key);
      if (written === null) return null;
      switch (typed.conversion) {
        case 'milliseconds':
          return parseDuration(written as string | number, typed.key);
        case 'bytes':
          return parseByteSize(written as string | number, typed.key);
        case 'path':
          return path.resolve(workDir, written as string);
        case 'as-written':
          return written;
        default:
          return typed.conversion(written as never, typed.key, { cwd: workDir, authenticators: AUTHENTICATORS });
      }
    };
    const mismatches = keys
      .map((typed) => ({ key: typed.key, typedPath: typed.typedPath.join('.'), actual: at(config, typed.typedPath), expected: expected(typed) }))
      .filter(({ actual, expected: wanted }) => actual === undefined || JSON.stringify(actual) !== JSON.stringify(wanted));
    expect(mismatches).toEqual([]);
    // The named conversions are what they say (a path is absolute, a duration a number of milliseconds).
    expect(config.iam.provision.file).toBe(path.join(workDir, 'provision.yaml'));
    expect(config.iam.token.ttlMs).toBe(8 * 3_600_000);
    expect(config.server.maxHeaderSize).toBe(16 * 1024);
  });

  it('GatewayConfig holds nothing but the keys of the schema (and where it came from), each under one name', () => {
    const config = loadWithPathsSet();
    const declared = new Map(keys.map((typed) => [typed.typedPath.join('.'), typed.key]));
    expect(declared.size).toBe(keys.length); // no two keys claim one typed name
    const undeclared: string[] = [];
    const walk = (node: Record<string, unknown>, prefix: string[]): void => {
      for (const [name, value] of Object.entries(node)) {
        const typedPath = [...prefix, name];
        if (declared.has(typedPath.join('.'))) continue;
        if (typeof value === 'object' && value !== null && !Array.isArray(value)) walk(value as Record<string, unknown>, typedPath);
        else undeclared.push(typedPath.join('.'));
      }
    };
    const { source: _source, warnings: _warnings, ...typed } = config;
    walk(typed, []);
    expect(undeclared).toEqual([]);
  });

  it('refuses a leaf of the schema that declares no typed form', () => {
    const schema = { type: 'object', properties: { server: { type: 'object', properties: { port: { type: 'integer', default: 1, description: 'x' } } } } };
    expect(() => typedKeys(schema)).toThrow('server.port declares no typed form');
  });

  it('has no typed property for a name the schema does not declare (checked by the compiler)', () => {
    const config = loadWithPathsSet();
    // @ts-expect-error `iam.token.ttl` is a duration: its typed name is `ttlMs`, and no other exists.
    expect(config.iam.token.ttl).toBeUndefined();
    // @ts-expect-error `iam.access-log` is declared as `accessLog.mode`.
    expect(config.iam.accessLogMode).toBeUndefined();
  });
});
