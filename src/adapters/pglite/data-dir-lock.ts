import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** The lock file inside an embedded data directory. */
export const LOCK_FILE = 'iam-gateway.lock';

/** Thrown when another live process holds the data directory. */
export class DataDirectoryLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly holderPid: number,
  ) {
    super(`database.embedded-dir ${dir} is in use by another process (pid ${holderPid}, ${join(dir, LOCK_FILE)}): two processes cannot open one embedded database`);
    this.name = 'DataDirectoryLockedError';
  }
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  // This process is not holding it yet (a restarted container may get the pid of the previous one).
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Locks an embedded data directory for this process (#11.23): PGlite has no lock of its own, and two
 * processes writing one directory corrupt it. The lock is a file created exclusively with this pid; a lock
 * whose process is gone (a crash, SIGKILL) is taken over. Returns the release function.
 */
export function lockDataDirectory(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      let holder = Number.NaN;
      try {
        holder = Number.parseInt(readFileSync(path, 'utf8'), 10);
      } catch {
        // Removed or half-written meanwhile: judged on the next attempt.
      }
      if (isAlive(holder)) throw new DataDirectoryLockedError(dir, holder);
      if (Number.isNaN(holder) && attempt === 0) continue; // a holder may be writing its pid right now
      rmSync(path, { force: true });
      continue;
    }
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      try {
        if (Number.parseInt(readFileSync(path, 'utf8'), 10) === process.pid) rmSync(path, { force: true });
      } catch {
        // Already gone.
      }
    };
  }
  throw new Error(`database.embedded-dir ${dir}: could not take the lock ${path}`);
}
