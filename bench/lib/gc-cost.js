#!/usr/bin/env node
'use strict';
/**
 * What the garbage collector costs per proxied request, with V8's allocation-site pretenuring as the gateway runs
 * it (off: bin/iam-gateway.js turns it off) and as V8 ships it (`node --allocation-site-pretenuring`), in
 * alternating rounds. Each round starts a fresh gateway (warm session cache, alice's token on the benchmarked route)
 * with `--trace-gc-nvp`, warms it up, then measures: req/s, CPU µs per request, scavenge pause µs per request, bytes
 * the scavenges promote to the old generation per request, and mark-compact pause µs per request.
 *
 * Why fresh processes: pretenuring decides per allocation site, from what survived the scavenges so far, and keeps
 * its decision for the life of the process. Under load it can decide that a per-request site is long-lived; the
 * site then allocates in the old generation, everything young it points to survives each scavenge, and the process
 * stays in that state. Whether a process falls into it depends on timing (seen in most starts on a loaded 2-vCPU VM,
 * in none on a quiet one), so only several starts of each kind tell.
 *
 * Usage: node bench/lib/gc-cost.js [--rounds N] [--duration S]   (also: npm run bench -- --gc)
 */
const os = require('node:os');
const { numberFlag } = require('./args');
const { runMain } = require('./children');
const { startGatewayProcess } = require('./gateway');
const { login } = require('./http');
const { measure } = require('./load');
const { BENCH_PATH } = require('./policy');
const { benchWorkspace } = require('./workspace');
const { resolveRedis } = require('./redis');
const { fmt, fmtInt, table } = require('./report');
const { startUpstream } = require('./services');
const { median } = require('./stats');

const log = (message) => process.stdout.write(`${message}\n`);

const MODES = [
  { key: 'off', label: 'pretenuring off (the gateway)', nodeFlags: [] },
  { key: 'v8', label: 'pretenuring on (V8 default)', nodeFlags: ['--allocation-site-pretenuring'] },
];

/** Sums of the scavenge and mark-compact lines `--trace-gc-nvp` printed (`gc=s` / `gc=mc`, name=value pairs). */
function gcTotals(lines) {
  const totals = { scavengeMs: 0, promotedBytes: 0, markCompactMs: 0 };
  for (const line of lines) {
    const pause = /\bpause=([\d.]+)/.exec(line);
    if (pause === null) continue;
    if (/\bgc=s\b/.test(line)) {
      totals.scavengeMs += Number(pause[1]);
      const promoted = /\bpromoted=(\d+)/.exec(line);
      if (promoted !== null) totals.promotedBytes += Number(promoted[1]);
    } else if (/\bgc=mc\b/.test(line)) {
      totals.markCompactMs += Number(pause[1]);
    }
  }
  return totals;
}

/** One round of one mode: a fresh gateway, warmed up, measured; its GC lines are read from the measured run only. */
async function measureMode(mode, common, durationS) {
  const gateway = await startGatewayProcess({ ...common, name: `gateway-gc-${mode.key}`, nodeFlags: [...mode.nodeFlags, '--trace-gc-nvp'] });
  try {
    const headers = { authorization: `Bearer ${(await login(gateway.url, 'alice', 'alice-password')).accessToken}` };
    let lines = null;
    let partial = '';
    gateway.child.stdout.on('data', (chunk) => {
      if (lines === null) return;
      const split = (partial + chunk).split('\n');
      partial = split.pop();
      lines.push(...split.filter((line) => line.includes('gc=')));
    });
    const result = await measure({
      url: `${gateway.url}${BENCH_PATH}`,
      connections: 50,
      durationS,
      warmupS: 3,
      headers,
      watch: { gateway: gateway.pid },
      hooks: { before: () => (lines = []), after: () => gcTotals(lines ?? []) },
    });
    if (result.non2xx > 0) throw new Error(`${gateway.name}: ${result.non2xx} answers were not 2xx`);
    const gc = result.hook;
    const perRequest = (value) => value / Math.max(1, result.requests);
    return {
      rps: result.rps,
      cpu: result.cpuMicrosPerRequest.gateway,
      scavengeUs: perRequest(gc.scavengeMs * 1000),
      promotedBytes: perRequest(gc.promotedBytes),
      markCompactUs: perRequest(gc.markCompactMs * 1000),
    };
  } finally {
    await gateway.stop();
  }
}

async function main(argv = []) {
  const rounds = numberFlag(argv, '--rounds', 4);
  const durationS = numberFlag(argv, '--duration', 6);
  const redis = process.env.REDIS_URL ? await resolveRedis() : { url: null };
  const workspace = benchWorkspace('gc', redis.url);
  const { policyDir, prefix } = workspace;
  try {
    const upstream = await startUpstream();
    const common = { upstreamUrl: upstream.url, policyDir, redisUrl: redis.url, prefix };
    log(`gateway warm on ${BENCH_PATH} (50 connections, ${durationS} s runs after 3 s of warm-up), a fresh process per run, ${rounds} alternating rounds; token store: ${redis.url ? 'Redis' : 'in-process'}; ${os.cpus().length} cpus\n`);
    const runs = Object.fromEntries(MODES.map((mode) => [mode.key, []]));
    for (let round = 0; round < rounds; round++) {
      for (const mode of round % 2 === 0 ? MODES : [...MODES].reverse()) {
        const run = await measureMode(mode, common, durationS);
        runs[mode.key].push(run);
        log(`  round ${round + 1}/${rounds}  ${mode.label.padEnd(30)}  ${fmtInt(run.rps)} req/s  cpu ${fmt(run.cpu, 1)} µs/req  scavenge ${fmt(run.scavengeUs, 2)} µs/req  promoted ${fmtInt(run.promotedBytes)} B/req  mark-compact ${fmt(run.markCompactUs, 2)} µs/req`);
      }
    }
    const rows = MODES.map((mode) => {
      const of = (field) => median(runs[mode.key].map((run) => run[field]));
      return [mode.label, fmtInt(of('rps')), fmt(of('cpu'), 1), fmt(of('scavengeUs'), 2), fmtInt(of('promotedBytes')), fmt(of('markCompactUs'), 2)];
    });
    log(`\nmedians over ${rounds} rounds:\n`);
    log(table(['gateway', 'req/s', 'cpu µs/req', 'scavenge µs/req', 'promoted B/req', 'mark-compact µs/req'], rows));
    return 0;
  } finally {
    await workspace.close();
  }
}

if (require.main === module) runMain('bench gc', main);

module.exports = { main };
