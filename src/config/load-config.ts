import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { packageRoot } from './package-root';
import { yamlErrorReports } from '../policy/yaml-errors';
import { isSection, type Data } from './config-data';
import { ConfigError, findNode, locate, showPath, unique, type Segment } from './config-error';
import { AUTHENTICATORS, type AuthenticatorRegistry } from '../auth/authenticators';
import { configSchemaFor, type RawConfig } from './config-schema';
import { applyEnvironment } from './env-overrides';
import type { GatewayConfig } from './gateway-config';
import { toGatewayConfig } from './to-gateway-config';
import { unknownEnvironmentWarnings } from './unknown-environment';
import { compiledValidator, crossChecks, describeAjvError } from './validate-config';

export { ConfigError, type ConfigProblem } from './config-error';

/** The environment variable naming the configuration file. */
export const CONFIG_FILE_ENV = 'IAM_CONFIG';

/** Where `loadConfig` reads from. */
export interface LoadConfigOptions {
  /**
   * The YAML file, relative to `cwd`; default `IAM_CONFIG`, else `<cwd>/config/default.yaml` when it exists, else
   * the installed package's own `config/default.yaml`.
   */
  file?: string;
  /** Environment overrides; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths (the config file, `iam.policy.dir`, ...); default `process.cwd()`. */
  cwd?: string;
  /** The login methods `iam.authenticator.type` chooses from, with their keys; default the built-in ones. */
  authenticators?: AuthenticatorRegistry;
  /**
   * `serve`: when the configuration is the package's own file, `IAM_POLICIES_DIR` is not set and the working directory
   * has no `policies/`, the policy is the one the package ships (`policies/example.yaml`); `source.packagedPolicy` says
   * so. Default false: `policy check` and the other tools still name the missing directory.
   */
  packagedPolicy?: boolean;
}

/**
 * Reads, completes, overrides and validates the configuration (docs/configuration.md), then converts it to
 * `GatewayConfig` (camelCase, milliseconds, bytes, absolute paths). Throws one ConfigError listing every
 * problem found, each naming its dotted key (and the environment variable when the value came from one).
 *
 * Precedence, lowest first: schema defaults, the file, the conventional environment name (`PORT`),
 * the generic environment name (`SERVER_PORT`): the generic name is the more specific one, so it wins.
 * An `IAM_…`/`SERVER_…` variable that nothing reads is not an error: it is listed in `warnings`, which the
 * gateway logs at start.
 */
export function loadConfig(options: LoadConfigOptions = {}): GatewayConfig {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const env = options.env ?? process.env;
  const authenticators = options.authenticators ?? AUTHENTICATORS;
  const named = options.file ?? env[CONFIG_FILE_ENV];
  const file = named === undefined ? defaultFile(cwd) : path.resolve(cwd, named);
  const shownFile = showPath(file, cwd);

  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    // A file IAM_CONFIG names must be there: never a silent fall back to another one.
    const problem = options.file === undefined && named !== undefined
      ? { key: '', message: `cannot read the configuration file ${shownFile} (${reason})`, env: CONFIG_FILE_ENV }
      : { key: '', message: `cannot read the configuration file (${reason})` };
    throw new ConfigError([problem], shownFile);
  }
  const lineCounter = new LineCounter();
  const document = parseDocument(text, { lineCounter, prettyErrors: true });
  if (document.errors.length > 0) {
    // The first error and a few after it: one slip makes the library report every line below it.
    const problems = yamlErrorReports(text, document.errors).map((error) => ({ key: '', message: `YAML: ${error.message}`, line: error.line }));
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

  applyDefaults(configSchemaFor(authenticators) as unknown as SchemaNode, data);
  const envSources = new Map<string, string>();
  const problems = applyEnvironment(data, env, envSources, authenticators);
  const validate = compiledValidator(authenticators);
  if (!validate(data)) problems.push(...(validate.errors ?? []).map((error) => describeAjvError(error, data)));
  problems.push(...crossChecks(data, authenticators));

  if (problems.length > 0) {
    const lineOf = (segments: Segment[]): number | undefined => {
      const node = findNode(document.contents, segments);
      return node?.range ? lineCounter.linePos(node.range[0]).line : undefined;
    };
    throw new ConfigError(unique(problems).map((problem) => locate(problem, envSources, lineOf)), shownFile);
  }
  const warnings = unknownEnvironmentWarnings(env, [CONFIG_FILE_ENV], authenticators);
  const packagedPolicy = options.packagedPolicy === true ? packagedPolicyDir(file, cwd, data, envSources) : null;
  if (packagedPolicy !== null) ((data.iam as Data).policy as Data).dir = packagedPolicy;
  return toGatewayConfig(data as unknown as RawConfig, cwd, { file, packagedPolicy: packagedPolicy !== null }, warnings, authenticators);
}

/**
 * The package's own policy directory, for a start that has none of its own (like {@link defaultFile}: an installed
 * package run from an empty directory still starts): only under the package's own configuration file, with
 * `iam.policy.dir` not set from the environment, and no such directory under `cwd`. A configuration of the operator's
 * that names a missing directory still fails the start: the example policy never replaces a policy someone meant.
 */
function packagedPolicyDir(file: string, cwd: string, data: Data, envSources: Map<string, string>): string | null {
  const root = packageRoot();
  if (root === null || file !== path.join(root, 'config', 'default.yaml') || envSources.has('iam.policy.dir')) return null;
  const configured = ((data.iam as Data).policy as Data).dir;
  if (typeof configured !== 'string' || existsSync(path.resolve(cwd, configured))) return null;
  const shipped = path.join(root, 'policies');
  return existsSync(path.join(shipped, 'example.yaml')) ? shipped : null;
}

/**
 * Without `IAM_CONFIG`: `config/default.yaml` under `cwd` (a checkout, or a deployment that keeps its own), else the
 * one the package ships (an installed package run from any directory). Relative paths in either resolve against
 * `cwd`. When neither exists, the one under `cwd`, so that the error names where the file was looked for.
 */
function defaultFile(cwd: string): string {
  const local = path.join(cwd, 'config', 'default.yaml');
  if (existsSync(local)) return local;
  const root = packageRoot();
  const shipped = root === null ? null : path.join(root, 'config', 'default.yaml');
  return shipped !== null && existsSync(shipped) ? shipped : local;
}

// ---------------------------------------------------------------- defaults

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
