import { Worker } from 'node:worker_threads';

/**
 * Starts a worker thread running `program` (CommonJS source, `eval`, so it needs no build step) after it has
 * lowered the priority of its own thread by `nice`. On Linux `setpriority(PRIO_PROCESS, 0, …)` applies to the
 * calling thread only; elsewhere (macOS) it would renice the whole gateway, so it is skipped there. Used for
 * work that may wait while proxied requests should not: password hashing and the database.
 */
export function startLowPriorityWorker(program: string, nice: number, workerData: Record<string, unknown>): Worker {
  const lowerPriority = `
if (process.platform === 'linux' && ${Number(nice)} > 0) {
  try { require('node:os').setPriority(${Number(nice)}); } catch {}
}
`;
  return new Worker(lowerPriority + program, { eval: true, workerData });
}
