import { closeSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The lock file inside an embedded data directory: the gateway's pid, then its database process's pid. */
export const LOCK_FILE = 'iam-gateway.lock';

/**
 * How long a new holder waits for the database process of a gateway that is gone (SIGKILL, a crash) to finish:
 * that process notices its parent's end and closes the database, writing to the directory as it does.
 */
export const ORPHAN_WAIT_MS = 15_000;

/** Thrown when another live process holds the data directory. */
export class DataDirectoryLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly holderPid: number,
    detail = 'two processes cannot open one embedded database',
  ) {
    super(`database.embedded-dir ${dir} is in use by another process (pid ${holderPid}, ${join(dir, LOCK_FILE)}): ${detail}`);
    this.name = 'DataDirectoryLockedError';
  }
}

/** The lock this process holds on a data directory. */
export interface DataDirectoryLock {
  /**
   * Records the embedded database process opened on the directory: the lock then stands while either process
   * lives, so a gateway started after this one was killed cannot open the directory while that database process
   * still writes it.
   */
  adopt(pid: number): void;
  /** Removes the lock file, if it is still this process's. */
  release(): void;
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  // This process is not holding it yet (a restarted container may get the pid of the previous one).
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

/** A process that has exited but not been reaped (an orphan whose new parent does not wait for it) holds nothing. */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false;
  }
}

/** The pids a lock file names (gateway first); empty when it is unreadable or being written. */
function holdersOf(path: string): number[] {
  try {
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => Number.parseInt(line, 10));
  } catch {
    return [];
  }
}

/**
 * Locks an embedded data directory for this process (#11.23): PGlite has no lock of its own, and two
 * processes writing one directory corrupt it. The lock is a file created exclusively with this pid (and, once
 * started, the database process's: {@link DataDirectoryLock.adopt}). A lock whose gateway is gone is taken over,
 * after its database process, if still running, has exited (waiting up to `orphanWaitMs`); a live holder is
 * refused with {@link DataDirectoryLockedError}.
 */
export async function lockDataDirectory(dir: string, orphanWaitMs = ORPHAN_WAIT_MS): Promise<DataDirectoryLock> {
  const path = join(dir, LOCK_FILE);
  const deadline = Date.now() + orphanWaitMs;
  let takeovers = 0;
  while (takeovers < 3) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const [gateway = Number.NaN, ...databases] = holdersOf(path);
      if (isAlive(gateway)) throw new DataDirectoryLockedError(dir, gateway);
      const database = databases.find(isAlive);
      if (database !== undefined) {
        if (Date.now() >= deadline) {
          throw new DataDirectoryLockedError(
            dir,
            database,
            `the embedded database of a gateway that is gone (pid ${gateway}) still runs after ${orphanWaitMs} ms; stop it, or remove the lock file if pid ${database} is something else`,
          );
        }
        await sleep(50);
        continue;
      }
      takeovers++;
      // A holder may be writing its pid right now: judged again once.
      if (Number.isNaN(gateway) && takeovers === 1) {
        await sleep(20);
        continue;
      }
      rmSync(path, { force: true });
      continue;
    }
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    return heldLock(path);
  }
  throw new Error(`database.embedded-dir ${dir}: could not take the lock ${path}`);
}

function heldLock(path: string): DataDirectoryLock {
  let released = false;
  const ours = (): boolean => holdersOf(path)[0] === process.pid;
  return {
    adopt(pid) {
      if (!released && ours()) writeFileSync(path, `${process.pid}\n${pid}\n`, { mode: 0o600 });
    },
    release() {
      if (released) return;
      released = true;
      if (ours()) rmSync(path, { force: true });
    },
  };
}
