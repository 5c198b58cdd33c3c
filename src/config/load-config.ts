import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import { LineCounter, parseDocument, isMap, isScalar, isSeq, type Node } from 'yaml';
import { CONFIG_FORMATS, configSchema, listConfigKeys, type LeafSchema, type RawConfig } from './config-schema';
import { parseByteSize, parseDuration } from './durations';
import type { GatewayConfig } from './gateway-config';

/** Where `loadConfig` reads from. */
export interface LoadConfigOptions {
  /** The YAML file; default `IAM_CONFIG`, else `<cwd>/config/default.yaml`. Relative to `cwd`. */
  file?: string;
  /** Environment overrides; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths (the config file, `iam.policy.dir`, ...); default `process.cwd()`. */
  cwd?: string;
}

/** One thing wrong with the configuration. */
export interface ConfigProblem {
  /** Dotted key (`iam.token.ttl`, `iam.client-types[1]`); `''` for the file as a whole. */
  key: string;
  /** What is wrong, naming the key. */
  message: string;
  /** The environment variable the bad value came from. */
  env?: string;
  /** 1-based line in the file, when the value is written there. */
  line?: number;
  /** A likely fix, e.g. `did you mean "iam.token"?`. */
  hint?: string;
}

/** The configuration cannot be used; `problems` lists everything found, `key` names the first. */
export class ConfigError extends Error {
  readonly key: string;
  readonly problems: readonly ConfigProblem[];
  /** The config file as shown in messages (relative to cwd when inside it). */
  readonly file: string;

  constructor(problems: readonly ConfigProblem[], file: string) {
    const lines = problems.map(
      (problem) => problem.message + whereOf(problem, file) + (problem.hint === undefined ? '' : ` (${problem.hint})`),
    );
    const list = lines.length === 1 ? lines[0] : `${lines.length} problems:\n  - ${lines.join('\n  - ')}`;
    super(`config: ${list}`);
    this.name = 'ConfigError';
    this.key = problems[0]?.key ?? '';
    this.problems = problems;
    this.file = file;
  }
}

type Segment = string | number;
interface Problem {
  path: Segment[];
  message: string;
  env?: string;
  hint?: string;
  /** Where to point in the file when the value itself is not written there. */
  at?: Segment[];
}
type Data = Record<string, unknown>;

/**
 * Reads, completes, overrides and validates the configuration (design.md §3), then converts it to
 * `GatewayConfig` (camelCase, milliseconds, bytes, absolute paths). Throws one ConfigError listing every
 * problem found, each naming its dotted key (and the environment variable when the value came from one).
 *
 * Precedence, lowest first: schema defaults, the file, the conventional environment name (`PORT`),
 * the generic environment name (`SERVER_PORT`): the generic name is the more specific one, so it wins.
 */
export function loadConfig(options: LoadConfigOptions = {}): GatewayConfig {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const env = options.env ?? process.env;
  const file = path.resolve(cwd, options.file ?? env.IAM_CONFIG ?? path.join('config', 'default.yaml'));
  const shownFile = showPath(file, cwd);

  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError([{ key: '', message: `cannot read the configuration file (${reason})` }], shownFile);
  }
  const lineCounter = new LineCounter();
  const document = parseDocument(text, { lineCounter, prettyErrors: true });
  if (document.errors.length > 0) {
    // prettyErrors ends the first line of each message with "at line L, column C:"; the line is shown apart.
    const problems = document.errors.map((error) => ({
      key: '',
      message: `YAML: ${error.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '')}`,
      line: error.linePos?.[0].line,
    }));
    throw new ConfigError(problems, shownFile);
  }
  let data: unknown;
  try {
    data = document.toJS() ?? {}; // refuses alias bombs (yaml's maxAliasCount)
  } catch (error) {
    throw new ConfigError([{ key: '', message: `YAML: ${(error as Error).message}` }], shownFile);
  }
  if (!isSection(data)) {
    throw new ConfigError([{ key: '', message: 'the file must be a mapping of keys (or empty)' }], shownFile);
  }

  applyDefaults(configSchema as unknown as SchemaNode, data);
  const envSources = new Map<string, string>();
  const problems = applyEnvironment(data, env, envSources);
  const validate = compiledValidator();
  if (!validate(data)) problems.push(...(validate.errors ?? []).map((error) => describeAjvError(error, data)));
  problems.push(...crossChecks(data));

  if (problems.length > 0) {
    const lineOf = (segments: Segment[]): number | undefined => {
      const node = findNode(document.contents, segments);
      return node?.range ? lineCounter.linePos(node.range[0]).line : undefined;
    };
    throw new ConfigError(unique(problems).map((problem) => locate(problem, envSources, lineOf)), shownFile);
  }
  return toGatewayConfig(data as unknown as RawConfig, cwd, file);
}

