import { parseArgs } from 'node:util';
import type { TextOutput } from '../observability/terminal-text';

/** A command line the command refuses: `main` prints the message and the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

/**
 * Where a command prints: main's standard output and error, through the one filter that shows control characters
 * escaped (src/observability/terminal-text.ts). A command never writes to `process.stdout` itself.
 */
export interface CliOutput {
  stdout: TextOutput;
  stderr: TextOutput;
}

/** One `iam-gateway` command: its usage text (printed for `--help`/`-h` and with a usage error) and its run. */
export interface CliCommand {
  readonly usage: string;
  /** The command answers `--help` itself (`policy`: one usage per subcommand); otherwise main prints `usage`. */
  readonly handlesHelp?: boolean;
  /** Resolves the exit code; throws UsageError for a command line it refuses. */
  run(args: string[], output: CliOutput): Promise<number>;
}

/** True when `--help` or `-h` comes before any `--` (after `--`, everything is an argument). */
export function asksForHelp(args: readonly string[]): boolean {
  for (const arg of args) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

type OptionSpec = Record<string, { type: 'string' | 'boolean' }>;
type Values<T extends OptionSpec> = { [K in keyof T]?: T[K]['type'] extends 'string' ? string : boolean };

/**
 * Parses `args` strictly: an option not in `options`, a string option without its value, or more than
 * `maxPositionals` arguments is a UsageError carrying `usage`.
 */
export function parseCommandLine<T extends OptionSpec>(args: string[], usage: string, options: T, maxPositionals: number): { positionals: string[]; values: Values<T> } {
  let parsed: { positionals: string[]; values: Record<string, unknown> };
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message, usage);
  }
  if (parsed.positionals.length > maxPositionals) throw new UsageError(`unexpected argument "${parsed.positionals[maxPositionals]}"`, usage);
  return { positionals: parsed.positionals, values: parsed.values as Values<T> };
}
