import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseDocument } from 'yaml';
import { CONFIG_REFERENCE_BEGIN, CONFIG_REFERENCE_END, ConfigError, listConfigKeys, loadConfig, parseByteSize, parseDuration, renderConfigReference, type ConfigKey, type GatewayConfig } from '../../src/config';
import { closestName, editDistance, unknownEnvironmentWarnings } from '../../src/config/unknown-environment';

const repoRoot = path.resolve(__dirname, '../..');
const defaultFile = path.join(repoRoot, 'config/default.yaml');
let workDir: string;
let fileCount = 0;

beforeAll(() => {
  workDir = mkdtempSync(path.join(tmpdir(), 'iam-config-test-'));
});
afterAll(() => rmSync(workDir, { recursive: true, force: true }));

/** Writes `yaml` to a fresh file under the temp dir and loads it with an empty environment by default. */
function load(yaml: string, env: NodeJS.ProcessEnv = {}, cwd = workDir): GatewayConfig {
  const file = path.join(workDir, `config-${++fileCount}.yaml`);
  writeFileSync(file, yaml);
  return loadConfig({ file, env, cwd });
}

function loadError(yaml: string, env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    load(yaml, env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

const withoutSource = ({ source: _source, ...rest }: GatewayConfig): Omit<GatewayConfig, 'source'> => rest;

describe('loadConfig defaults', () => {
  it('reads config/default.yaml into the GatewayConfig shape', () => {
    // The process environment is ignored on purpose: jest's global setup may set DATABASE_URL/REDIS_URL.
    const config = loadConfig({ file: defaultFile, env: {}, cwd: repoRoot });
    const expected: GatewayConfig = {
      server: {
        port: 8080,
        managementPort: 9090,
        host: '0.0.0.0',
        managementHost: '127.0.0.1',
        requestTimeoutMs: 30_000,
        headersTimeoutMs: 10_000,
        keepAliveTimeoutMs: 5_000,
        maxHeaderSize: 16 * 1024,
        maxUrlLength: 8 * 1024,
        iamBodyLimit: 64 * 1024,
        shutdownTimeoutMs: 10_000,
        workers: 1,
      },
      upstream: {
        url: 'http://127.0.0.1:3000',
        connectTimeoutMs: 5_000,
        responseTimeoutMs: 30_000,
        bodyTimeoutMs: 30_000,
        connections: 128,
        websocketIdleTimeoutMs: 300_000,
        websocketRecheckIntervalMs: 30_000,
        filterMaxBytes: 8 * 1024 * 1024,
      },
      database: { url: null, embeddedDir: path.join(repoRoot, '.data/pglite'), poolSize: 10, connectTimeoutMs: 3000, queryTimeoutMs: 5000, idleTimeoutMs: 30_000 },
      redis: { url: null, waitReplicas: 1, waitTimeoutMs: 500 },
      log: { level: 'info' },
      iam: {
        enabled: true,
        token: { storePrefix: 'iam', ttlMs: 8 * 3_600_000, idleTimeoutMs: 0, maxSessionsPerUser: 50, cache: { enabled: true, maxEntries: 10_000, revalidateMs: 2000 } },
        schema: { historyTable: 'iam_mikro_orm_schema_history' },
        clientTypes: ['WEB', 'MOBILE', 'DESKTOP', 'API'],
        login: { rateLimit: { maxFailures: 10, maxFailuresPerAddress: 100, windowMs: 15 * 60_000 }, maxPendingVerifications: 64 },
        authenticator: {
          type: 'none',
          path: null,
          url: null,
          module: null,
          timeoutMs: 5_000,
        },
        provision: { file: null },
        policy: { dir: path.join(repoRoot, 'policies'), candidateDir: null, pollIntervalMs: 5_000, debounceMs: 200 },
        changes: { pollIntervalMs: 5_000 },
        authz: {
          abilityCacheSize: 10_000,
          abilityCacheBytes: 64 * 1024 * 1024,
          resolverTimeoutMs: 2_000,
          callerResolutions: { perCall: 20, inFlightPerCaller: 32, connections: 64 },
        },
        gateway: { allowPathParameters: false },
        forward: { trustedProxies: [], assertion: { enabled: false, ttlMs: 60_000, issuer: 'iam-gateway', audience: null, keyFile: null } },
        sessionCookie: { secure: true, trustedOrigins: [] },
        ui: { title: 'iam-gateway', logoUrl: null, templatesDir: null },
        accessLog: { mode: 'denied', sample: 1 },
        oidc: {
          issuer: null,
          clientId: null,
          clientSecret: null,
          redirectUri: null,
          postLogoutRedirectUri: null,
          scopes: ['openid', 'profile', 'email'],
          claims: { userId: 'sub', identityDomain: null, profile: null },
          users: 'jit',
          linkBy: 'none',
          allowed: [],
          profiles: [],
          acceptAccessTokens: false,
          audience: null,
          accessTokenTypes: ['at+jwt', 'application/at+jwt'],
          algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
          clockToleranceMs: 30_000,
          revocationMarginMs: 0,
          timeoutMs: 5_000,
        },
        cors: {
          enabled: false,
          origins: [],
          methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
          headers: ['Authorization', 'Content-Type'],
          maxAgeSeconds: 600,
          credentials: false,
        },
        audit: { flushIntervalMs: 1_000, spoolDir: path.join(repoRoot, '.data/audit-spool'), spoolMaxBytes: 1024 ** 3, retentionMs: 0, anonymousDenialsPerMinute: 60 },
      },
      source: { file: defaultFile, directory: path.dirname(defaultFile), packagedPolicy: false },
      warnings: [],
    };
    expect(config).toEqual(expected);
  });

  it('gives the same configuration for an empty file, a comment-only file and empty sections', () => {
    const documented = withoutSource(loadConfig({ file: defaultFile, env: {}, cwd: workDir }));
    expect(withoutSource(load(''))).toEqual(documented);
    expect(withoutSource(load('# nothing set\n'))).toEqual(documented);
    expect(withoutSource(load('server:\niam:\n  token:\n'))).toEqual(documented);
  });

  it('documents every key in config/default.yaml, and every key has its own environment name', () => {
    const leaves: string[] = [];
    const walk = (node: unknown, prefix: string): void => {
      if (typeof node === 'object' && node !== null && !Array.isArray(node)) {
        for (const [name, child] of Object.entries(node)) walk(child, prefix === '' ? name : `${prefix}.${name}`);
      } else leaves.push(prefix);
    };
    walk(parseDocument(readFileSync(defaultFile, 'utf8')).toJS(), '');
    const keys = listConfigKeys();
    expect(leaves.sort()).toEqual(keys.map(({ key }) => key).sort());
    const names = keys.flatMap(({ env, alias }) => (alias === undefined ? [env] : [env, alias]));
    expect(new Set(names).size).toBe(names.length);
    expect(keys.find(({ key }) => key === 'iam.token.store-prefix')?.env).toBe('IAM_TOKEN_STORE_PREFIX');
  });

  it('writes every key of config/default.yaml with its schema default, as the schema writes it (`30s`, `0`, `null`, lists)', () => {
    const file = parseDocument(readFileSync(defaultFile, 'utf8')).toJS() as Record<string, unknown>;
    const valueAt = (key: string): unknown => key.split('.').reduce<unknown>((node, name) => (node as Record<string, unknown> | undefined)?.[name], file);
    const keys = listConfigKeys();
    expect(keys.map(({ key }) => ({ key, value: valueAt(key) }))).toEqual(keys.map(({ key, schema }) => ({ key, value: schema.default })));
  });

  it('selects the file from IAM_CONFIG, else config/default.yaml under cwd', () => {
    const file = path.join(workDir, 'from-env.yaml');
    writeFileSync(file, 'server:\n  port: 1234\n');
    expect(loadConfig({ env: { IAM_CONFIG: file }, cwd: workDir }).server.port).toBe(1234);
    const fromCwd = loadConfig({ env: {}, cwd: repoRoot });
    expect(fromCwd.source).toEqual({ file: defaultFile, directory: path.join(repoRoot, 'config'), packagedPolicy: false });
  });

  it('refuses a missing file instead of silently using defaults', () => {
    expect(() => loadConfig({ file: path.join(workDir, 'absent.yaml'), env: {} })).toThrow(/cannot read the configuration file \(ENOENT\)/);
  });

  it('without IAM_CONFIG and without config/default.yaml under cwd: the package\'s own config/default.yaml, paths still from cwd', () => {
    const elsewhere = mkdtempSync(path.join(workDir, 'elsewhere-'));
    const config = loadConfig({ env: {}, cwd: elsewhere });
    expect(config.source).toEqual({ file: defaultFile, directory: path.join(repoRoot, 'config'), packagedPolicy: false });
    expect(config.iam.policy.dir).toBe(path.join(elsewhere, 'policies'));
    expect(withoutSource(config)).toEqual(withoutSource(loadConfig({ file: defaultFile, env: {}, cwd: elsewhere })));
  });

  it('packagedPolicy (serve): the package\'s policies/ only under its own file, without IAM_POLICIES_DIR and without policies/ under cwd', () => {
    const elsewhere = mkdtempSync(path.join(workDir, 'no-policies-'));
    const packaged = loadConfig({ env: {}, cwd: elsewhere, packagedPolicy: true });
    expect(packaged.iam.policy.dir).toBe(path.join(repoRoot, 'policies'));
    expect(packaged.source.packagedPolicy).toBe(true);
    // Named by the environment, or by a file of the operator's: the missing directory stays what it is.
    expect(loadConfig({ env: { IAM_POLICIES_DIR: 'policies' }, cwd: elsewhere, packagedPolicy: true }).iam.policy.dir).toBe(path.join(elsewhere, 'policies'));
    const own = path.join(elsewhere, 'own.yaml');
    writeFileSync(own, 'iam:\n  policy:\n    dir: policies\n');
    expect(loadConfig({ env: { IAM_CONFIG: own }, cwd: elsewhere, packagedPolicy: true }).source.packagedPolicy).toBe(false);
    // A policies/ directory of its own wins.
    mkdirSync(path.join(elsewhere, 'policies'));
    expect(loadConfig({ env: {}, cwd: elsewhere, packagedPolicy: true }).iam.policy.dir).toBe(path.join(elsewhere, 'policies'));
    // Without the option (policy check and the other tools) nothing falls back.
    rmSync(path.join(elsewhere, 'policies'), { recursive: true });
    expect(loadConfig({ env: {}, cwd: elsewhere }).source.packagedPolicy).toBe(false);
  });

  it('a file IAM_CONFIG names that is missing fails naming the variable and the file, with no fall back', () => {
    const elsewhere = mkdtempSync(path.join(workDir, 'elsewhere-'));
    const failure = (): unknown => loadConfig({ env: { IAM_CONFIG: 'absent.yaml' }, cwd: elsewhere });
    expect(failure).toThrow(ConfigError);
    expect(failure).toThrow('config: cannot read the configuration file absent.yaml (ENOENT) (environment variable IAM_CONFIG)');
    expect(() => loadConfig({ env: { IAM_CONFIG: path.join(elsewhere, 'absent.yaml') }, cwd: repoRoot })).toThrow(/absent\.yaml \(ENOENT\) \(environment variable IAM_CONFIG\)/);
  });
});

describe('loadConfig rejects what it does not understand', () => {
  it.each([
    ['top level', 'servr:\n  port: 1\n', 'servr', /unknown key "servr" in .*config-\d+\.yaml:1 \(did you mean "server"\?\)/],
    ['nested', 'iam:\n  token:\n    ttl: 1h\n  tokn:\n    ttl: 1h\n', 'iam.tokn', /unknown key "iam\.tokn" .*:4 \(did you mean "iam\.token"\?\)/],
    ['camelCase', 'iam:\n  token:\n    storePrefix: x\n', 'iam.token.storePrefix', /did you mean "iam\.token\.store-prefix"/],
  ])('an unknown key (%s)', (_case, yaml, key, message) => {
    const error = loadError(yaml);
    expect(error.key).toBe(key);
    expect(error.message).toMatch(message);
  });

  it.each([
    ['a bad duration', 'iam:\n  token:\n    ttl: 8x\n', 'iam.token.ttl', /iam\.token\.ttl: "8x" is not a duration above zero/],
    ['a zero ttl', 'iam:\n  token:\n    ttl: 0\n', 'iam.token.ttl', /is not a duration above zero/],
    ['a negative timeout', 'server:\n  request-timeout: -5\n', 'server.request-timeout', /-5 is not a duration/],
    ['a bad size', 'server:\n  max-header-size: 16kx\n', 'server.max-header-size', /"16kx" is not a size/],
    ['port 70000', 'server:\n  port: 70000\n', 'server.port', /server\.port: 70000 must be <= 65535/],
    ['a port as text', 'server:\n  port: eighty\n', 'server.port', /expected an integer, got "eighty"/],
    ['a lower-case client type', 'iam:\n  client-types: [WEB, web]\n', 'iam.client-types[1]', /"web" is not an upper-case identifier/],
    ['no client types', 'iam:\n  client-types: []\n', 'iam.client-types', /at least 1/],
    ['a duplicate client type', 'iam:\n  client-types: [WEB, WEB]\n', 'iam.client-types', /lists "WEB" twice/],
    ['a bad trusted proxy CIDR', 'iam:\n  forward:\n    trusted-proxies: [10.0.0.0/8, 10.0.0.0/33]\n', 'iam.forward.trusted-proxies[1]', /"10\.0\.0\.0\/33" is not an IP address or CIDR range/],
    ['a trusted proxy host name', 'iam:\n  forward:\n    trusted-proxies: [proxy.local]\n', 'iam.forward.trusted-proxies[0]', /not an IP address/],
    ['a glob in the store prefix', 'iam:\n  token:\n    store-prefix: "iam*"\n', 'iam.token.store-prefix', /no glob characters/],
    ['a bad history table', 'iam:\n  schema:\n    history-table: "x; drop table y"\n', 'iam.schema.history-table', /not an SQL identifier/],
    ['a bad authenticator type', 'iam:\n  authenticator:\n    type: ldap\n', 'iam.authenticator.type', /"ldap" is not one of none, users-file, http, module/],
    ['users-file without path', 'iam:\n  authenticator:\n    type: users-file\n', 'iam.authenticator.path', /iam\.authenticator\.path is required when iam\.authenticator\.type is "users-file"/],
    ['http without url', 'iam:\n  authenticator:\n    type: http\n', 'iam.authenticator.url', /url is required when .*"http" in .*:3$/],
    ['a non-http upstream', 'upstream:\n  url: ftp://host\n', 'upstream.url', /"ftp:\/\/host" is not an http:\/\/ or https:\/\/ URL/],
    ['a bad log level', 'log:\n  level: verbose\n', 'log.level', /"verbose" is not one of fatal, error/],
    ['a boolean as text', 'iam:\n  enabled: "no"\n', 'iam.enabled', /expected true or false, got "no"/],
    ['a section as a scalar', 'server: 5\n', 'server', /server: expected a mapping of keys, got 5/],
    ['the same port twice', 'server:\n  port: 9000\n  management-port: 9000\n', 'server.management-port', /must differ from server\.port/],
    ['any origin with credentials', 'iam:\n  cors:\n    origins: ["*"]\n    credentials: true\n', 'iam.cors.origins', /cannot be combined/],
    ['an origin with a path', 'iam:\n  cors:\n    origins: [https://a.example/x]\n', 'iam.cors.origins[0]', /is not an origin/],
  ])('%s, naming the key', (_case, yaml, key, message) => {
    const error = loadError(yaml);
    expect(error.key).toBe(key);
    expect(error.problems).toHaveLength(1);
    expect(error.message).toMatch(message);
  });

  it('reports every problem at once, each with its key and line', () => {
    const error = loadError(
      ['server:', '  port: 70000', 'iam:', '  tokn: {}', '  token:', '    ttl: 8x', '  client-types: [web]', '  authenticator:', '    type: users-file'].join('\n'),
    );
    expect(error.problems.map(({ key, line }) => [key, line])).toEqual(
      expect.arrayContaining([
        ['server.port', 2],
        ['iam.tokn', 4],
        ['iam.token.ttl', 6],
        ['iam.client-types[0]', 7],
        ['iam.authenticator.path', 9],
      ]),
    );
    expect(error.problems).toHaveLength(5);
    expect(error.message).toMatch(/^config: 5 problems:\n {2}- /);
  });

  it('reports YAML syntax errors and duplicate keys with their line', () => {
    const syntax = loadError('server:\n  port: [1\nlog: {}\n');
    expect(syntax.key).toBe('');
    expect(syntax.problems[0].line).toBeGreaterThanOrEqual(2);
    expect(syntax.message).toMatch(/^config: YAML: .* in config-\d+\.yaml:\d+$/);
    const duplicate = loadError('server:\n  port: 1\n  port: 2\n');
    expect(duplicate.problems[0]).toMatchObject({ line: 3 });
    expect(duplicate.message).toMatch(/unique/);
    expect(loadError('- a\n- b\n').message).toMatch(/must be a mapping/);
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]', 'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]'];
    bomb.push('c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]', 'd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]');
    expect(loadError(bomb.join('\n')).message).toMatch(/YAML: .*alias/i);
  });

  it('iam.oidc: the provider and client are required for the oidc authenticator, and checked', () => {
    const missing = loadError('iam:\n  authenticator:\n    type: oidc\n');
    expect(missing.problems.map(({ key }) => key).sort()).toEqual(['iam.oidc.client-id', 'iam.oidc.client-secret', 'iam.oidc.issuer', 'iam.oidc.redirect-uri']);
    expect(missing.message).toMatch(/iam\.oidc\.issuer is required when iam\.authenticator\.type is "oidc"/);
    expect(loadError('iam:\n  oidc:\n    accept-access-tokens: true\n    audience: https://api.example\n').problems.map(({ key }) => key)).toEqual(['iam.oidc.issuer']);
    const base = { IAM_AUTHENTICATOR_TYPE: 'oidc', IAM_OIDC_CLIENT_ID: 'gw', IAM_OIDC_CLIENT_SECRET: 'very-secret', IAM_OIDC_REDIRECT_URI: 'https://gw.example/iam/auth/oidc/callback' };
    expect(load('', { ...base, IAM_OIDC_ISSUER: 'https://idp.example/realms/main' }).iam.oidc).toMatchObject({ issuer: 'https://idp.example/realms/main', clientSecret: 'very-secret', users: 'jit' });
    expect(load('', { ...base, IAM_OIDC_ISSUER: 'http://127.0.0.1:8081' }).iam.oidc.issuer).toBe('http://127.0.0.1:8081');
    expect(loadError('', { ...base, IAM_OIDC_ISSUER: 'http://idp.example' }).message).toMatch(/must be https:\/\/ \(plain http only on loopback/);
    expect(loadError('', { ...base, IAM_OIDC_ISSUER: 'https://idp.example', IAM_OIDC_CLOCK_TOLERANCE: '10m' }).message).toMatch(/clock-tolerance: at most 5m/);
    expect(loadError('', { ...base, IAM_OIDC_ISSUER: 'https://idp.example', IAM_OIDC_REVOCATION_MARGIN: '6m' }).message).toMatch(/revocation-margin: at most 5m/);
    expect(load('', { ...base, IAM_OIDC_ISSUER: 'https://idp.example', IAM_OIDC_REVOCATION_MARGIN: '2s' }).iam.oidc.revocationMarginMs).toBe(2_000);
    expect(loadError('', { ...base, IAM_OIDC_ISSUER: 'https://idp.example', IAM_OIDC_ALGORITHMS: 'RS256,HS256' }).message).toMatch(/asymmetric JWS algorithm/);
    expect(loadError('', { ...base, IAM_OIDC_ISSUER: 'https://idp.example', IAM_OIDC_ALGORITHMS: 'none' }).message).toMatch(/asymmetric JWS algorithm/);
    // A secret is never echoed in an error.
    const wrong = loadError('iam:\n  oidc:\n    client-secret: 987654321\n');
    expect(wrong.problems.map(({ key }) => key)).toEqual(['iam.oidc.client-secret']);
    expect(wrong.message).not.toContain('987654321');
  });

  it('iam.oidc accept-access-tokens: refuses to start without an audience of its own (the client id is the aud of ID tokens)', () => {
    const resourceServer = { IAM_OIDC_ISSUER: 'https://idp.example', IAM_OIDC_ACCEPT_ACCESS_TOKENS: 'true', IAM_OIDC_CLIENT_ID: 'gw' };
    const noAudience = loadError('', resourceServer);
    expect(noAudience.problems.map(({ key }) => key)).toEqual(['iam.oidc.audience']);
    expect(noAudience.message).toMatch(/iam\.oidc\.audience is required when iam\.oidc\.accept-access-tokens is true .*iam\.oidc\.client-id/);
    const clientId = loadError('', { ...resourceServer, IAM_OIDC_AUDIENCE: 'gw' });
    expect(clientId.problems.map(({ key }) => key)).toEqual(['iam.oidc.audience']);
    expect(clientId.message).toMatch(/iam\.oidc\.audience: must differ from iam\.oidc\.client-id/);
    expect(load('', { ...resourceServer, IAM_OIDC_AUDIENCE: 'https://api.example' }).iam.oidc).toMatchObject({ audience: 'https://api.example', accessTokenTypes: ['at+jwt', 'application/at+jwt'] });
    // Without accept-access-tokens the audience is not read: no rule.
    expect(load('', { IAM_OIDC_ISSUER: 'https://idp.example', IAM_OIDC_CLIENT_ID: 'gw', IAM_OIDC_AUDIENCE: 'gw' }).iam.oidc.audience).toBe('gw');
  });

  it('iam.oidc access-token-types and link-by: typed values only; never logout+jwt', () => {
    expect(load('', { IAM_OIDC_ACCESS_TOKEN_TYPES: 'JWT, at+jwt' }).iam.oidc.accessTokenTypes).toEqual(['JWT', 'at+jwt']);
    for (const types of ['logout+jwt', 'at+jwt,application/logout+jwt', 'APPLICATION/LOGOUT+JWT', 'at jwt', '[]']) {
      const keys = loadError('', { IAM_OIDC_ACCESS_TOKEN_TYPES: types }).problems.map(({ key }) => key.replace(/\[\d+\]$/, ''));
      expect([types, keys]).toEqual([types, ['iam.oidc.access-token-types']]);
    }
    expect(load('', { IAM_OIDC_LINK_BY: 'verified-email' }).iam.oidc.linkBy).toBe('verified-email');
    expect(loadError('', { IAM_OIDC_LINK_BY: 'email' }).problems.map(({ key }) => key)).toEqual(['iam.oidc.link-by']);
  });

  it('iam.ui: a one-line title; a logo that is an https URL without credentials or a path on the gateway', () => {
    expect(load('', { IAM_UI_TITLE: 'Acme <Portal>', IAM_UI_LOGO_URL: 'https://cdn.example.com/logo.svg' }).iam.ui).toEqual({ title: 'Acme <Portal>', logoUrl: 'https://cdn.example.com/logo.svg', templatesDir: null });
    expect(load('', { IAM_UI_LOGO_URL: '/static/logo.svg' }).iam.ui.logoUrl).toBe('/static/logo.svg');
    for (const logo of ['http://cdn.example.com/logo.svg', 'javascript:alert(1)', 'data:image/svg+xml,<svg/>', '//evil.example/logo.svg', '/\\evil.example/x', 'https://user:pw@cdn.example.com/l.svg', 'logo.svg', '/a b.svg', '/a".svg']) {
      expect([logo, loadError('', { IAM_UI_LOGO_URL: logo }).problems.map(({ key }) => key)]).toEqual([logo, ['iam.ui.logo-url']]);
    }
    for (const title of ['two\nlines', 'x'.repeat(101), '   ']) {
      expect([title, loadError('', { IAM_UI_TITLE: title }).problems.map(({ key }) => key)]).toEqual([title, ['iam.ui.title']]);
    }
  });

  it('never echoes a database or Redis URL, which may carry a password', () => {
    const error = loadError('database:\n  url: "mysql://admin:s3cret@db/iam"\nredis:\n  url: "http://:s3cret@r"\n');
    expect(error.problems.map(({ key }) => key)).toEqual(['database.url', 'redis.url']);
    expect(error.message).not.toContain('s3cret');
  });
});

describe('loadConfig environment overrides', () => {
  it('applies generic and conventional names, coerced to the key type', () => {
    const config = load('redis:\n  url: redis://file-value:6379\n', {
      IAM_TOKEN_STORE_PREFIX: 'tenant-a',
      PORT: '8181',
      REDIS_URL: 'redis://cache:6380/2',
      IAM_ENABLED: 'false',
      IAM_CLIENT_TYPES: 'WEB, API',
      DATABASE_URL: '',
      IAM_TOKEN_TTL: '90m',
      IAM_TOKEN_IDLE_TIMEOUT: '60000',
      IAM_FORWARD_TRUSTED_PROXIES: '["10.0.0.0/8","::1"]',
      IAM_POLICIES_DIR: 'rules',
      IAM_CORS_CREDENTIALS: '1',
    });
    expect(config.iam.token.storePrefix).toBe('tenant-a');
    expect(config.server.port).toBe(8181);
    expect(config.redis.url).toBe('redis://cache:6380/2');
    expect(config.iam.enabled).toBe(false);
    expect(config.iam.clientTypes).toEqual(['WEB', 'API']);
    expect(config.database.url).toBeNull();
    expect(config.iam.token.ttlMs).toBe(90 * 60_000);
    expect(config.iam.token.idleTimeoutMs).toBe(60_000);
    expect(config.iam.forward.trustedProxies).toEqual(['10.0.0.0/8', '::1']);
    expect(config.iam.policy.dir).toBe(path.join(workDir, 'rules'));
    expect(config.iam.cors.credentials).toBe(true);
  });

  it('turns an empty value of a nullable key into null, overriding the file', () => {
    expect(load('database:\n  url: postgres://db/iam\n', { DATABASE_URL: '' }).database.url).toBeNull();
    expect(load('', { DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/test' }).database.url).toBe('postgresql://postgres@127.0.0.1:5432/test');
  });

  it('lets the generic name win over the conventional one', () => {
    const config = load('', { PORT: '1111', SERVER_PORT: '2222', IAM_POLICIES_DIR: 'a', IAM_POLICY_DIR: 'b' });
    expect(config.server.port).toBe(2222);
    expect(config.iam.policy.dir).toBe(path.join(workDir, 'b'));
  });

  it.each([
    [{ PORT: 'eighty' }, 'server.port', 'PORT', /server\.port: expected an integer, got "eighty" \(environment variable PORT\)/],
    [{ IAM_TOKEN_TTL: '8x' }, 'iam.token.ttl', 'IAM_TOKEN_TTL', /"8x" is not a duration.*\(environment variable IAM_TOKEN_TTL\)/],
    [{ IAM_ENABLED: 'yes' }, 'iam.enabled', 'IAM_ENABLED', /expected true or false, got "yes"/],
    [{ IAM_CLIENT_TYPES: '["WEB"' }, 'iam.client-types', 'IAM_CLIENT_TYPES', /is not a JSON array/],
    [{ IAM_CLIENT_TYPES: 'WEB,api' }, 'iam.client-types[1]', 'IAM_CLIENT_TYPES', /iam\.client-types\[1\]: "api" is not an upper-case identifier .*\(environment variable IAM_CLIENT_TYPES\)$/],
    [{ REDIS_URL: 'localhost:6379' }, 'redis.url', 'REDIS_URL', /redis\.url: is not a redis:\/\/ or rediss:\/\/ URL, redis\+cluster:\/\/.* or redis\+sentinel:\/\/.* \(environment variable REDIS_URL\)/],
  ])('refuses %j naming the variable and the key', (env, key, variable, message) => {
    const error = loadError('', env);
    expect(error.key).toBe(key);
    expect(error.problems[0].env).toBe(variable);
    expect(error.message).toMatch(message);
  });

  it('ignores variables that name no key (an IAM_… or SERVER_… one is only warned about)', () => {
    expect(load('', { IAM_TOKN: 'x', HOME: '/root', SERVER: 'x' }).warnings).toEqual(['unknown environment variable IAM_TOKN']);
  });
});

describe('loadConfig warns about IAM_… and SERVER_… variables no key reads', () => {
  it('one warning per unknown name, with the closest known name when close; never the value', () => {
    const config = load('', {
      IAM_POLICY_DIRR: '/secret-value-1',
      SERVER_PROT: 'secret-value-2',
      IAM_TOKEN_TTL: '1h',
      IAM_POLICIES_DIR: '/policies',
      SERVER_WORKERS: '1',
      IAM_CONFIG: path.join(workDir, 'unused.yaml'),
      IAM_SOMETHING_ELSE_ENTIRELY: 'secret-value-3',
      PORT: '1234',
      IAMX: 'x',
      iam_policy_dirr: 'x',
      HOME: '/root',
    });
    expect(config.warnings).toEqual([
      'unknown environment variable IAM_POLICY_DIRR (did you mean IAM_POLICY_DIR?)',
      'unknown environment variable IAM_SOMETHING_ELSE_ENTIRELY',
      'unknown environment variable SERVER_PROT (did you mean SERVER_PORT?)',
    ]);
    expect(config.warnings.join('\n')).not.toMatch(/secret-value/);
    // The known names still apply.
    expect(config.server.port).toBe(1234);
    expect(config.iam.token.ttlMs).toBe(3_600_000);
  });

  it('no warning for any generic or conventional name of a key', () => {
    const env = Object.fromEntries(listConfigKeys().flatMap(({ env: generic, alias }) => [generic, ...(alias === undefined ? [] : [alias])]).map((name) => [name, undefined]));
    expect(unknownEnvironmentWarnings(env, ['IAM_CONFIG'])).toEqual([]);
    expect(unknownEnvironmentWarnings({ IAM_CONFIG: 'x' }, ['IAM_CONFIG'])).toEqual([]);
  });
});

describe('closestName and editDistance', () => {
  const known = ['IAM_POLICY_DIR', 'IAM_POLICIES_DIR', 'SERVER_PORT', 'SERVER_HOST', 'IAM_TOKEN_TTL', 'IAM_ENABLED'];

  it.each([
    ['IAM_POLICY_DIRR', 'IAM_POLICY_DIR'], // one insertion
    ['IAM_POLICY_DR', 'IAM_POLICY_DIR'], // one deletion
    ['IAM_POLICIE_DIR', 'IAM_POLICIES_DIR'],
    ['SERVER_PROT', 'SERVER_PORT'], // two neighbours swapped: one edit
    ['SERVER_HOTS', 'SERVER_HOST'],
    ['IAM_TOKEN_TLL', 'IAM_TOKEN_TTL'],
    ['IAM_ENABELD', 'IAM_ENABLED'],
  ])('%s → %s', (name, expected) => {
    expect(closestName(name, known)).toBe(expected);
  });

  it.each([
    ['IAM_SOMETHING_ELSE_ENTIRELY'], // far from everything
    ['IAM_X'], // short: a third of its length allows 1 edit, and nothing is that close
    ['SERVER_P'], // 3 edits from SERVER_PORT, but more than a third of its length
  ])('%s → no suggestion', (name) => {
    expect(closestName(name, known)).toBeNull();
  });

  it('counts insertions, deletions, replacements and swaps of neighbours', () => {
    expect(editDistance('', '')).toBe(0);
    expect(editDistance('abc', 'abc')).toBe(0);
    expect(editDistance('abc', '')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('ab', 'ba')).toBe(1);
    expect(editDistance('abcd', 'acbd')).toBe(1);
    expect(editDistance('IAM_POLICY_DIR', 'IAM_POLICIES_DIR')).toBe(3);
    // A bound caps the answer (and the work) for distant names.
    expect(editDistance('IAM_SOMETHING_ELSE_ENTIRELY', 'IAM_ENABLED', 4)).toBe(4);
    expect(editDistance('kitten', 'sitting', 10)).toBe(3);
  });
});

describe('loadConfig paths', () => {
  it('resolves relative paths against cwd and keeps absolute paths, memory:// and package names', () => {
    const cwd = path.join(workDir, 'app');
    const yaml = [
      'database:',
      '  embedded-dir: data/pg',
      'iam:',
      '  authenticator:',
      '    type: module',
      '    path: ../users.yaml',
      '    module: ./auth.js',
      '  provision:',
      `    file: ${path.join(workDir, 'abs.yaml')}`,
      '  policy:',
      '    dir: my-policies',
    ].join('\n');
    const config = load(yaml, {}, cwd);
    expect(config.database.embeddedDir).toBe(path.join(cwd, 'data/pg'));
    expect(config.iam.authenticator.path).toBe(path.join(workDir, 'users.yaml'));
    expect(config.iam.authenticator.module).toBe(path.join(cwd, 'auth.js'));
    expect(config.iam.provision.file).toBe(path.join(workDir, 'abs.yaml'));
    expect(config.iam.policy.dir).toBe(path.join(cwd, 'my-policies'));

    const other = load('database:\n  embedded-dir: memory://\niam:\n  authenticator:\n    type: module\n    module: "@acme/iam-login"\n  provision:\n    file: null\n', {}, cwd);
    expect(other.database.embeddedDir).toBe('memory://');
    expect(other.iam.authenticator.module).toBe('@acme/iam-login');
    expect(other.iam.provision.file).toBeNull();
  });
});

describe('parseDuration and parseByteSize', () => {
  it.each([
    ['8h', 28_800_000],
    ['15m', 900_000],
    ['30s', 30_000],
    ['200ms', 200],
    ['1d', 86_400_000],
    ['1h30m', 5_400_000],
    ['0', 0],
    ['5000', 5000],
    [0, 0],
    [1500, 1500],
  ])('parseDuration(%j) = %d', (value, expected) => {
    expect(parseDuration(value, 'k')).toBe(expected);
  });

  it.each(['8x', '', '1.5h', '-1s', '30m1h', '1m1m', ' 5s', '5 s', '1H'])('parseDuration(%j) throws naming the key', (value) => {
    expect(() => parseDuration(value, 'iam.token.ttl')).toThrow(`config: iam.token.ttl: ${JSON.stringify(value)} is not a duration`);
  });

  it('refuses negative, fractional and unsafe numbers', () => {
    for (const value of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) expect(() => parseDuration(value, 'k')).toThrow(/k:/);
    expect(() => parseDuration('999999999999999999d', 'k')).toThrow(/not a duration/);
  });

  it.each([
    ['16kb', 16_384],
    ['1mb', 1_048_576],
    ['1GB', 1_073_741_824],
    ['512b', 512],
    ['100', 100],
    [2048, 2048],
  ])('parseByteSize(%j) = %d', (value, expected) => {
    expect(parseByteSize(value, 'k')).toBe(expected);
  });

  it.each(['16kx', '1.5mb', '-1', 'kb', '1 mb', ''])('parseByteSize(%j) throws naming the key', (value) => {
    expect(() => parseByteSize(value, 'server.max-header-size')).toThrow(/config: server\.max-header-size: .* is not a size/);
  });
});

describe('the configuration reference (docs/configuration.md, "Every key")', () => {
  const reference = readFileSync(path.join(repoRoot, 'docs', 'configuration.md'), 'utf8');
  /** What the doc holds between the markers, or a note that they are missing. */
  const generatedPart = (text: string): string => {
    const begin = text.indexOf(`${CONFIG_REFERENCE_BEGIN}\n`);
    const end = text.indexOf(`${CONFIG_REFERENCE_END}\n`, begin);
    return begin === -1 || end === -1 ? '(no generated markers)' : text.slice(begin + CONFIG_REFERENCE_BEGIN.length + 1, end);
  };
  /** The comparison the test makes, with the message it fails with. */
  const compare = (text: string, keys = listConfigKeys()) => {
    const inDoc = generatedPart(text);
    const rendered = renderConfigReference(keys);
    return { current: inDoc === rendered, message: inDoc === rendered ? '' : 'docs/configuration.md "Every key" is not the schema\'s: run `npm run docs:config`' };
  };

  it('holds exactly what renderConfigReference() renders from the schema (run `npm run docs:config` after editing it)', () => {
    const { message } = compare(reference);
    // Byte for byte; on a difference, the message says how to regenerate and the diff shows the rows.
    expect({ message, table: generatedPart(reference) }).toEqual({ message: '', table: renderConfigReference() });
  });

  it('sits in the "Every key" section, one row per key in schema order, with its environment names', () => {
    const section = /## Every key\n([\s\S]*?)\n## /.exec(reference)![1]!;
    expect(section).toContain(CONFIG_REFERENCE_BEGIN);
    const rows = [...generatedPart(reference).matchAll(/^\| `([a-z0-9.-]+)` \| ([^|]*) \|/gm)].map((match) => ({
      key: match[1]!,
      env: [...match[2]!.matchAll(/`([A-Z0-9_]+)`/g)].map((name) => name[1]!),
    }));
    expect(rows).toEqual(listConfigKeys().map(({ key, env, alias }) => ({ key, env: alias === undefined ? [env] : [env, alias] })));
    expect(rows.map((row) => row.key)).toContain('iam.forward.assertion.key-file');
  });

  it('differs, with the message naming npm run docs:config, once a description changes', () => {
    const keys = listConfigKeys().map((entry) =>
      entry.key === 'server.port' ? { ...entry, schema: { ...entry.schema, description: `${entry.schema.description}; changed` } } : entry,
    );
    expect(compare(reference, keys)).toEqual({ current: false, message: expect.stringContaining('run `npm run docs:config`') });
    expect(compare(reference.replace(CONFIG_REFERENCE_BEGIN, '<!-- moved -->'))).toEqual({ current: false, message: expect.stringContaining('npm run docs:config') });
  });

  it('renders the key list it is given: env and conventional names, defaults as written, `|` escaped', () => {
    const extra: ConfigKey[] = [
      { key: 'server.port', env: 'SERVER_PORT', alias: 'PORT', schema: { type: 'integer', default: 8080, description: 'a port' } },
      { key: 'x.list', env: 'X_LIST', schema: { type: 'array', default: ['WEB', 'API'], description: 'a | b' } },
      { key: 'x.none', env: 'X_NONE', schema: { type: 'string', nullable: true, default: null, description: 'null = none' } },
      { key: 'x.wait', env: 'X_WAIT', schema: { type: ['string', 'integer'], default: '1h30m', description: 'a duration' } },
    ];
    expect(renderConfigReference(extra)).toBe(
      [
        '| key | env | default | meaning |',
        '|---|---|---|---|',
        '| `server.port` | `SERVER_PORT` / `PORT` | `8080` | a port |',
        '| `x.list` | `X_LIST` | `[WEB, API]` | a \\| b |',
        '| `x.none` | `X_NONE` | `null` | null = none |',
        '| `x.wait` | `X_WAIT` | `1h30m` | a duration |',
        '',
      ].join('\n'),
    );
  });
});

describe('iam.oidc.allowed and iam.oidc.profiles', () => {
  const rule = { name: 'eng', when: [{ claim: 'groups', values: ['eng'] }], 'template-version': 'editor-v1', 'client-types': ['WEB'] };

  it('reads the rules from the file and from the environment (a JSON array)', () => {
    const fromEnv = load('', { IAM_OIDC_ALLOWED: '[{"claim":"groups","values":["eng","ops"]}]', IAM_OIDC_PROFILES: JSON.stringify([{ ...rule, scopes: [{ type: 'TEAM', claim: 'groups', access: 'WRITE' }] }]) });
    expect(fromEnv.iam.oidc.allowed).toEqual([{ claim: 'groups', values: ['eng', 'ops'] }]);
    expect(fromEnv.iam.oidc.profiles).toEqual([
      { name: 'eng', when: [{ claim: 'groups', values: ['eng'] }], profileName: 'eng', templateVersionId: 'editor-v1', clientTypes: ['WEB'], scopes: [{ type: 'TEAM', claim: 'groups', access: 'WRITE' }], unscoped: null },
    ]);
    const fromFile = load('iam:\n  oidc:\n    allowed:\n      - claim: email_verified\n    profiles:\n      - { name: ops, template-version: reader-v1, client-types: [WEB], profile-name: Operations, unscoped: true }\n');
    expect(fromFile.iam.oidc.allowed).toEqual([{ claim: 'email_verified', values: [] }]);
    expect(fromFile.iam.oidc.profiles[0]).toEqual(expect.objectContaining({ name: 'ops', profileName: 'Operations', when: [], scopes: [], unscoped: true }));
  });

  it.each([
    ['two rules with one name', { IAM_OIDC_PROFILES: JSON.stringify([rule, rule]) }, /iam\.oidc\.profiles\[1\]\.name: "eng" names two rules/],
    ['a scope with both id and claim', { IAM_OIDC_PROFILES: JSON.stringify([{ ...rule, scopes: [{ type: 'T', id: 'x', claim: 'groups', access: 'READ' }] }]) }, /give either id .* or claim/],
    ['a scope with neither', { IAM_OIDC_PROFILES: JSON.stringify([{ ...rule, scopes: [{ type: 'T', access: 'READ' }] }]) }, /give either id .* or claim/],
    ['unscoped with scopes', { IAM_OIDC_PROFILES: JSON.stringify([{ ...rule, unscoped: true, scopes: [{ type: 'T', id: 'x', access: 'READ' }] }]) }, /unscoped: true means every resource/],
    ['a name that cannot be part of an id', { IAM_OIDC_PROFILES: JSON.stringify([{ ...rule, name: 'Eng Team' }]) }, /iam\.oidc\.profiles/],
    ['an unknown key in a rule', { IAM_OIDC_PROFILES: JSON.stringify([{ ...rule, template: 'x' }]) }, /iam\.oidc\.profiles/],
    ['a condition without a claim', { IAM_OIDC_ALLOWED: '[{"values":["x"]}]' }, /iam\.oidc\.allowed/],
    ['not JSON', { IAM_OIDC_ALLOWED: '[{claim' }, /iam\.oidc\.allowed: .* is not a JSON array/],
  ])('refuses %s with a message naming the key', (_case, env, message) => {
    expect(loadError('', env).message).toMatch(message);
  });
});
