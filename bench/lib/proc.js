'use strict';
/** Per-process CPU time and memory from /proc (Linux). Every reader returns null where /proc is missing. */
const { readdirSync, readFileSync } = require('node:fs');
const { execFileSync } = require('node:child_process');

let clockTicks = null;

/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat (100 almost everywhere). */
function ticksPerSecond() {
  if (clockTicks === null) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** utime + stime of the whole process (all threads), in microseconds; null when unavailable. */
function cpuMicros(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 2 (comm) may contain spaces and parentheses: the fields we want come after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1e6) / ticksPerSecond();
  } catch {
    return null;
  }
}

/** The pids of `pid`'s children, grandchildren… (/proc/<pid>/task/<tid>/children); [] when unavailable. */
function descendants(pid) {
  const out = [];
  let tasks;
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const task of tasks) {
    let children = '';
    try {
      children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const child of children.split(' ').filter(Boolean).map(Number)) out.push(child, ...descendants(child));
  }
  return out;
}

/**
 * utime + stime of `pid` and every process below it (a gateway started with `--workers N`: the primary and its
 * workers), in microseconds; null when the process itself is unreadable. A process that exits during the run takes
 * its CPU time with it.
 */
function cpuMicrosTree(pid) {
  const own = cpuMicros(pid);
  if (own === null) return null;
  return descendants(pid).reduce((sum, child) => sum + (cpuMicros(child) ?? 0), own);
}

/** { rssKb, hwmKb } from /proc/<pid>/status (VmRSS, VmHWM); null when unavailable. */
function memoryKb(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name) => {
      const line = status.split('\n').find((entry) => entry.startsWith(`${name}:`));
      return line ? Number.parseInt(line.slice(name.length + 1).trim(), 10) : null;
    };
    return { rssKb: field('VmRSS'), hwmKb: field('VmHWM') };
  } catch {
    return null;
  }
}

/** {@link memoryKb} summed over `pid` and its descendants (hwmKb: the sum of each process's own peak). */
function memoryKbTree(pid) {
  const own = memoryKb(pid);
  if (own === null) return null;
  return descendants(pid).reduce((sum, child) => {
    const memory = memoryKb(child);
    return memory === null ? sum : { rssKb: sum.rssKb + memory.rssKb, hwmKb: sum.hwmKb + memory.hwmKb };
  }, own);
}

module.exports = { cpuMicros, cpuMicrosTree, descendants, memoryKb, memoryKbTree, ticksPerSecond };
