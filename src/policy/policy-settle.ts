import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isPolicyFileName } from './load-policy-directory';

/**
 * What a policy directory looks like to `stat`: every policy file's size, modification time and inode
 * (symlinks followed), and the newest modification time. Two equal signatures taken a settle window apart,
 * with the newest change older than that window, mean no writer was active in between (#11.19).
 */
interface DirectorySignature {
  key: string;
  newestMtimeMs: number;
}

async function signature(dir: string): Promise<DirectorySignature> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter(isPolicyFileName).sort();
  } catch (error) {
    return { key: `unreadable:${(error as NodeJS.ErrnoException).code ?? 'error'}`, newestMtimeMs: 0 };
  }
  const parts: string[] = [];
  let newestMtimeMs = 0;
  for (const name of names) {
    try {
      const info = await stat(join(dir, name));
      parts.push(`${name}:${info.size}:${info.mtimeMs}:${info.ino}`);
      newestMtimeMs = Math.max(newestMtimeMs, info.mtimeMs);
    } catch (error) {
      parts.push(`${name}:${(error as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  }
  return { key: parts.join('\u0000'), newestMtimeMs };
}

/**
 * Waits until the policy files of `dir` have settled: the same size, modification time and inode across a
 * pause of `windowMs`, and no file modified within the last `windowMs`. A file written in several steps
 * (an editor's save, `cat > file`, a slow copy) is then read whole, never half. Size catches writes on file
 * systems with coarse timestamps; the mtime age catches a writer that pauses between two `stat`s. Bounded:
 * after `maxWaitMs` (a clock far off, a writer that never stops) the caller reads what is there.
 * Returns true when the directory settled, false when the bound (or `stopped()`) ended the wait.
 */
export async function waitUntilSettled(dir: string, windowMs: number, options: { maxWaitMs?: number; stopped?: () => boolean } = {}): Promise<boolean> {
  if (windowMs <= 0) return true;
  const deadline = Date.now() + (options.maxWaitMs ?? Math.max(20 * windowMs, 5000));
  let previous = await signature(dir);
  for (;;) {
    const age = Date.now() - previous.newestMtimeMs;
    // At least one full window between two looks; longer when the newest change is more recent than that.
    await pause(Math.min(Math.max(windowMs, windowMs - age), Math.max(deadline - Date.now(), 0)));
    const current = await signature(dir);
    if (current.key === previous.key && Date.now() - current.newestMtimeMs >= windowMs) return true;
    if (Date.now() >= deadline || options.stopped?.()) return false;
    previous = current;
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
