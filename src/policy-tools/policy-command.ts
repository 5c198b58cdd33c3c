/**
 * `iam-gateway policy check|test|explain|coverage|diff` (docs/policy-format.md, docs/policy-changes.md): the policy lifecycle tools a
 * host team runs locally and in CI. Each reads the policies directory exactly as the gateway does; the
 * configuration is loaded only when a default is needed (no DIR, no --provision).
 */
import { createReadStream, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { ProvisioningDocument } from '../domain/records';
import type { TextOutput } from '../observability/terminal-text';
import type { CompiledPolicy, PolicyIssue } from '../policy/compiled-policy';
import { loadPolicyDirectory } from '../policy/load-policy-directory';
import { computeCoverage, formatCoverageReport, OpenApiError, parseOpenApiOperations } from './policy-coverage';
import { diffPolicies, formatPolicyDiff } from './policy-diff';
import { formatReplayReport, parseAccessLogLine, replayFails, replayOne, ReplayTally, type FailOn, type RecordedDecision, type ReplayEngine } from './policy-replay';
import { explainRequest, formatExplanation } from './policy-explain';
import { checkPolicyDirectory, formatPolicyIssue } from './policy-lint';
import { formatPolicyTestReport, runPolicyTests } from './policy-test-runner';

/** Where the command writes (the CLI's filtered output, src/observability/terminal-text.ts) and what it reads its defaults from. */
export interface PolicyCommandIo {
  stdout: TextOutput;
  stderr: TextOutput;
  env: NodeJS.ProcessEnv;
  /** Base of relative paths (DIR, FILE) and of the configuration lookup. */
  cwd: string;
  /** `--access-log -` reads it. */
  stdin?: NodeJS.ReadableStream;
}

/** The part of the gateway's configuration the policy tools use (docs/configuration.md). */
export interface PolicyToolSettings {
  /** `iam.policy.dir`. */
  policyDir: string;
  /** `iam.provision.file`. */
  provisionFile: string | null;
  /** `iam.gateway.allow-path-parameters`. */
  allowPathParameters: boolean;
  /** `iam.authz.resolver-timeout`. */
  resolverTimeoutMs: number;
}

/**
 * What the command needs from the rest of the gateway: the configuration, the provisioning file reader and the
 * database. The composition root wires them (src/cli/policy-command.ts); tests may pass their own.
 */
export interface PolicyToolServices {
  /** Loads the configuration (config file, `IAM_*` environment) of `io.env`/`io.cwd`; throws when it is invalid. */
  loadSettings(io: PolicyCommandIo): PolicyToolSettings;
  readProvisioningFile(path: string): ProvisioningDocument;
  /** Every template of the configured database (read only: no migration is applied). */
  databaseTemplates(io: PolicyCommandIo): Promise<Array<{ versionId: string; permissions: string[] }>>;
  /**
   * `policy replay`'s data: an engine deciding with today's grants from the configured database (its resolver is
   * never called), and the audit trail's denials since `since` (a duration such as `24h`; null: none). Rejects with
   * a message naming the database when it cannot be reached.
   */
  openReplay(io: PolicyCommandIo, since: string | null): Promise<ReplayData>;
}

/** What {@link PolicyToolServices.openReplay} gives the replay. */
export interface ReplayData {
  engine: ReplayEngine['engine'];
  /** The audit trail's recorded denials in the window, oldest page first; empty without `since`. */
  auditDecisions(): AsyncIterable<RecordedDecision>;
  close(): Promise<void>;
}

/** Each subcommand's line and description, as `policy --help` lists them and `policy SUBCOMMAND --help` shows one. */
const SUBCOMMAND_USAGE = {
  check: `check [DIR] [--provision FILE] [--database]
        validate and lint the policy files; exit 1 on any error (warnings alone exit 0).
        --provision / --database: also report permission codes no template grants`,
  test: `test [DIR] [--provision FILE] [--verbose]
        run the cases of DIR/tests/*.yaml through the decision engine; exit 1 on any failure.
        --provision: users for \`principal: { user }\` cases (default iam.provision.file)`,
  explain: `explain METHOD PATH [--dir DIR]
        show the normalized path, the route selected (file:line) and what it asks for`,
  coverage: `coverage --openapi FILE [--dir DIR] [--base-path PATH] [--fail-on-uncovered] [--verbose]
        list the host's OpenAPI operations no route covers and routes matching no operation`,
  replay: `replay NEW_DIR [--access-log FILE|-] [--since DURATION] [--fail-on wider|narrower|any] [--json]
        the recorded requests (access-log lines, and the audit trail's denials of the last DURATION) decided again
        by NEW_DIR with today's grants (the configured database); counts allow→deny and deny→allow per route and
        user; exit 1 per --fail-on (wider: anything deny→allow), 2 when NEW_DIR or the database does not load`,
  diff: `diff OLD_DIR NEW_DIR [--json]
        what a policy change does to the decisions: every (method, route pattern) whose checks change, marked
        wider (someone may get in who could not), narrower or neutral; exit 1 when anything is wider, 2 when a
        directory does not load`,
} as const;

const DIR_DEFAULT = 'DIR defaults to iam.policy.dir (IAM_POLICIES_DIR) of the configuration.';

export const POLICY_USAGE = `usage: iam-gateway policy <command>

${Object.values(SUBCOMMAND_USAGE)
  .map((usage) => `  ${usage}`)
  .join('\n')}

${DIR_DEFAULT}`;

/** The usage of one subcommand (`iam-gateway policy check --help`). */
function subcommandUsage(command: keyof typeof SUBCOMMAND_USAGE): string {
  return `usage: iam-gateway policy ${SUBCOMMAND_USAGE[command]}\n\n${DIR_DEFAULT}`;
}

/** True when `--help` or `-h` comes before any `--`. */
function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

type Options = Record<string, string | boolean | undefined>;

/** Usage errors: exit code 2 with the message and the usage. */
class UsageError extends Error {}

/** Runs `policy <args>`; resolves the exit code (0 ok, 1 problems found, 2 usage). Never rejects. */
export async function runPolicyCommand(args: string[], io: PolicyCommandIo, services: PolicyToolServices): Promise<number> {
  const out = (lines: readonly string[]): void => {
    if (lines.length > 0) io.stdout.write(`${lines.join('\n')}\n`);
  };
  const context = new CommandContext(io, services);
  const [command, ...rest] = args;
  if (command !== undefined && Object.hasOwn(SUBCOMMAND_USAGE, command) && asksForHelp(rest)) {
    io.stdout.write(`${subcommandUsage(command as keyof typeof SUBCOMMAND_USAGE)}\n`);
    return 0;
  }
  try {
    switch (command) {
      case 'check':
        return await check(rest, context, out);
      case 'test':
        return await test(rest, context, out);
      case 'explain':
        return await explain(rest, context, out);
      case 'coverage':
        return await coverage(rest, context, out);
      case 'diff':
        return await diff(rest, context, out);
      case 'replay':
        return await replay(rest, context, out);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.stdout.write(`${POLICY_USAGE}\n`);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown policy command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`iam-gateway policy: ${error.message}\n\n${POLICY_USAGE}\n`);
      return 2;
    }
    io.stderr.write(`iam-gateway policy: ${(error as Error).message}\n`);
    return 1;
  }
}

