import { Worker } from 'node:worker_threads';

/** Linux's SCHED_IDLE policy number (`/proc/<pid>/task/<tid>/stat` field 41, sched(7)). */
export const SCHED_IDLE = 5;

/**
 * Starts a worker thread running `program` (CommonJS source, `eval`, so it needs no build step) after it has
 * lowered the priority of its own thread by `nice`. On Linux `setpriority(PRIO_PROCESS, 0, …)` applies to the
 * calling thread only; elsewhere (macOS) it would renice the whole gateway, so it is skipped there. Used for
 * work that may wait while proxied requests should not: password hashing and the database.
 *
 * The program also gets `lowPriority` (Linux; elsewhere its functions do nothing and answer false):
 * - `tid`: this thread's kernel id (null when unknown);
 * - `setIdle(idle)`: moves the thread to the SCHED_IDLE policy (sched(7): it runs only on CPU time no ordinary
 *   thread wants, and any ordinary thread that wakes up preempts it at once) or back to the ordinary policy, at
 *   its nice value. Node has no call for it, so this runs util-linux's `chrt` (`workerData.chrt`, default `chrt` on
 *   the PATH) on the thread; it answers whether the thread is SCHED_IDLE afterwards (false where `chrt` is missing
 *   or refused: the nice value still applies);
 * - `isIdle()`: whether the thread is SCHED_IDLE now.
 */
export function startLowPriorityWorker(program: string, nice: number, workerData: Record<string, unknown>): Worker {
  const lowerPriority = `
const lowPriority = (() => {
  const linux = process.platform === 'linux';
  if (linux && ${Number(nice)} > 0) {
    try { require('node:os').setPriority(${Number(nice)}); } catch {}
  }
  let tid = null;
  if (linux) {
    try { tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop()) || null; } catch {}
  }
  const isIdle = () => {
    if (tid === null) return false;
    try {
      const stat = require('node:fs').readFileSync('/proc/thread-self/stat', 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38]) === ${SCHED_IDLE};
    } catch { return false; }
  };
  const setIdle = (idle) => {
    if (tid === null) return false;
    try {
      require('node:child_process').execFileSync(require('node:worker_threads').workerData.chrt || 'chrt', [idle ? '--idle' : '--other', '-p', '0', String(tid)], { stdio: 'ignore', timeout: 5000 });
    } catch {}
    return isIdle();
  };
  return { tid, isIdle, setIdle };
})();
`;
  return new Worker(lowerPriority + program, { eval: true, workerData });
}
