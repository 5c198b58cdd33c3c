import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';

/** `serve --pid-file FILE` refused: FILE names a gateway that still runs. */
export class PidFileInUseError extends Error {
  constructor(
    readonly file: string,
    readonly holderPid: number,
  ) {
    super(`--pid-file ${file}: the gateway with pid ${holderPid} is still running (stop it first: kill $(cat ${file}))`);
    this.name = 'PidFileInUseError';
  }
}

/** The pid a pid file names, or null (missing, empty, not a number). */
export function readPidFile(file: string): number | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const pid = Number.parseInt(text.trim(), 10);
  return Number.isInteger(pid) && pid > 0 && String(pid) === text.trim() ? pid : null;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    // A zombie (exited, not reaped yet) holds nothing.
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

/**
 * Whether `pid` is a running iam-gateway: its command line names the package (bin/iam-gateway.js, or a path inside
 * an `iam-gateway` directory). Where /proc cannot tell (not Linux, another user's process), a live pid counts as one:
 * refusing a start is recoverable, two gateways on one data directory are not.
 */
function isRunningGateway(pid: number): boolean {
  if (!isAlive(pid)) return false;
  let commandLine: string;
  try {
    commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return true;
  }
  return commandLine.includes('iam-gateway');
}

/**
 * The pid file of `serve --pid-file FILE` (docs/cli.md): checked before anything is opened, written once the
 * gateway listens, removed at a clean stop.
 */
export interface PidFile {
  /** Writes this process's pid (atomically: a reader never sees a half-written file). */
  write(): void;
  /** Removes the file if it still names this process. */
  remove(): void;
}

/**
 * Claims FILE for this process: throws {@link PidFileInUseError} when it names another running gateway; a file
 * naming a process that is gone, or one that is not a gateway (the pid was reused), is stale and is overwritten later.
 */
export function claimPidFile(file: string): PidFile {
  const holder = readPidFile(file);
  if (holder !== null && holder !== process.pid && isRunningGateway(holder)) throw new PidFileInUseError(file, holder);
  return {
    write() {
      const partial = join(dirname(file), `.${basename(file)}.${process.pid}`);
      writeFileSync(partial, `${process.pid}\n`, { mode: 0o644 });
      renameSync(partial, file);
    },
    remove() {
      if (readPidFile(file) === process.pid) rmSync(file, { force: true });
    },
  };
}