// ---------------------------------------------------------------- defaults and environment

interface SchemaNode {
  type?: unknown;
  properties?: Record<string, SchemaNode>;
  default?: unknown;
}

/** Fills every missing key from the schema's `default`; an empty section (`server:`) counts as `{}`. */
function applyDefaults(schema: SchemaNode, target: Data): void {
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    if (child.properties !== undefined) {
      if (target[name] === undefined || target[name] === null) target[name] = {};
      const section = target[name];
      if (isSection(section)) applyDefaults(child, section);
    } else if (target[name] === undefined && 'default' in child) {
      target[name] = structuredClone(child.default);
    }
  }
}

/** Sets every leaf that has an environment variable, coerced to the schema's type (design.md §3). */
function applyEnvironment(data: Data, env: NodeJS.ProcessEnv, sources: Map<string, string>): Problem[] {
  const problems: Problem[] = [];
  for (const { key, env: generic, alias, schema } of listConfigKeys()) {
    const name = [generic, alias].find((candidate) => candidate !== undefined && env[candidate] !== undefined);
    if (name === undefined) continue;
    const segments = key.split('.');
    const parent = valueAt(data, segments.slice(0, -1));
    if (!isSection(parent)) continue; // the section itself is broken; validation reports it
    const coerced = coerce(env[name] as string, schema);
    if (coerced instanceof Error) {
      problems.push({ path: segments, message: `${key}: ${coerced.message}`, env: name });
      continue;
    }
    parent[segments[segments.length - 1]] = coerced;
    sources.set(key, name);
  }
  return problems;
}

/**
 * Environment values are strings. Values that do not fit the type are passed on unchanged so that
 * validation reports them with the same words as a bad file value.
 */
function coerce(value: string, schema: LeafSchema): unknown {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types.includes('array')) {
    if (!value.trimStart().startsWith('[')) {
      return value
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== '');
    }
    try {
      const parsed: unknown = JSON.parse(value);
      if (Array.isArray(parsed)) return parsed;
    } catch {
      // reported below
    }
    return new Error(`${JSON.stringify(value)} is not a JSON array (or write a comma-separated list)`);
  }
  if (value === '' && schema.nullable === true) return null;
  if (types.includes('boolean')) {
    if (/^(true|1)$/i.test(value)) return true;
    if (/^(false|0)$/i.test(value)) return false;
    return value;
  }
  if (types.includes('integer') && /^[+-]?\d+$/.test(value.trim())) return Number(value.trim());
  return value;
}

// ---------------------------------------------------------------- validation

let validator: ValidateFunction | undefined;

/** Compiled once (a pure function, not a connection): ajv compilation is the costly part. */
function compiledValidator(): ValidateFunction {
  if (validator === undefined) {
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true });
    for (const [name, format] of Object.entries(CONFIG_FORMATS)) {
      ajv.addFormat(name, { type: 'string', validate: format.validate });
    }
    validator = ajv.compile(configSchema);
  }
  return validator;
}

