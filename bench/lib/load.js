'use strict';
/**
 * Load generation with autocannon's programmatic API. Latency percentiles are computed here from every
 * 2xx response's exact time (autocannon's own histogram rounds to whole milliseconds, too coarse for a
 * loopback proxy), and the CPU time of the watched processes is read from /proc around the measured run.
 */
const autocannon = require('autocannon');
const { cpuMicros, cpuMicrosTree } = require('./proc');

/**
 * A watched process: a pid, `{ tree: pid }` for a process and everything below it (a gateway with workers), or a list
 * of those, summed (nginx's processes and the gateway it asks); null when one is unreadable.
 */
function cpuOf(watched) {
  if (Array.isArray(watched)) {
    let total = 0;
    for (const one of watched) {
      const micros = cpuOf(one);
      if (micros === null) return null;
      total += micros;
    }
    return total;
  }
  return typeof watched === 'object' && watched !== null ? cpuMicrosTree(watched.tree) : cpuMicros(watched);
}
const { summarize } = require('./stats');

/** Upper bound of latencies kept per run (more than 10 s of loopback traffic can produce). */
const MAX_SAMPLES = 2_000_000;

function runAutocannon(options, onResponse) {
  return new Promise((resolve, reject) => {
    const instance = autocannon(options, (error, result) => (error ? reject(error) : resolve(result)));
    if (onResponse) instance.on('response', onResponse);
  });
}

/**
 * Warm-up run (discarded), then the measured run. Returns requests/s of 2xx answers, exact latency
 * percentiles (ms), error counts and, per watched process (a pid, `{ tree: pid }` or a list of them), CPU microseconds per 2xx request.
 * `during` (optional) is started with the measured run and awaited after it (e.g. a login driver);
 * `hooks.before()` runs right before the measured run, `hooks.after(beforeValue, requests)` right after.
 * `overallRate` (req/s, all connections together) makes the load open-loop: requests at that rate rather than as fast
 * as answers come. Latencies are then still measured from each request's send (not corrected for coordinated
 * omission), so use it well below saturation.
 */
async function measure({ url, connections, durationS, warmupS, headers = {}, watch = {}, during = null, hooks = {}, overallRate = 0 }) {
  if (warmupS > 0) await runAutocannon({ url, connections, duration: warmupS, headers });
  const hookBefore = hooks.before ? await hooks.before() : null;
  const latencies = new Float64Array(MAX_SAMPLES);
  let samples = 0;
  const cpuBefore = {};
  for (const [name, watched] of Object.entries(watch)) cpuBefore[name] = cpuOf(watched);
  const started = process.hrtime.bigint();
  const background = during ? during.start() : null;
  // `overallRate`: an open-loop load at that many requests/s in all (0: every connection as fast as answers come).
  const result = await runAutocannon({ url, connections, duration: durationS, headers, ...(overallRate > 0 ? { overallRate } : {}) }, (_client, statusCode, _bytes, responseTime) => {
    if (statusCode >= 200 && statusCode < 300 && samples < MAX_SAMPLES) latencies[samples++] = responseTime;
  });
  const ended = process.hrtime.bigint();
  const seconds = Number(ended - started) / 1e9;
  const cpu = {};
  for (const [name, watched] of Object.entries(watch)) {
    const after = cpuOf(watched);
    cpu[name] = cpuBefore[name] === null || after === null ? null : (after - cpuBefore[name]) / Math.max(1, result['2xx']);
  }
  const backgroundResult = background ? await during.stop() : null;
  const hookAfter = hooks.after ? await hooks.after(hookBefore, result['2xx']) : null;
  const latency = summarize(latencies.subarray(0, samples));
  return {
    requests: result['2xx'],
    seconds,
    rps: result['2xx'] / seconds,
    p50: latency.p50,
    p90: latency.p90,
    p99: latency.p99,
    max: latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    cpuMicrosPerRequest: cpu,
    background: backgroundResult,
    hook: hookAfter,
    /** The measured run on the monotonic clock, in µs (the clock V8's .cpuprofile timestamps use). */
    window: { startUs: Number(started / 1000n), endUs: Number(ended / 1000n) },
  };
}

module.exports = { measure, runAutocannon };
