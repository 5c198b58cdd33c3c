import { readdirSync, readFileSync } from 'node:fs';

/**
 * The nice value of every thread of this process, main thread first (Linux: `/proc/self/task/<tid>/stat`,
 * field 19). For tests of the threads that lower their own priority.
 */
export function threadNiceValues(): number[] {
  // The main thread's tid is the process id; thread ids are not ordered once pids wrap around (pid_max).
  const main = String(process.pid);
  const tids = readdirSync('/proc/self/task').sort((a, b) => (a === main ? -1 : b === main ? 1 : Number(a) - Number(b)));
  return tids.map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
}

/** The scheduling policy of every thread of this process, main thread first (field 41; 0 ordinary, 5 SCHED_IDLE). */
export function threadPolicies(): number[] {
  const main = String(process.pid);
  const tids = readdirSync('/proc/self/task').sort((a, b) => (a === main ? -1 : b === main ? 1 : Number(a) - Number(b)));
  return tids.map((tid) => {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38]);
    } catch {
      return -1; // the thread ended meanwhile
    }
  });
}