/** Turns one ajv error into a sentence naming the dotted key. */
function describeAjvError(error: ErrorObject, data: Data): Problem {
  const base = pointerToPath(error.instancePath, data);
  const schema = (error.parentSchema ?? {}) as { format?: string; nullable?: boolean; properties?: object };
  const format = schema.format === undefined ? undefined : CONFIG_FORMATS[schema.format];
  const params = error.params as Record<string, unknown>;
  const value = error.data;
  const shown = format?.echo === false ? 'the value' : show(value);
  const problem = (text: string): Problem => ({ path: base, message: `${keyOf(base) || 'the file'}: ${text}` });
  switch (error.keyword) {
    case 'additionalProperties': {
      const name = String(params.additionalProperty);
      const unknown: Problem = { path: [...base, name], message: `unknown key "${keyOf([...base, name])}"` };
      const hint = closest(name, Object.keys(schema.properties ?? {}));
      return hint === undefined ? unknown : { ...unknown, hint: `did you mean "${keyOf([...base, hint])}"?` };
    }
    case 'required': {
      const path = [...base, String(params.missingProperty)];
      return { path, message: `${keyOf(path)} is missing` };
    }
    case 'format':
    case 'minimum':
    case 'maximum':
      // Durations and sizes may be numbers: a number below their minimum is "not a duration" too.
      if (format !== undefined) return problem(`${format.echo ? `${shown} is not` : 'is not'} ${format.expected}`);
      return problem(`${shown} must be ${String(params.comparison)} ${String(params.limit)}`);
    case 'type': {
      const expected = format?.expected ?? typeWords(String(params.type), schema.nullable === true);
      return problem(`expected ${expected}, got ${format?.echo === false ? typeof value : shown}`);
    }
    case 'enum':
      return problem(`${shown} is not one of ${(params.allowedValues as unknown[]).join(', ')}`);
    case 'minLength':
      return problem('must not be empty');
    case 'minItems':
      return problem(`must list at least ${String(params.limit)} value(s)`);
    case 'uniqueItems':
      return problem(`lists ${show((value as unknown[])[Number(params.i)])} twice`);
    default:
      return problem(error.message ?? 'is invalid');
  }
}

const COMPANION_KEYS = new Map([
  ['users-file', 'path'],
  ['http', 'url'],
  ['module', 'module'],
]);

/** Rules that span several keys. Written defensively: they run even when other keys are invalid. */
function crossChecks(data: Data): Problem[] {
  const problems: Problem[] = [];
  const get = (key: string): unknown => valueAt(data, key.split('.'));

  const type = get('iam.authenticator.type');
  const companion = typeof type === 'string' ? COMPANION_KEYS.get(type) : undefined;
  if (companion !== undefined && (get(`iam.authenticator.${companion}`) ?? null) === null) {
    problems.push({
      path: ['iam', 'authenticator', companion],
      message: `iam.authenticator.${companion} is required when iam.authenticator.type is "${type}"`,
      at: ['iam', 'authenticator', 'type'],
    });
  }
  const port = get('server.port');
  if (typeof port === 'number' && port !== 0 && get('server.management-port') === port) {
    const message = `server.management-port: must differ from server.port (${port})`;
    problems.push({ path: ['server', 'management-port'], message });
  }
  // Fetch standard, CORS protocol: `Access-Control-Allow-Origin: *` is refused with credentials; allowing
  // "any origin with credentials" would mean reflecting every origin, which lets any site act as the user.
  const origins = get('iam.cors.origins');
  if (get('iam.cors.credentials') === true && Array.isArray(origins) && origins.includes('*')) {
    const message = 'iam.cors.origins: "*" cannot be combined with iam.cors.credentials: true';
    problems.push({ path: ['iam', 'cors', 'origins'], message });
  }
  return problems;
}

// ---------------------------------------------------------------- conversion

