'use strict';
/**
 * Preloaded (`node -r`) into every bench child we do not own the code of (the gateway): if the bench runner
 * dies without cleaning up (SIGKILL, OOM), the child notices that its parent changed and stops itself, so no
 * gateway keeps ports and Redis connections open after a crashed run. Costs one unref'd 500 ms timer.
 */
const parent = process.ppid;
let signalled = 0;
const timer = setInterval(() => {
  if (process.ppid === parent) return;
  signalled++;
  // First a graceful SIGTERM (the gateway closes its listeners); if it is still alive 10 s later, SIGKILL.
  if (signalled === 1) process.kill(process.pid, 'SIGTERM');
  else if (signalled > 20) process.kill(process.pid, 'SIGKILL');
}, 500);
timer.unref();
