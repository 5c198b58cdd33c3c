'use strict';
/**
 * Unloaded latency: one request at a time, alternating between targets request by request (so drift hits
 * both equally), each target on its own single keep-alive connection. Times are measured from the call to
 * the last body byte with hrtime: sub-millisecond resolution, unlike autocannon's histogram.
 */
const http = require('node:http');
const { request } = require('./http');
const { median, summarize } = require('./stats');

/**
 * `targets`: [{name, url, headers}]. Sends `warmup` unmeasured rounds, then `count` measured rounds (one
 * request per target each). Resolves per target {p50, p90, p99} in ms plus the median of the per-round
 * differences to the first target (`medianDeltaMs`).
 */
async function unloadedLatency(targets, { count, warmup }) {
  const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  const times = targets.map(() => new Float64Array(count));
  const deltas = targets.map(() => new Float64Array(count));
  const statuses = targets.map(() => ({}));
  try {
    for (let i = 0; i < warmup + count; i++) {
      // Alternate which target goes first, so neither always follows the other.
      const order = i % 2 === 0 ? targets.map((_, t) => t) : targets.map((_, t) => targets.length - 1 - t);
      const round = new Float64Array(targets.length);
      for (const t of order) {
        const t0 = process.hrtime.bigint();
        const answer = await request(targets[t].url, { headers: targets[t].headers, agent: agents[t] });
        round[t] = Number(process.hrtime.bigint() - t0) / 1e6;
        statuses[t][answer.status] = (statuses[t][answer.status] ?? 0) + 1;
      }
      if (i < warmup) continue;
      for (let t = 0; t < targets.length; t++) {
        times[t][i - warmup] = round[t];
        deltas[t][i - warmup] = round[t] - round[0];
      }
    }
  } finally {
    for (const agent of agents) agent.destroy();
  }
  const out = {};
  targets.forEach((target, t) => {
    const summary = summarize(times[t]);
    out[target.name] = { p50: summary.p50, p90: summary.p90, p99: summary.p99, medianDeltaMs: median(Array.from(deltas[t])), statuses: statuses[t] };
  });
  return out;
}

module.exports = { unloadedLatency };