// ---------------------------------------------------------------- subcommands

async function check(args: string[], context: CommandContext, out: (lines: readonly string[]) => void): Promise<number> {
  const { positionals, options } = parse(args, { provision: 'string', database: 'boolean' }, 1);
  const dir = context.policyDir(positionals[0]);
  const templates: Array<{ versionId: string; permissions: string[] }> = [];
  const origins: string[] = [];
  if (typeof options.provision === 'string') {
    templates.push(...(context.services.readProvisioningFile(context.path(options.provision)).templates ?? []));
    origins.push(options.provision);
  }
  if (options.database === true) {
    templates.push(...(await context.databaseTemplates()));
    origins.push('the database');
  }
  const result = await checkPolicyDirectory(dir.path, {
    ...(origins.length > 0 ? { templates, templatesOrigin: origins.join(' and ') } : {}),
    allowPathParameters: context.loadedSettings?.allowPathParameters ?? false,
  });
  const errors = result.issues.filter((issue) => issue.severity === 'error').length;
  const warnings = result.issues.length - errors;
  out([...result.issues.map((issue) => formatPolicyIssue(issue, dir.label, dir.fileLabel)), `${count(errors, 'error')}, ${count(warnings, 'warning')}`]);
  return errors > 0 ? 1 : 0;
}

async function test(args: string[], context: CommandContext, out: (lines: readonly string[]) => void): Promise<number> {
  const { positionals, options } = parse(args, { provision: 'string', verbose: 'boolean' }, 1);
  const dir = context.policyDir(positionals[0]);
  const policy = await context.loadPolicy(dir, out);
  if (!policy) return 1;
  let provisioningPath: string | null = null;
  let origin = 'the provisioning file';
  if (typeof options.provision === 'string') {
    provisioningPath = context.path(options.provision);
    origin = options.provision;
  }
  const report = await runPolicyTests({
    policy,
    dir: dir.path,
    provisioning: () => {
      if (provisioningPath === null) {
        provisioningPath = context.settings().provisionFile;
        if (provisioningPath === null) throw new Error('principal.user needs a provisioning file: pass --provision FILE or set iam.provision.file');
        origin = context.display(provisioningPath);
      }
      return context.services.readProvisioningFile(provisioningPath);
    },
    // A getter: which file it is is only known once a case needs it.
    get provisioningOrigin() {
      return origin;
    },
    allowPathParameters: context.loadedSettings?.allowPathParameters ?? false,
  });
  out(formatPolicyTestReport(report, { verbose: options.verbose === true, fileLabel: dir.fileLabel, where: join(dir.label, 'tests') }));
  return report.failed > 0 ? 1 : 0;
}

