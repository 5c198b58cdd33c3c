'use strict';
/** Per-process CPU time and memory from /proc (Linux). Every reader returns null where /proc is missing. */
const { readFileSync } = require('node:fs');
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

/** cpuMicros of one pid, or summed over a list of pids (e.g. nginx's master and workers); null if any is unreadable. */
function cpuMicrosOf(pids) {
  let total = 0;
  for (const pid of [].concat(pids)) {
    const micros = cpuMicros(pid);
    if (micros === null) return null;
    total += micros;
  }
  return total;
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

module.exports = { cpuMicros, cpuMicrosOf, memoryKb, ticksPerSecond };
