'use strict';
/**
 * Child processes of a bench run: every one is registered here and killed at the end, on an error, on
 * Ctrl-C / SIGTERM, and (synchronously, SIGKILL) on any process exit. Children we wrote (upstream, baseline
 * proxy) also exit when their IPC channel closes; the gateway is preloaded with exit-with-parent.js.
 */
const { execFileSync, spawn } = require('node:child_process');
const { join } = require('node:path');

const ROOT = join(__dirname, '..', '..');
const EXIT_WITH_PARENT = join(__dirname, 'exit-with-parent.js');
const LOG_LINES_KEPT = 60;
const STOP_GRACE_MS = 8000;

const running = new Set();
const cleanups = new Set();
let handlersInstalled = false;
/** `--pin` (lib/pin.js): `{ cpusFor(role), moveChildrenToLoad(pid) }`, or null (the scheduler decides). */
let affinity = null;

/** Sets (or with null clears) the CPU placement of children started from now on; see lib/pin.js. */
function setAffinity(policy) {
  affinity = policy;
}

/** With `--pin`, moves the children that `pid` started (a gateway's embedded database) to the load CPUs. */
function moveChildrenToLoad(pid) {
  if (affinity) affinity.moveChildrenToLoad(pid);
}

/** Keeps the last lines a child wrote, to show when it fails. */
function captureLines(stream, into) {
  let partial = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop();
    for (const line of lines) {
      into.push(line);
      if (into.length > LOG_LINES_KEPT) into.shift();
    }
  });
}

/**
 * Spawns `node [nodeFlags] [preload] script args` with cwd = repository root. `ipc: true` opens an IPC channel and
 * resolves `ready` with the first `{ready: true, ...}` message; otherwise `ready` is the caller's to decide.
 * `role`: see spawnProcess.
 */
function spawnNode(name, script, args, { env = process.env, ipc = false, preloadExitWithParent = false, nodeFlags = [], role = null } = {}) {
  const nodeArgs = [...nodeFlags, ...(preloadExitWithParent ? ['-r', EXIT_WITH_PARENT] : []), script, ...args];
  const handle = spawnProcess(name, process.execPath, nodeArgs, { env, ipc, role });
  if (ipc) {
    handle.ready = new Promise((resolve, reject) => {
      handle.child.on('message', (message) => {
        if (message && message.ready) resolve(message);
      });
      handle.exited.then((code) => reject(new Error(`${name} exited (${code}) before it was ready:\n${handle.tail()}`)));
    });
  }
  return handle;
}

/**
 * Spawns any program (e.g. redis-server) as a registered child: stopped like the others, its output kept
 * for error messages. `parentDeathSignal` (Linux, util-linux `setpriv`): the kernel sends the child that
 * signal if this process dies without cleaning up (SIGKILL), for programs that cannot watch their parent.
 * `role`: `proxy` (a proxy under test) or `load` (upstream, databases); with `--pin` the child starts under
 * `taskset -c` on that role's CPUs (lib/pin.js), otherwise it is ignored. taskset and setpriv exec the
 * program, so `pid` is the program's own.
 */
function spawnProcess(name, command, args, { env = process.env, ipc = false, cwd = ROOT, parentDeathSignal = null, role = null } = {}) {
  installHandlers();
  const cpus = affinity && role ? affinity.cpusFor(role) : null;
  const [pinnedCommand, pinnedArgs] = cpus ? ['taskset', ['-c', cpus, command, ...args]] : [command, args];
  const [file, argv] = parentDeathSignal && hasSetpriv() ? ['setpriv', [`--pdeathsig=${parentDeathSignal}`, '--', pinnedCommand, ...pinnedArgs]] : [pinnedCommand, pinnedArgs];
  const child = spawn(file, argv, {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc'] : [])],
  });
  const logs = [];
  captureLines(child.stdout, logs);
  captureLines(child.stderr, logs);
  const handle = {
    name,
    child,
    pid: child.pid,
    logs,
    exitCode: undefined,
    exited: null,
    ready: null,
    /** Recent output, for error messages. */
    tail(lines = 20) {
      return logs.slice(-lines).join('\n');
    },
    stop: () => stopChild(handle),
  };
  handle.exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      handle.exitCode = code ?? signal;
      running.delete(handle);
      resolve(handle.exitCode);
    });
  });
  child.once('error', (error) => logs.push(`spawn error: ${error.message}`));
  running.add(handle);
  return handle;
}

let setprivFound = null;

/** Whether util-linux `setpriv` (with --pdeathsig) is on the PATH. */
function hasSetpriv() {
  if (setprivFound === null) {
    try {
      setprivFound = /--pdeathsig/.test(execFileSync('setpriv', ['--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    } catch {
      setprivFound = false;
    }
  }
  return setprivFound;
}

/** SIGTERM, then SIGKILL after a grace period; resolves when the child is gone. */
async function stopChild(handle) {
  if (handle.exitCode !== undefined) return;
  handle.child.kill('SIGTERM');
  let timer;
  const killed = new Promise((resolve) => {
    timer = setTimeout(() => {
      if (handle.exitCode === undefined) handle.child.kill('SIGKILL');
      resolve();
    }, STOP_GRACE_MS);
  });
  await Promise.race([handle.exited, killed]);
  clearTimeout(timer);
  await handle.exited;
}

/** Stops every child still running (in parallel). */
async function stopAll() {
  await Promise.all([...running].map((handle) => stopChild(handle)));
}

/**
 * Registers `fn` (async, idempotent: e.g. purging Redis keys, removing a temp dir) to run after the children
 * are stopped when the run is interrupted (Ctrl-C, SIGTERM). Returns a function that runs it once and
 * unregisters it, for the normal path (`finally`).
 */
function addCleanup(fn) {
  let done = false;
  const once = async () => {
    if (done) return;
    done = true;
    cleanups.delete(once);
    await fn();
  };
  cleanups.add(once);
  return once;
}

async function runCleanups() {
  for (const cleanup of [...cleanups]) await cleanup().catch((error) => process.stderr.write(`bench: cleanup failed: ${error.message}\n`));
}

function installHandlers() {
  if (handlersInstalled) return;
  handlersInstalled = true;
  // Last resort, synchronous: whatever is still running when this process exits is killed.
  process.on('exit', () => {
    for (const handle of running) handle.child.kill('SIGKILL');
  });
  let stopping = false;
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ]) {
    process.on(signal, () => {
      if (stopping) process.exit(code);
      stopping = true;
      process.stderr.write(`\nbench: ${signal}, stopping child processes and cleaning up...\n`);
      // Bounded: a cleanup that hangs (e.g. Redis gone) must not keep Ctrl-C from working.
      const deadline = new Promise((resolve) => setTimeout(resolve, 15_000).unref());
      Promise.race([stopAll().then(runCleanups), deadline]).finally(() => process.exit(code));
    });
  }
}

/**
 * The entry point of a bench script run directly: its exit code, or on an error the message (the stack
 * unless it is a usage error), every child stopped, and exit code 1 (2 for usage errors).
 */
function runMain(label, main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code ?? 0;
    },
    async (error) => {
      process.stderr.write(`${label}: ${error.usage ? error.message : error.stack || error.message}\n`);
      await stopAll();
      process.exitCode = error.usage ? 2 : 1;
    },
  );
}

module.exports = { ROOT, spawnNode, spawnProcess, stopAll, addCleanup, runMain, setAffinity, moveChildrenToLoad };
