import { readdirSync, readFileSync } from 'node:fs';

/**
 * Field `index` (counted after the command name: 16 is field 19, nice) of `/proc/self/task/<tid>/stat` for every
 * thread of this process, main thread first; -1 for a thread that ended meanwhile.
 */
function threadStatField(index: number): number[] {
  // The main thread's tid is the process id; thread ids are not ordered once pids wrap around (pid_max).
  const main = String(process.pid);
  const tids = readdirSync('/proc/self/task').sort((a, b) => (a === main ? -1 : b === main ? 1 : Number(a) - Number(b)));
  return tids.map((tid) => {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[index]);
    } catch {
      return -1;
    }
  });
}

/**
 * The nice value of every thread of this process, main thread first (Linux: `/proc/self/task/<tid>/stat`,
 * field 19). For tests of the threads that lower their own priority.
 */
export function threadNiceValues(): number[] {
  return threadStatField(16);
}

/** The scheduling policy of every thread of this process, main thread first (field 41; 0 ordinary, 5 SCHED_IDLE). */
export function threadPolicies(): number[] {
  return threadStatField(38);
}