/** The validated YAML form → what the code uses. Nothing here can fail: validation ran first. */
function toGatewayConfig(raw: RawConfig, cwd: string, file: string): GatewayConfig {
  const ms = (value: string | number, key: string): number => parseDuration(value, key);
  const bytes = (value: string | number, key: string): number => parseByteSize(value, key);
  const fromCwd = (value: string): string => path.resolve(cwd, value);
  const { server, upstream, iam } = raw;
  const { token, authenticator, forward, cors } = iam;
  return {
    server: {
      port: server.port,
      managementPort: server['management-port'],
      host: server.host,
      requestTimeoutMs: ms(server['request-timeout'], 'server.request-timeout'),
      headersTimeoutMs: ms(server['headers-timeout'], 'server.headers-timeout'),
      keepAliveTimeoutMs: ms(server['keep-alive-timeout'], 'server.keep-alive-timeout'),
      maxHeaderSize: bytes(server['max-header-size'], 'server.max-header-size'),
      maxUrlLength: bytes(server['max-url-length'], 'server.max-url-length'),
      iamBodyLimit: bytes(server['iam-body-limit'], 'server.iam-body-limit'),
      shutdownTimeoutMs: ms(server['shutdown-timeout'], 'server.shutdown-timeout'),
    },
    upstream: {
      url: upstream.url,
      connectTimeoutMs: ms(upstream['connect-timeout'], 'upstream.connect-timeout'),
      responseTimeoutMs: ms(upstream['response-timeout'], 'upstream.response-timeout'),
      bodyTimeoutMs: ms(upstream['body-timeout'], 'upstream.body-timeout'),
      connections: upstream.connections,
    },
    database: {
      url: raw.database.url ?? null,
      embeddedDir: raw.database['embedded-dir'].startsWith('memory://')
        ? raw.database['embedded-dir']
        : fromCwd(raw.database['embedded-dir']),
      poolSize: raw.database['pool-size'],
    },
    redis: { url: raw.redis.url ?? null },
    log: { level: raw.log.level },
    iam: {
      enabled: iam.enabled,
      token: {
        storePrefix: token['store-prefix'],
        ttlMs: ms(token.ttl, 'iam.token.ttl'),
        idleTimeoutMs: ms(token['idle-timeout'], 'iam.token.idle-timeout'),
        cache: { enabled: token.cache.enabled, maxEntries: token.cache['max-entries'] },
      },
      schema: { historyTable: iam.schema['history-table'] },
      clientTypes: [...iam['client-types']],
      login: {
        rateLimit: {
          maxFailures: iam.login['rate-limit']['max-failures'],
          windowMs: ms(iam.login['rate-limit'].window, 'iam.login.rate-limit.window'),
        },
      },
      authenticator: {
        type: authenticator.type,
        path: nullable(authenticator.path, fromCwd),
        url: authenticator.url ?? null,
        module: nullable(authenticator.module, (module) => (isPackageSpecifier(module) ? module : fromCwd(module))),
        timeoutMs: ms(authenticator.timeout, 'iam.authenticator.timeout'),
      },
      provision: { file: nullable(iam.provision.file, fromCwd) },
      policy: {
        dir: fromCwd(iam.policy.dir),
        pollIntervalMs: ms(iam.policy['poll-interval'], 'iam.policy.poll-interval'),
        debounceMs: ms(iam.policy.debounce, 'iam.policy.debounce'),
      },
      authz: {
        abilityCacheSize: iam.authz['ability-cache-size'],
        resolverTimeoutMs: ms(iam.authz['resolver-timeout'], 'iam.authz.resolver-timeout'),
      },
      gateway: { allowPathParameters: iam.gateway['allow-path-parameters'] },
      forward: {
        trustedProxies: [...forward['trusted-proxies']],
        assertion: {
          enabled: forward.assertion.enabled,
          ttlMs: ms(forward.assertion.ttl, 'iam.forward.assertion.ttl'),
          issuer: forward.assertion.issuer,
          audience: forward.assertion.audience ?? null,
          keyFile: nullable(forward.assertion['key-file'] ?? null, fromCwd),
        },
      },
      cors: {
        enabled: cors.enabled,
        origins: [...cors.origins],
        methods: [...cors.methods],
        headers: [...cors.headers],
        maxAgeSeconds: cors['max-age'],
        credentials: cors.credentials,
      },
      audit: { flushIntervalMs: ms(iam.audit['flush-interval'], 'iam.audit.flush-interval') },
    },
    source: { file, directory: path.dirname(file) },
  };
}

/**
 * `iam.authenticator.module` may name an installed package (`@acme/iam-login`) rather than a file:
 * Node resolves bare specifiers from node_modules, so only path-like values (`./x.js`, `/opt/x.js`,
 * `lib/x.js`) are made absolute.
 */
