'use strict';
/**
 * The targets of bench/run.js: issue #18's table ("Performance, second round"), every row computed from one
 * run, plus the two earlier targets the table does not restate. A row the run could not measure says why
 * ("not measured") instead of passing or failing.
 *
 * Inputs from other parts of the run, when present (hooks, so that scenarios can be added without touching
 * this file's callers):
 * - `forwardAuth`: `{ decisionsPerSecond, vsInline?, vsInlinePerRound?, cpuMicrosPerDecision?, unloadedP50Ms,
 *   unloadedP50OverDirectMs? }`: forward-auth decisions/s under the same load as the inline gateway (GET
 *   /iam/authorization/forward-auth straight to gateway warm, lib/forward-auth-target.js), the median of each round's
 *   decisions/s ÷ inline req/s, and the unloaded median, ms;
 * - `workers`: `{ rps1, rps2, cpuMicrosPerRequest1, cpuMicrosPerRequest2, perRound?, freeCores }`: `serve --workers 2`
 *   against one worker, same load; `freeCores` = cores left to the gateway besides the load generator and upstream;
 *   or `{ skipped: reason }` when the run could not measure it.
 */
const { fmt } = require('./report');
const { ratio, round } = require('./stats');

const notMeasured = (why) => ({ measured: null, pass: null, note: `not measured: ${why}` });

/**
 * Rows `{ key, measure, before, target, measured, pass, note }`; `pass` is true/false, or null when the row has
 * no verdict (not measured, or "measured and explained").
 */
