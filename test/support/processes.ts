import { readFileSync } from 'node:fs';

/**
 * The kernel's state letter for `pid` (`/proc/<pid>/stat`: R, S, D, Z, X…), or 'gone' once it has been reaped.
 * A process that exited but was not reaped yet (Z, a zombie: its parent died or has not waited) still answers
 * `kill(pid, 0)`, so "has it exited?" is asked here, not there.
 */
export function processState(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return 'gone';
  }
}

/** Whether `pid` has exited: reaped, or a zombie (Z) or dead (X) waiting to be. */
export function hasExited(pid: number): boolean {
  return /^(gone|Z|X)$/.test(processState(pid));
}
