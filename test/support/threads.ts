import { readdirSync, readFileSync } from 'node:fs';

/**
 * The nice value of every thread of this process, main thread first (Linux: `/proc/self/task/<tid>/stat`,
 * field 19). For tests of the threads that lower their own priority.
 */
export function threadNiceValues(): number[] {
  const tids = readdirSync('/proc/self/task').sort((a, b) => Number(a) - Number(b));
  return tids.map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
}