function computeTargets({ rows, rounds, loginLoad, unloadedAddedMs, pinned, quick, forwardAuth = null, workers = null }) {
  const floor = rows.floor ?? null;
  const warm = rows.warm;
  const out = [];
  const add = (key, measure, before, target, result) => out.push({ key, measure, before, target, ...result });
  const atLeast = (value, min) => (Number.isFinite(value) ? { measured: round(value), pass: value >= min } : notMeasured('no value'));
  const atMost = (value, max) => (Number.isFinite(value) ? { measured: round(value), pass: value <= max } : notMeasured('no value'));

  add('warmVsFloorRps', 'inline, warm, req/s ÷ bare forwarder (same stack, no auth)', '0.84', '≥ 0.90', floor ? atLeast(ratio(warm.rps, floor.rps), 0.9) : notMeasured('run without the bare forwarder (--no-floor)'));
  add('warmVsFloorCpu', 'inline, warm, CPU µs per request ÷ bare forwarder\'s', '1.20', '≤ 1.10', floor ? atMost(ratio(warm.cpuMicrosPerRequest, floor.cpuMicrosPerRequest), 1.1) : notMeasured('run without the bare forwarder (--no-floor)'));
  // Not a target of the issue: what the two rows above are made of. The same forwarder sending the headers the
  // contract requires (lib/bare-forwarder.js --contract) against the gateway, and against the bare forwarder.
  const contractFloor = rows.contractFloor ?? null;
  if (contractFloor && floor) {
    add('warmVsContractFloorRps', 'inline, warm, req/s ÷ forwarder sending the contract\'s headers (no auth)', 'not measured', 'measured and explained', {
      measured: round(ratio(warm.rps, contractFloor.rps)),
      pass: null,
      note: `cpu µs/req ÷ ${fmt(ratio(warm.cpuMicrosPerRequest, contractFloor.cpuMicrosPerRequest))}; the headers alone: req/s ÷ ${fmt(ratio(contractFloor.rps, floor.rps))}, cpu ÷ ${fmt(ratio(contractFloor.cpuMicrosPerRequest, floor.cpuMicrosPerRequest))} against the bare forwarder`,
    });
  } else add('warmVsContractFloorRps', 'inline, warm, req/s ÷ forwarder sending the contract\'s headers (no auth)', 'not measured', 'measured and explained', notMeasured('run without the bare forwarder (--no-floor)'));

  const perRound = rounds.map((entry) => ratio(entry.results.warm.rps, entry.results.baseline.rps)).filter(Number.isFinite);
  const vsBaseline = atLeast(warm.rpsVsBaseline, 1.3);
  vsBaseline.note = `rounds ${perRound.map((value) => fmt(value)).join(', ')}${quick ? '; quick run: the target is for full runs' : ''}`;
  add('warmVsBaselineRps', 'inline, warm, req/s ÷ http-proxy 1.18.1', '1.35 (quick runs 0.98–1.20)', '≥ 1.3 in every full run', vsBaseline);
  const p99 = atMost(warm.p99VsBaseline, 1.0);
  p99.note = pinned ? 'pinned mode' : 'unpinned mode';
  add('warmVsBaselineP99', 'inline, warm, p99 ÷ http-proxy\'s', '0.81 (bench); 1.23 pinned', '≤ 1.0 in both modes', p99);
  add('coldVsWarmRps', 'inline, cold (Redis) ÷ warm', '0.81', '≥ 0.9', rows.cold ? atLeast(ratio(rows.cold.rps, warm.rps), 0.9) : notMeasured('no cold gateway'));

  if (forwardAuth && Number.isFinite(forwardAuth.decisionsPerSecond)) {
    // The median of per-round ratios when given (each round's two runs on the same gateway), else the ratio of medians.
    const decisions = atLeast(forwardAuth.vsInline ?? ratio(forwardAuth.decisionsPerSecond, warm.rps), 2.0);
    decisions.note = `${Math.round(forwardAuth.decisionsPerSecond)} decisions/s${forwardAuth.vsInlinePerRound ? `; rounds ${forwardAuth.vsInlinePerRound.map((value) => fmt(value)).join(', ')}` : ''}${Number.isFinite(forwardAuth.cpuMicrosPerDecision) ? `; cpu ${fmt(forwardAuth.cpuMicrosPerDecision, 1)} µs/decision vs ${fmt(warm.cpuMicrosPerRequest, 1)} µs/inline request` : ''}`;
    add('forwardAuthVsWarm', 'forward-auth decisions/s ÷ inline warm req/s', 'not measured', '≥ 2.0', decisions);
  }
  else add('forwardAuthVsWarm', 'forward-auth decisions/s ÷ inline warm req/s', 'not measured', '≥ 2.0', notMeasured('left out (--no-forward-auth)'));
  if (forwardAuth && Number.isFinite(forwardAuth.unloadedP50Ms)) {
    const unloaded = atMost(forwardAuth.unloadedP50Ms, 0.15);
    if (Number.isFinite(forwardAuth.unloadedP50OverDirectMs)) unloaded.note = `${fmt(forwardAuth.unloadedP50OverDirectMs, 4)} ms over the upstream asked directly`;
    add('forwardAuthUnloadedP50', 'forward-auth unloaded p50 (ms)', 'not measured', '≤ 0.15 ms', unloaded);
  }
  else add('forwardAuthUnloadedP50', 'forward-auth unloaded p50 (ms)', 'not measured', '≤ 0.15 ms', notMeasured('left out (--no-forward-auth)'));

  if (rows.nginx) {
    const nginx = rows.nginx;
    add('nginxVsWarm', 'nginx (auth_request → forward-auth) req/s ÷ inline gateway', 'not measured', 'measured and explained', {
      measured: round(ratio(nginx.rps, warm.rps)),
      pass: null,
      note: `cpu µs/req: nginx ${fmt(nginx.cpuParts?.nginx, 1)} + gateway ${fmt(nginx.cpuParts?.gateway, 1)} = ${fmt(nginx.cpuMicrosPerRequest, 1)} vs inline ${fmt(warm.cpuMicrosPerRequest, 1)}; p99 ${fmt(nginx.p99)} vs ${fmt(warm.p99)} ms`,
    });
  } else {
    add('nginxVsWarm', 'nginx (auth_request → forward-auth) req/s ÷ inline gateway', 'not measured', 'measured and explained', notMeasured('no nginx in this run (--no-nginx, or nginx missing)'));
  }

  const logins = loginLoad ? atMost(loginLoad.p99Ratio, 1.5) : notMeasured('no login phase');
  if (loginLoad) {
    const reached = loginLoad.logins.map((entry) => entry.ratePerSecond);
    logins.note = `p99 ${fmt(loginLoad.p99WithoutMs)} → ${fmt(loginLoad.p99WithMs)} ms; ${reached.map((rate) => fmt(rate, 1)).join(', ')} logins/s reached`;
    // Fewer logins than asked for (a machine too busy to serve them) make the ratio look better than it is: no verdict.
    if (reached.some((rate) => !(rate >= 0.9 * loginLoad.loginsPerSecondTarget))) {
      logins.pass = null;
      logins.note += `, below 90% of ${loginLoad.loginsPerSecondTarget}: no verdict`;
    }
  }
  add('loginP99', `proxied p99 with ${loginLoad?.loginsPerSecondTarget ?? 20} logins/s ÷ without`, '1.87', '≤ 1.5', logins);
  // Not a target of the issue: the same logins with idle CPU left (an open-loop load at half the saturated req/s).
  const open = loginLoad?.openLoop ?? null;
  if (open) {
    const reached = open.logins.map((entry) => entry.ratePerSecond);
    add('loginP99OpenLoop', `proxied p99 with ${loginLoad.loginsPerSecondTarget} logins/s ÷ without, open loop at ${Math.round(open.share * 100)}% of the saturated req/s`, 'not measured', 'measured and explained', {
      measured: round(open.p99Ratio),
      pass: null,
      note: `${Math.round(open.requestsPerSecond)} req/s; p99 ${fmt(open.p99WithoutMs)} → ${fmt(open.p99WithMs)} ms; ${reached.map((rate) => fmt(rate, 1)).join(', ')} logins/s reached`,
    });
  }

  if (workers && Number.isFinite(workers.rps1) && Number.isFinite(workers.rps2)) {
    const scaling = ratio(workers.rps2, workers.rps1);
    const cpuRises = Number.isFinite(workers.cpuMicrosPerRequest1) && workers.cpuMicrosPerRequest2 > workers.cpuMicrosPerRequest1 * 1.05;
    const judged = workers.freeCores >= 2;
    add('workers2Vs1', '`--workers 2` req/s ÷ 1 worker (CPU µs/request must not rise)', 'none', 'reported; ≥ 1.6 where 2 free cores exist', {
      measured: round(scaling),
      pass: cpuRises ? false : judged ? scaling >= 1.6 : null,
      note:
        `cpu µs/req ${fmt(workers.cpuMicrosPerRequest1, 1)} → ${fmt(workers.cpuMicrosPerRequest2, 1)}${cpuRises ? ' (rises)' : ''}; ` +
        `${workers.perRound ? `rounds ${workers.perRound.map((value) => fmt(value)).join(', ')}; ` : ''}${judged ? `${workers.freeCores} free cores` : `${workers.freeCores ?? '?'} free core(s): reported only`}`,
    });
  } else {
    add('workers2Vs1', '`--workers 2` req/s ÷ 1 worker (CPU µs/request must not rise)', 'none', 'reported; ≥ 1.6 where 2 free cores exist', notMeasured(workers?.skipped ?? 'not run'));
  }

  // Earlier targets (round one) that the table does not restate.
  add('coldVsBaselineRps', 'inline, cold, req/s ÷ http-proxy (round one)', '1.10', '≥ 1.2', atLeast(rows.cold?.rpsVsBaseline, 1.2));
  add('unloadedAddedMs', 'unloaded added median, gateway − direct (ms, round one)', '0.26', '≤ 0.2 ms', atMost(unloadedAddedMs, 0.2));
  return out;
}

/** The rows as printed, one per line: verdict, measure, this run, target, the issue's "now", and a note. */
function formatTargets(targets) {
  const verdict = (row) => (row.pass === true ? 'PASS' : row.pass === false ? 'FAIL' : row.measured === null ? '  - ' : 'info');
  const width = Math.max(...targets.map((row) => row.measure.length));
  return targets
    .map((row) => {
      const measured = row.measured === null ? 'not measured' : String(row.measured);
      const note = row.note ? `  (${row.note.replace(/^not measured: /, '')})` : '';
      return `  ${verdict(row)}  ${row.measure.padEnd(width)}  ${measured.padStart(12)}  target ${row.target}; was ${row.before}${note}`;
    })
    .join('\n');
}

module.exports = { computeTargets, formatTargets };
