import { ProvisioningError } from '../domain/iam-repository';
import { asksForHelp, UsageError, type CliCommand, type CliOutput } from './command-line';
import { packageVersion } from './version';
import { PidFileInUseError } from './pid-file';
import { ProvisioningFileError } from '../auth/provisioning-file';
import { ConfigError } from '../config';
import { scrubText } from '../observability/redaction';
import { terminalOutput } from '../observability/terminal-text';

const USAGE = `usage: iam-gateway <command> [options]

  serve [--pid-file FILE]     start the gateway (proxy on PORT, management on MANAGEMENT_PORT)
  migrate up|down|status      apply, roll back (one step) or list database migrations
  policy check [DIR]          validate and lint the policy files (--provision FILE: unknown permission codes)
  policy test [DIR]           run the policy test cases of DIR/tests/*.yaml; exit 1 on a failure
  policy explain METHOD PATH  show the route a request selects and what it asks for (--dir DIR)
  policy coverage --openapi FILE  list host operations no route covers (--dir DIR, --fail-on-uncovered)
  policy diff OLD_DIR NEW_DIR  compare two policies route by route; exit 1 when anything is wider
  policy replay NEW_DIR       decide recorded requests (--access-log FILE, --since DURATION) again with NEW_DIR
  provision FILE [--overwrite]  create what a provisioning file describes and the database lacks;
                              --overwrite also updates existing objects to match (audited, actor provisioning)
  tokens purge                delete every token-store key under iam.token.store-prefix
  oidc test-claims FILE       evaluate iam.oidc.allowed and iam.oidc.profiles against an ID token's claims (--config FILE)
  audit purge [--older-than DURATION]  delete audit events older than DURATION (default iam.audit.retention)
  hash-password [PASSWORD]    print an argon2id hash for a users file (reads stdin when no argument)
  version                     print the version (also --version, -v)

\`iam-gateway <command> --help\` shows a command's options. In a project that installed the package, run it as
\`npx --no-install iam-gateway <command>\` (without --no-install, npx may fetch another package of that name).
Configuration: IAM_CONFIG (default config/default.yaml) plus environment overrides; see docs/configuration.md.`;

/**
 * Each command's module is loaded when the command runs: `policy diff` in CI should not pay for loading the
 * ORM, the HTTP stack and the telemetry SDK that `serve` needs.
 */
const COMMANDS: Record<string, () => Promise<CliCommand>> = {
  serve: async () => (await import('./serve')).serveCommand,
  migrate: async () => (await import('./migrate')).migrateCommand,
  // `policy` hands its arguments to the policy tools, which answer their own --help and usage errors.
  policy: async () => {
    const [{ runPolicyCommand }, { POLICY_USAGE }] = await Promise.all([import('./policy-command'), import('../policy-tools/policy-command')]);
    return {
      usage: POLICY_USAGE,
      handlesHelp: true,
      run: (args, output) => runPolicyCommand(args, { ...output, env: process.env, cwd: process.cwd(), stdin: process.stdin }),
    };
  },
  provision: async () => (await import('./provision')).provisionCommand,
  tokens: async () => (await import('./tokens')).tokensCommand,
  audit: async () => (await import('./audit')).auditCommand,
  'hash-password': async () => (await import('./hash-password')).hashPasswordCommand,
  oidc: async () => (await import('./oidc')).oidcCommand,
};

/** The CLI; resolves the process exit code (0 done, 1 failed, 2 usage error). */
export async function main(argv: string[]): Promise<number> {
  // Everything the CLI prints leaves through these two: what it shows from a log, a file or an error cannot steer
  // the terminal (docs/cli.md, "Output").
  const output: CliOutput = { stdout: terminalOutput(process.stdout), stderr: terminalOutput(process.stderr) };
  const { stdout, stderr } = output;
  const [name, ...rest] = argv;
  switch (name) {
    case undefined:
      stderr.write(`${USAGE}\n`);
      return 2;
    case 'help':
    case '--help':
    case '-h':
      stdout.write(`${USAGE}\n`);
      return 0;
    case 'version':
    case '--version':
    case '-v':
      stdout.write(`${packageVersion()}\n`);
      return 0;
  }
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (load === undefined) {
    stderr.write(`iam-gateway: unknown ${name.startsWith('-') ? 'option' : 'command'} "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  const command = await load();
  if (!command.handlesHelp && asksForHelp(rest)) {
    stdout.write(`${command.usage}\n`);
    return 0;
  }
  try {
    return await command.run(rest, output);
  } catch (error) {
    if (error instanceof UsageError) {
      stderr.write(`iam-gateway ${name}: ${error.message}\n\n${error.usage}\n`);
      return 2;
    }
    // Refused like a command line (exit 2): nothing was started, the one already running stays.
    if (error instanceof PidFileInUseError) {
      stderr.write(`iam-gateway ${name}: ${error.message}\n`);
      return 2;
    }
    // A failed start's message may carry what the failing library saw (a URL with its password, a token from a
    // file): it goes through the same redaction layer as the log.
    if (error instanceof ProvisioningError) {
      stderr.write(scrubText(`iam-gateway: ${error.message}\n${error.problems.map((p) => `  ${p.pointer}: ${p.message}\n`).join('')}`));
      return 1;
    }
    if (error instanceof ConfigError || error instanceof ProvisioningFileError) {
      stderr.write(scrubText(`iam-gateway: ${error.message}\n`));
      return 1;
    }
    stderr.write(scrubText(`iam-gateway: ${error instanceof Error ? error.message : String(error)}\n`));
    return 1;
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