function isPackageSpecifier(value: string): boolean {
  return !value.startsWith('.') && !path.isAbsolute(value) && !/\.(c|m)?js$/.test(value);
}

const nullable = (value: string | null | undefined, map: (value: string) => string): string | null =>
  value === undefined || value === null ? null : map(value);

// ---------------------------------------------------------------- messages and locations

function locate(
  problem: Problem,
  sources: Map<string, string>,
  lineOf: (segments: Segment[]) => number | undefined,
): ConfigProblem {
  const located: ConfigProblem = { key: keyOf(problem.path), message: problem.message };
  if (problem.hint !== undefined) located.hint = problem.hint;
  const leaf = problem.path.filter((segment): segment is string => typeof segment === 'string').join('.');
  const env = problem.env ?? sources.get(leaf);
  if (env !== undefined) located.env = env;
  else {
    const line = lineOf(problem.path) ?? (problem.at === undefined ? undefined : lineOf(problem.at));
    if (line !== undefined) located.line = line;
  }
  return located;
}

function whereOf(problem: ConfigProblem, file: string): string {
  if (problem.env !== undefined) return ` (environment variable ${problem.env})`;
  return ` in ${file}${problem.line === undefined ? '' : `:${problem.line}`}`;
}

/** The YAML node written at `segments` (the key node for the last map entry), if any. */
function findNode(root: unknown, segments: Segment[]): Node | undefined {
  let node = root;
  for (const [index, segment] of segments.entries()) {
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === String(segment));
      if (pair === undefined) return undefined;
      if (index === segments.length - 1) return pair.key as Node;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      node = node.items[segment];
    } else {
      return undefined;
    }
  }
  return node as Node | undefined;
}

/** `/iam/client-types/1` → `['iam', 'client-types', 1]` (numbers only where the data is a list). */
function pointerToPath(pointer: string, data: Data): Segment[] {
  const segments: Segment[] = [];
  let node: unknown = data;
  for (const raw of pointer.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const step: Segment = Array.isArray(node) ? Number(segment) : segment;
    segments.push(step);
    node = (node as Record<Segment, unknown> | undefined)?.[step];
  }
  return segments;
}

/** `['iam', 'client-types', 1]` → `iam.client-types[1]`. */
function keyOf(segments: Segment[]): string {
  return segments.reduce<string>((key, segment) => {
    if (typeof segment === 'number') return `${key}[${segment}]`;
    return key === '' ? segment : `${key}.${segment}`;
  }, '');
}

/** A known sibling the unknown key was probably meant to be: same letters (`storePrefix`) or a typo. */
function closest(name: string, known: string[]): string | undefined {
  const squash = (value: string): string => value.toLowerCase().replace(/[-_]/g, '');
  const same = known.find((candidate) => squash(candidate) === squash(name));
  if (same !== undefined) return same;
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(name, candidate);
    const plausible = distance <= 2 && distance < name.length / 2;
    if (plausible && (best === undefined || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

const TYPE_WORDS = new Map([
  ['object', 'a mapping of keys'],
  ['array', 'a list'],
  ['string', 'a string'],
  ['integer', 'an integer'],
  ['boolean', 'true or false'],
]);

function typeWords(types: string, nullable: boolean): string {
  const expected = types
    .split(',')
    .map((type) => TYPE_WORDS.get(type) ?? type)
    .join(' or ');
  return nullable ? `${expected} or null` : expected;
}

function show(value: unknown): string {
  const shown = JSON.stringify(value) ?? String(value);
  return shown.length > 80 ? `${shown.slice(0, 77)}...` : shown;
}

function showPath(file: string, cwd: string): string {
  const relative = path.relative(cwd, file);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}

function unique(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((problem) => {
    const id = `${keyOf(problem.path)}\n${problem.message}`;
    return seen.has(id) ? false : (seen.add(id), true);
  });
}

function valueAt(data: Data, segments: string[]): unknown {
  return segments.reduce<unknown>(
    (node, name) => (isSection(node) && Object.hasOwn(node, name) ? node[name] : undefined),
    data,
  );
}

function isSection(value: unknown): value is Data {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