async function explain(args: string[], context: CommandContext, out: (lines: readonly string[]) => void): Promise<number> {
  const { positionals, options } = parse(args, { dir: 'string' }, 2);
  const [method, path] = positionals;
  if (method === undefined || path === undefined) throw new UsageError('explain needs METHOD and PATH, e.g. `policy explain GET /api/projects/1`');
  if (!/^[A-Za-z]{1,20}$/.test(method)) throw new UsageError(`"${method}" is not an HTTP method`);
  const dir = context.policyDir(typeof options.dir === 'string' ? options.dir : undefined);
  const policy = await context.loadPolicy(dir, out);
  if (!policy) return 1;
  out(formatExplanation(explainRequest(policy, method, path, { allowPathParameters: context.loadedSettings?.allowPathParameters ?? false })));
  return 0;
}

async function coverage(args: string[], context: CommandContext, out: (lines: readonly string[]) => void): Promise<number> {
  const { options } = parse(args, { openapi: 'string', dir: 'string', 'base-path': 'string', 'fail-on-uncovered': 'boolean', verbose: 'boolean' }, 0);
  if (typeof options.openapi !== 'string') throw new UsageError('coverage needs --openapi FILE');
  let text: string;
  try {
    text = readFileSync(context.path(options.openapi), 'utf8');
  } catch (error) {
    throw new Error(`cannot read ${options.openapi}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  let operations;
  try {
    operations = parseOpenApiOperations(text, typeof options['base-path'] === 'string' ? { basePath: options['base-path'] } : {});
  } catch (error) {
    if (error instanceof OpenApiError) throw new Error(`${options.openapi}: ${error.message}`);
    throw error;
  }
  const dir = context.policyDir(typeof options.dir === 'string' ? options.dir : undefined);
  const policy = await context.loadPolicy(dir, out);
  if (!policy) return 1;
  const report = computeCoverage(policy, operations);
  out(formatCoverageReport(report, policy, { openapiLabel: options.openapi, policyLabel: dir.label, verbose: options.verbose === true }));
  return options['fail-on-uncovered'] === true && report.uncovered.length > 0 ? 1 : 0;
}

async function diff(args: string[], context: CommandContext, out: (lines: readonly string[]) => void): Promise<number> {
  const { positionals, options } = parse(args, { json: 'boolean' }, 2);
  if (positionals.length !== 2) throw new UsageError('diff needs OLD_DIR and NEW_DIR, e.g. `policy diff main/policies policies`');
  const [oldDir, newDir] = positionals.map((given) => context.policyDir(given)) as [PolicyDir, PolicyDir];
  const [before, after] = [await context.loadPolicy(oldDir, out), await context.loadPolicy(newDir, out)];
  // A directory that does not load is not a change to judge: exit 2 (its errors are printed above).
  if (!before || !after) return 2;
  const result = diffPolicies(before, after);
  if (options.json === true) out([JSON.stringify({ wider: result.wider, changes: result.changes, resources: result.resources }, null, 2)]);
  else out(formatPolicyDiff(result, { old: (id) => join(oldDir.label, id), new: (id) => join(newDir.label, id) }));
  return result.wider ? 1 : 0;
}

async function replay(args: string[], context: CommandContext, out: (lines: readonly string[]) => void): Promise<number> {
  const { positionals, options } = parse(args, { 'access-log': 'string', since: 'string', 'fail-on': 'string', json: 'boolean' }, 1);
  if (positionals.length !== 1) throw new UsageError('replay needs NEW_DIR, e.g. `policy replay policies --access-log access.log`');
  const failOn = options['fail-on'] === undefined ? null : (options['fail-on'] as string);
  if (failOn !== null && failOn !== 'wider' && failOn !== 'narrower' && failOn !== 'any') throw new UsageError(`--fail-on must be wider, narrower or any, not "${failOn}"`);
  const accessLog = typeof options['access-log'] === 'string' ? options['access-log'] : null;
  const since = typeof options.since === 'string' ? options.since : null;
  if (accessLog === null && since === null) throw new UsageError('replay needs --access-log FILE (or - for standard input), --since DURATION, or both');
  const dir = context.policyDir(positionals[0]);
  const policy = await context.loadPolicy(dir, out);
  if (!policy) return 2;
  // The policy that made the recorded decisions (its resource checks decide which recorded outcomes may be reused).
  const live = await context.loadPolicyQuietly(context.settings().policyDir);
  let data: ReplayData;
  try {
    data = await context.services.openReplay(context.io, since);
  } catch (error) {
    context.io.stderr.write(`iam-gateway policy replay: ${(error as Error).message}\n`);
    return 2;
  }
  const tally = new ReplayTally();
  try {
    if (accessLog !== null) {
      const input = accessLog === '-' ? context.io.stdin : createReadStream(context.path(accessLog));
      if (input === undefined) throw new UsageError('--access-log - needs standard input');
      let number = 0;
      const label = accessLog === '-' ? 'stdin' : accessLog;
      for await (const line of createInterface({ input, crlfDelay: Infinity })) {
        number++;
        const parsed = parseAccessLogLine(line, `${label}:${number}`);
        if (parsed.kind === 'record') tally.add(parsed.record, await replayOne(parsed.record, policy, live, data.engine));
        else tally.skip(parsed.kind);
      }
    }
    for await (const record of data.auditDecisions()) tally.add(record, await replayOne(record, policy, live, data.engine));
  } catch (error) {
    if (error instanceof UsageError) throw error;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`cannot read ${accessLog}: no such file`);
    context.io.stderr.write(`iam-gateway policy replay: ${(error as Error).message}\n`);
    return 2;
  } finally {
    await data.close();
  }
  const report = tally.report();
  out(options.json === true ? [JSON.stringify(report, null, 2)] : formatReplayReport(report));
  return replayFails(report, failOn as FailOn | null) ? 1 : 0;
}

// ---------------------------------------------------------------- shared

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

function parse(args: string[], spec: Record<string, 'string' | 'boolean'>, maxPositionals: number): { positionals: string[]; options: Options } {
  const options = Object.fromEntries(Object.entries(spec).map(([name, type]) => [name, name === 'verbose' ? { type, short: 'v' } : { type }]));
  let parsed: { positionals: string[]; values: Options };
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true }) as { positionals: string[]; values: Options };
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (parsed.positionals.length > maxPositionals) throw new UsageError(`unexpected argument "${parsed.positionals[maxPositionals]}"`);
  return { positionals: parsed.positionals, options: parsed.values };
}

/** A policies directory and how to show its files (as the user named it). */
interface PolicyDir {
  path: string;
  label: string;
  fileLabel: (file: string) => string;
}

/** Lazily loaded configuration and path helpers for one command run. */
class CommandContext {
  /** The configuration, once something needed it. */
  loadedSettings: PolicyToolSettings | null = null;

  constructor(
    readonly io: PolicyCommandIo,
    readonly services: PolicyToolServices,
  ) {}

  settings(): PolicyToolSettings {
    this.loadedSettings ??= this.services.loadSettings(this.io);
    return this.loadedSettings;
  }

  path(file: string): string {
    return resolve(this.io.cwd, file);
  }

  /** Relative to the working directory when inside it. */
  display(path: string): string {
    const shown = relative(this.io.cwd, path);
    return shown !== '' && !shown.startsWith('..') && !isAbsolute(shown) ? shown : path;
  }

  policyDir(given: string | undefined): PolicyDir {
    const path = given !== undefined ? this.path(given) : this.settings().policyDir;
    const label = given ?? this.display(path);
    return { path, label, fileLabel: (file) => join(label, file) };
  }

  /** The compiled policy, or null after printing why it does not load. */
  async loadPolicy(dir: PolicyDir, out: (lines: readonly string[]) => void): Promise<CompiledPolicy | null> {
    const resolverTimeout = this.loadedSettings?.resolverTimeoutMs;
    const result = await loadPolicyDirectory(dir.path, resolverTimeout === undefined ? {} : { defaultResolverTimeoutMs: resolverTimeout });
    if (result.policy) return result.policy;
    const errors = result.issues.filter((issue: PolicyIssue) => issue.severity === 'error');
    out([...errors.map((issue) => formatPolicyIssue(issue, dir.label, dir.fileLabel)), `the policy in ${dir.label} does not load (${errors.length} errors); run \`iam-gateway policy check\``]);
    return null;
  }

  /** The compiled policy of `path`, or null when it does not load (nothing printed). */
  async loadPolicyQuietly(path: string): Promise<CompiledPolicy | null> {
    const resolverTimeout = this.loadedSettings?.resolverTimeoutMs;
    return (await loadPolicyDirectory(path, resolverTimeout === undefined ? {} : { defaultResolverTimeoutMs: resolverTimeout })).policy;
  }

  databaseTemplates(): Promise<Array<{ versionId: string; permissions: string[] }>> {
    return this.services.databaseTemplates(this.io);
  }
}

