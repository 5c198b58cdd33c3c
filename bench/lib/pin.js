'use strict';
/**
 * `--pin`: the proxy under test on one CPU, everything else on the others, as an independent measurement
 * does it (the proxy alone on one core; wrk and the upstream on the other). With `taskset` (util-linux):
 *
 * - every child started with role `proxy` (gateways, the baseline proxy, the bare forwarder, nginx) runs
 *   under `taskset -c <proxy CPU>`: all its threads (and any child it starts) stay on that CPU;
 * - the runner itself (autocannon, the login driver, the unloaded client all run in this process) is moved
 *   to the other CPUs with `taskset -a -p`, all its threads, before it starts anything, so the children with
 *   role `load` or none (upstream, database process, redis-server) inherit them;
 * - a gateway's embedded PGlite process is moved back to the load CPUs after the gateway starts: it is the
 *   database, not the proxy (the workers of `serve --workers N` stay with the gateway).
 *
 * Processes the bench did not start (a Redis or PostgreSQL server that was already running, other work on
 * the machine) are not moved: they run wherever the scheduler puts them, CPU 0 included.
 */
const { execFileSync, spawnSync } = require('node:child_process');
const { readFileSync, readdirSync } = require('node:fs');
const { setAffinity } = require('./children');

/** CPU numbers from a taskset list ("0,2-3"). */
function parseCpuList(text) {
  const cpus = [];
  for (const part of text.trim().split(',')) {
    const [from, to] = part.split('-').map(Number);
    for (let cpu = from; cpu <= (Number.isFinite(to) ? to : from); cpu++) cpus.push(cpu);
  }
  return cpus;
}

/** The CPUs this process may run on (`taskset -cp`), or null without taskset. */
function allowedCpus(pid = process.pid) {
  const found = spawnSync('taskset', ['-cp', String(pid)], { encoding: 'utf8' });
  if (found.status !== 0 || found.error) return null;
  const match = /list:\s*([0-9,\-\s]+)$/m.exec(found.stdout);
  return match ? parseCpuList(match[1]) : null;
}

/**
 * What `--pin` can do here: `{ ok: true, proxyCpus, loadCpus }` (taskset lists, e.g. '0' and '1'), or
 * `{ ok: false, reason }` when taskset is missing or fewer than 2 CPUs are allowed.
 */
function pinPlan() {
  if (process.platform !== 'linux') return { ok: false, reason: `not Linux (${process.platform})` };
  const cpus = allowedCpus();
  if (cpus === null) return { ok: false, reason: 'taskset (util-linux) not found' };
  if (cpus.length < 2) return { ok: false, reason: `only ${cpus.length} CPU allowed to this process (${cpus.join(',')})` };
  return { ok: true, proxyCpus: String(cpus[0]), loadCpus: cpus.slice(1).join(',') };
}

/** The direct children of `pid` (all its threads' children), from /proc. */
function childPids(pid) {
  const pids = [];
  let tasks = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return pids;
  }
  for (const tid of tasks) {
    try {
      pids.push(...readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
    } catch {
      // the thread ended meanwhile
    }
  }
  return pids;
}

/** Whether `pid` is a gateway's embedded PGlite process (src/adapters/pglite/embedded-database-process.ts). */
function isEmbeddedDatabase(pid) {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').some((entry) => entry.startsWith('IAM_PGLITE_SOCKET='));
  } catch {
    return false;
  }
}

/** Moves every thread of `pid` to `cpus`. */
function pinProcess(pid, cpus) {
  execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], { stdio: 'ignore' });
}

/**
 * Turns pinning on for this run: the runner moves to the load CPUs and children get their CPUs by role
 * (lib/children.js). Returns a description for the output and the results.
 */
function enablePinning(plan) {
  pinProcess(process.pid, plan.loadCpus);
  setAffinity({
    cpusFor: (role) => (role === 'proxy' ? plan.proxyCpus : plan.loadCpus),
    // A gateway's embedded database is moved to the load CPUs once the gateway is ready (its `--workers` stay).
    moveChildrenToLoad: (pid) => {
      for (const child of childPids(pid)) if (isEmbeddedDatabase(child)) pinProcess(child, plan.loadCpus);
    },
  });
  return { mode: 'pinned', proxyCpus: plan.proxyCpus, loadCpus: plan.loadCpus };
}

/** The CPUs a process (its first thread) may run on now, as a taskset list; for the record. */
function affinityOf(pid) {
  const cpus = allowedCpus(pid);
  return cpus === null ? null : cpus.join(',');
}

module.exports = { pinPlan, enablePinning, affinityOf, childPids, parseCpuList };
