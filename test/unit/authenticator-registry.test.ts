/**
 * The authenticator registry (src/auth/authenticators/registry.ts): a login method is one file and one line, and the
 * configuration's schema and checks, the key list (with its environment names), the typed configuration and the
 * start's preflight learn it from the registry.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { preflight } from '../../src/app/preflight';
import {
  AUTHENTICATORS,
  authenticatorKeys,
  createAuthenticator,
  defineAuthenticator,
  type AuthenticatorRegistry,
  type AuthenticatorType,
} from '../../src/auth/authenticators';
import { ConfigError, listConfigKeys, loadConfig, renderConfigReference, type GatewayConfig } from '../../src/config';
import { configSchema } from '../../src/config/config-schema';
import { FAKE_AUTHENTICATOR } from '../fixtures/authenticators/realm-authenticator';

const WITH_FAKE: AuthenticatorRegistry = [...AUTHENTICATORS, FAKE_AUTHENTICATOR];

let workDir: string;
let fileCount = 0;
beforeAll(() => {
  workDir = mkdtempSync(path.join(tmpdir(), 'iam-authenticator-registry-'));
});
afterAll(() => rmSync(workDir, { recursive: true, force: true }));

function load(yaml: string, env: NodeJS.ProcessEnv = {}, authenticators: AuthenticatorRegistry = WITH_FAKE): GatewayConfig {
  const file = path.join(workDir, `config-${++fileCount}.yaml`);
  writeFileSync(file, yaml);
  return loadConfig({ file, env, cwd: workDir, authenticators });
}

function loadError(yaml: string, env: NodeJS.ProcessEnv = {}, authenticators: AuthenticatorRegistry = WITH_FAKE): ConfigError {
  try {
    load(yaml, env, authenticators);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

const FAKE_YAML = 'iam:\n  authenticator:\n    type: fake\n    realm: corp\n';

describe('the built-in registry', () => {
  it('holds every built-in login method once, one per file of src/auth/authenticators/', () => {
    const types = AUTHENTICATORS.map(({ type }) => type);
    expect([...types].sort()).toEqual(['http', 'module', 'none', 'oidc', 'users-file']);
    expect(new Set(types).size).toBe(types.length);
    const support = new Set(['authenticator-registration.ts', 'create-authenticator.ts', 'index.ts', 'registry.ts', 'registry-keys.ts', 'timeout-key.ts']);
    const files = readdirSync(path.resolve(__dirname, '../../src/auth/authenticators')).filter((file) => !support.has(file));
    expect(files.map((file) => file.replace(/\.ts$/, '')).sort()).toEqual([...types].sort());
    // The type union is the registry's: a type it does not list does not compile.
    // @ts-expect-error -- not a registered type
    const unknown: AuthenticatorType = 'ldap';
    expect(types).not.toContain(unknown);
  });

  it("is the schema's iam.authenticator.type enum, and none is the default", () => {
    const type = configSchema.properties.iam.properties.authenticator.properties.type as { enum: string[]; default: string };
    expect(type.enum).toEqual(AUTHENTICATORS.map(({ type: name }) => name));
    expect(type.default).toBe('none');
  });

  it('gives every key of iam.authenticator once: the keys of one method, then the shared ones', () => {
    expect(authenticatorKeys().map(({ name, types }) => [name, types])).toEqual([
      ['path', ['users-file']],
      ['url', ['http']],
      ['module', ['module']],
      ['timeout', ['http', 'module']],
    ]);
    const listed = listConfigKeys().filter(({ key }) => key.startsWith('iam.authenticator.'));
    expect(listed.map(({ key }) => key)).toEqual(['type', 'path', 'url', 'module', 'timeout'].map((name) => `iam.authenticator.${name}`));
  });

  it('refuses an inconsistent registry: a type twice, one key declared two ways, a load-error key it does not have', () => {
    expect(() => authenticatorKeys([...WITH_FAKE, FAKE_AUTHENTICATOR])).toThrow('type "fake" is registered twice');
    const otherTimeout = defineAuthenticator({
      type: 'slow',
      keys: { timeout: { schema: { type: ['string', 'integer'], format: 'duration', minimum: 0, default: '1m', description: 'x' }, required: false, form: 'duration' } },
      keyForLoadErrors: null,
      create: () => ({ type: 'slow', authenticate: () => Promise.resolve({ kind: 'rejected', reason: 'invalid-credentials' }) }),
    });
    expect(() => authenticatorKeys([...AUTHENTICATORS, otherTimeout])).toThrow('"http" and "slow" declare iam.authenticator.timeout differently');
    const noSuchKey = { ...FAKE_AUTHENTICATOR, type: 'other', keyForLoadErrors: 'domain' } as unknown as (typeof WITH_FAKE)[number];
    expect(() => authenticatorKeys([...AUTHENTICATORS, noSuchKey])).toThrow('names iam.authenticator.domain for load errors but has no such key');
  });
});

describe('a login method added by one line: [...AUTHENTICATORS, fake]', () => {
  it('(a) the configuration accepts type fake with its key, and refuses it without, naming the key', () => {
    expect(load(FAKE_YAML).iam.authenticator).toEqual({ type: 'fake', realm: 'corp', path: null, url: null, module: null, timeoutMs: 5000 });
    const missing = loadError('iam:\n  authenticator:\n    type: fake\n');
    expect(missing.problems.map(({ key }) => key)).toEqual(['iam.authenticator.realm']);
    expect(missing.message).toContain('iam.authenticator.realm is required when iam.authenticator.type is "fake"');
    // The built-in registry knows neither the type nor its key.
    const builtIn = loadError(FAKE_YAML, {}, AUTHENTICATORS);
    expect(builtIn.message).toMatch(/"fake" is not one of none, users-file, http, module, oidc/);
    expect(builtIn.message).toContain('unknown key "iam.authenticator.realm"');
  });

  it('(b) lists its key with its description and environment name, and the environment sets it', () => {
    const realm = listConfigKeys(WITH_FAKE).find(({ key }) => key === 'iam.authenticator.realm');
    expect(realm).toEqual(expect.objectContaining({ env: 'IAM_AUTHENTICATOR_REALM' }));
    expect(realm?.schema.description).toBe('the realm whose users the fake authenticator accepts (type fake)');
    expect(listConfigKeys(WITH_FAKE).find(({ key }) => key === 'iam.authenticator.type')?.schema.description).toMatch(/\| oidc \(an OpenID Provider, .*\) \| fake$/);
    expect(listConfigKeys().map(({ key }) => key)).not.toContain('iam.authenticator.realm');
    // The generated configuration reference (docs/configuration.md, npm run docs:config) gets its row.
    expect(renderConfigReference(listConfigKeys(WITH_FAKE))).toContain(
      '| `iam.authenticator.realm` | `IAM_AUTHENTICATOR_REALM` | `null` | the realm whose users the fake authenticator accepts (type fake) |',
    );
    expect(renderConfigReference()).not.toContain('iam.authenticator.realm');

    const env = { IAM_AUTHENTICATOR_TYPE: 'fake', IAM_AUTHENTICATOR_REALM: 'from-env' };
    const config = load('', env);
    expect(config.iam.authenticator).toMatchObject({ type: 'fake', realm: 'from-env' });
    expect(config.warnings).toEqual([]);
    // The built-in registry refuses the type, and warns about a variable that none of its keys reads.
    expect(loadError('', env, AUTHENTICATORS).message).toContain('"fake" is not one of');
    expect(load('', { IAM_AUTHENTICATOR_REALM: 'x' }, AUTHENTICATORS).warnings).toEqual(['unknown environment variable IAM_AUTHENTICATOR_REALM']);
  });

  it('(c) preflight builds it, and names its key when it cannot be created', async () => {
    const built = preflight(load(FAKE_YAML), WITH_FAKE);
    expect(built.authenticator.type).toBe('fake');
    await expect(built.authenticator.authenticate({ username: 'ada', password: 'x', clientType: 'WEB' })).resolves.toEqual({
      kind: 'accepted',
      identity: { userId: 'ada', identityId: 'corp:ada', identityDomain: 'corp' },
    });

    let failure: unknown;
    try {
      preflight(load('', { IAM_AUTHENTICATOR_TYPE: 'fake', IAM_AUTHENTICATOR_REALM: 'unreachable' }), WITH_FAKE);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(ConfigError);
    expect((failure as ConfigError).problems).toEqual([
      { key: 'iam.authenticator.realm', env: 'IAM_AUTHENTICATOR_REALM', message: 'iam.authenticator.realm: cannot load the fake authenticator: realm unreachable did not answer' },
    ]);
  });

  it('(c) createAuthenticator creates any registered type, and refuses one whose required key is unset', () => {
    expect(createAuthenticator({ type: 'fake', realm: 'corp' } as { type: string }, {}, WITH_FAKE).type).toBe('fake');
    expect(() => createAuthenticator({ type: 'fake', realm: null } as { type: string }, {}, WITH_FAKE)).toThrow('iam.authenticator.realm is required for type fake');
    expect(() => createAuthenticator({ type: 'fake' }, {}, AUTHENTICATORS)).toThrow('no login method "fake"');
    expect(() => createAuthenticator({ type: 'users-file', path: null } as { type: string })).toThrow('iam.authenticator.path is required for type users-file');
  });
});
