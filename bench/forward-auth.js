#!/usr/bin/env node
'use strict';
/**
 * `npm run bench -- --forward-auth [--compare DIR] [--quick]`: forward-auth decisions against inline proxying, on
 * the same gateway. A gateway (warm: local session cache, like bench/run.js) in front of bench/upstream.js, the same
 * 1,000-route policy and request: alice's `GET /bench/projects/1`, either
 *   - inline: proxied by the gateway to the upstream (what bench/run.js measures), or
 *   - forward-auth: `GET /iam/authorization/forward-auth` with `X-Original-Method: GET` and
 *     `X-Original-URI: /bench/projects/1` and her bearer token, as nginx's `auth_request` (examples/forward-auth/)
 *     asks it: a decision, answered 200 with the identity headers, nothing forwarded.
 * With --compare DIR, the same two targets on a gateway built from DIR join the same rounds (ABBA order).
 *
 * Phases: rounds of autocannon runs (50 connections) over every target; then the unloaded latency: one request at a
 * time on one keep-alive connection per target (bench/lib/raw-client.js: a socket and a prebuilt request, so the
 * client adds little), alternating request by request, with the upstream answered directly as the floor of a
 * loopback round trip to a Node `http` server.
 *
 * Reports forward-auth decisions/s ÷ inline req/s per build (target ≥ 2), the unloaded median of a forward-auth
 * decision (target ≤ 0.15 ms), and with --compare this build ÷ that one. Writes
 * bench/results/forward-auth-latest.json and a dated copy.
 */
const { mkdtempSync, rmSync } = require('node:fs');
const os = require('node:os');
const { join } = require('node:path');
const { addCleanup, stopAll, runMain } = require('./lib/children');
const { startGatewayProcess } = require('./lib/gateway');
const { login, request } = require('./lib/http');
const { measure } = require('./lib/load');
const { BENCH_PATH } = require('./lib/policy');
const { RawClient } = require('./lib/raw-client');
const { purgePrefixes, resolveRedis } = require('./lib/redis');
const { fmt, fmtInt, table, writeResults } = require('./lib/report');
const { startUpstream } = require('./lib/services');
const { median, ratio, round, summarize } = require('./lib/stats');

const FORWARD_AUTH_PATH = '/iam/authorization/forward-auth';
const TARGETS = { forwardAuthVsInline: 2.0, unloadedMedianMs: 0.15 };

const log = (message) => process.stdout.write(`${message}\n`);

/** The headers nginx's auth_request subrequest carries (examples/forward-auth/nginx.conf) for `path`. */
const nginxHeaders = (token, path = BENCH_PATH) => ({ authorization: `Bearer ${token}`, 'x-original-method': 'GET', 'x-original-uri': path });

/** Each gateway answers as forward-auth should: 200 + identity headers + no body; 403 SCOPE_DENIED; 401 without a token. */
async function sanityCheck(gateway, upstreamBody) {
  const inline = await request(`${gateway.url}${BENCH_PATH}`, { headers: { authorization: `Bearer ${gateway.token}` } });
  if (inline.status !== 200 || inline.body !== upstreamBody) throw new Error(`${gateway.name}: inline ${BENCH_PATH} should be 200 with the upstream body, got ${inline.status}`);
  const allowed = await request(`${gateway.url}${FORWARD_AUTH_PATH}`, { headers: nginxHeaders(gateway.token) });
  if (allowed.status !== 200 || allowed.body !== '' || allowed.headers['x-iam-permission'] !== 'project:read' || allowed.headers['x-iam-user-id'] !== 'u-alice') {
    throw new Error(`${gateway.name}: forward-auth should be 200 with the identity headers and no body, got ${allowed.status} ${JSON.stringify(allowed.headers)}`);
  }
  const scope = await request(`${gateway.url}${FORWARD_AUTH_PATH}`, { headers: nginxHeaders(gateway.token, '/bench/projects/2') });
  if (scope.status !== 403 || !scope.body.includes('SCOPE_DENIED')) throw new Error(`${gateway.name}: forward-auth of project 2 should be 403 SCOPE_DENIED, got ${scope.status}`);
  const anonymous = nginxHeaders(gateway.token);
  delete anonymous.authorization;
  const unauthenticated = await request(`${gateway.url}${FORWARD_AUTH_PATH}`, { headers: anonymous });
  if (unauthenticated.status !== 401) throw new Error(`${gateway.name}: forward-auth without a token should be 401, got ${unauthenticated.status}`);
}

/** One request at a time per target, alternating target by target (order reversed every other round). */
async function unloaded(targets, { count, warmup }) {
  const clients = targets.map((target) => new RawClient(target.url, target.headers));
  for (const client of clients) await client.connect();
  const times = targets.map(() => new Float64Array(count));
  const statuses = targets.map(() => ({}));
  try {
    for (let i = 0; i < warmup + count; i++) {
      const order = i % 2 === 0 ? targets.map((_, t) => t) : targets.map((_, t) => targets.length - 1 - t);
      for (const t of order) {
        const { status, ms } = await clients[t].send();
        statuses[t][status] = (statuses[t][status] ?? 0) + 1;
        if (i >= warmup) times[t][i - warmup] = ms;
      }
    }
  } finally {
    for (const client of clients) client.close();
  }
  return Object.fromEntries(targets.map((target, t) => [target.key, { ...summarize(times[t]), statuses: statuses[t] }]));
}

async function main(options) {
  const started = Date.now();
  const generatedAt = new Date().toISOString();
  const redis = await resolveRedis();
  const prefix = `bench-${require('node:crypto').randomBytes(4).toString('hex')}`;
  const prefixes = [`${prefix}-fa`, `${prefix}-fa-other`];
  const policyDir = mkdtempSync(join(os.tmpdir(), 'iam-bench-policy-'));
  const loadStart = os.loadavg();
  const cleanup = addCleanup(async () => {
    await purgePrefixes(redis.url, prefixes).catch((error) => log(`bench: could not purge ${prefixes.join(', ')}: ${error.message}`));
    rmSync(policyDir, { recursive: true, force: true });
  });
  try {
    options.writePolicy(policyDir);
    log(`iam-gateway forward-auth bench (${options.quick ? 'quick' : 'full'}): ${options.rounds} rounds × ${options.compare ? 4 : 2} targets, ${options.connections} connections, ${options.warmupS} s warm-up + ${options.durationS} s each`);
    log(`  token store: ${redis.url ?? 'in-process'}; machine: ${os.cpus().length} cpus, load ${loadStart.map((x) => x.toFixed(2)).join(' ')}`);
    const upstream = await startUpstream();
    const upstreamBody = (await request(`${upstream.url}${BENCH_PATH}`)).body;
    const common = { upstreamUrl: upstream.url, policyDir, redisUrl: redis.url };
    const gateways = [await startGatewayProcess({ ...common, name: 'gateway', prefix: prefixes[0] })];
    if (options.compare) gateways.push(await startGatewayProcess({ ...common, name: 'compared', prefix: prefixes[1], root: options.compare }));
    for (const gateway of gateways) {
      gateway.token = (await login(gateway.url, 'alice', 'alice-password')).accessToken;
      await sanityCheck(gateway, upstreamBody);
    }
    const builds = [
      { key: 'this', label: 'this build', gateway: gateways[0] },
      ...(options.compare ? [{ key: 'other', label: 'compared build', gateway: gateways[1] }] : []),
    ];
    const targets = builds.flatMap((build) => [
      { key: `${build.key}Inline`, build: build.key, kind: 'inline', label: `${build.label}: inline proxy`, url: `${build.gateway.url}${BENCH_PATH}`, headers: { authorization: `Bearer ${build.gateway.token}` }, pid: build.gateway.pid },
      { key: `${build.key}ForwardAuth`, build: build.key, kind: 'forwardAuth', label: `${build.label}: forward-auth`, url: `${build.gateway.url}${FORWARD_AUTH_PATH}`, headers: nginxHeaders(build.gateway.token), pid: build.gateway.pid },
    ]);
    log(`  ready after ${((Date.now() - started) / 1000).toFixed(1)} s; sanity checks passed (inline 200 + body; forward-auth 200 + identity headers, 403 SCOPE_DENIED, 401)\n`);

    log('throughput under load:');
    const rounds = [];
    for (let r = 0; r < options.rounds; r++) {
      const order = r % 2 === 0 ? targets : [...targets].reverse();
      const results = {};
      for (const target of order) {
        const result = await measure({ url: target.url, connections: options.connections, durationS: options.durationS, warmupS: options.warmupS, headers: target.headers, watch: { target: target.pid, upstream: upstream.pid } });
        results[target.key] = result;
        const bad = result.non2xx + result.errors + result.timeouts;
        log(`  round ${r + 1}/${options.rounds}  ${target.label.padEnd(30)} ${fmtInt(result.rps).padStart(7)} req/s  p50 ${fmt(result.p50, 3)} ms  p99 ${fmt(result.p99, 3)} ms  cpu ${fmt(result.cpuMicrosPerRequest.target, 1)} µs/req${bad ? `  !! ${bad} non-2xx/errors` : ''}`);
      }
      const perBuild = Object.fromEntries(builds.map((build) => [build.key, round(ratio(results[`${build.key}ForwardAuth`].rps, results[`${build.key}Inline`].rps), 3)]));
      log(`  round ${r + 1}: forward-auth ÷ inline ${builds.map((build) => `${build.label} ${fmt(perBuild[build.key], 2)}×`).join(', ')}`);
      rounds.push({ round: r + 1, order: order.map((target) => target.key), results, forwardAuthVsInline: perBuild });
    }
    const rows = {};
    for (const target of targets) {
      const pick = (get) => median(rounds.map((entry) => get(entry.results[target.key])));
      rows[target.key] = {
        label: target.label,
        rps: pick((result) => result.rps),
        p50: pick((result) => result.p50),
        p99: pick((result) => result.p99),
        cpuMicrosPerRequest: pick((result) => result.cpuMicrosPerRequest.target),
        failedRequests: rounds.reduce((sum, entry) => sum + entry.results[target.key].non2xx + entry.results[target.key].errors + entry.results[target.key].timeouts, 0),
        rpsRange: [Math.min(...rounds.map((entry) => entry.results[target.key].rps)), Math.max(...rounds.map((entry) => entry.results[target.key].rps))],
      };
    }

    log(`\nunloaded latency (1 request at a time, one keep-alive connection per target, ${options.unloadedCount} each after ${options.unloadedWarmup}):`);
    const latency = await unloaded(
      [
        { key: 'direct', url: `${upstream.url}${BENCH_PATH}`, headers: {} },
        ...targets.filter((target) => target.kind === 'forwardAuth'),
        ...targets.filter((target) => target.kind === 'inline'),
      ],
      { count: options.unloadedCount, warmup: options.unloadedWarmup },
    );
    for (const [key, entry] of Object.entries(latency)) {
      log(`  ${key.padEnd(18)} p50 ${fmt(entry.p50, 4)} ms  p90 ${fmt(entry.p90, 4)} ms  p99 ${fmt(entry.p99, 4)} ms  statuses ${JSON.stringify(entry.statuses)}`);
    }

    const summary = {};
    for (const build of builds) {
      const perRound = rounds.map((entry) => entry.forwardAuthVsInline[build.key]);
      summary[build.key] = {
        forwardAuthRps: round(rows[`${build.key}ForwardAuth`].rps, 0),
        inlineRps: round(rows[`${build.key}Inline`].rps, 0),
        forwardAuthVsInline: round(median(perRound), 3),
        forwardAuthVsInlinePerRound: perRound,
        forwardAuthCpuMicrosPerRequest: round(rows[`${build.key}ForwardAuth`].cpuMicrosPerRequest, 1),
        inlineCpuMicrosPerRequest: round(rows[`${build.key}Inline`].cpuMicrosPerRequest, 1),
        unloadedForwardAuthP50Ms: round(latency[`${build.key}ForwardAuth`].p50, 4),
        unloadedForwardAuthP50OverDirectMs: round(latency[`${build.key}ForwardAuth`].p50 - latency.direct.p50, 4),
        unloadedInlineP50Ms: round(latency[`${build.key}Inline`].p50, 4),
      };
    }
    const checks = [
      { name: `forward-auth decisions/s ≥ ${TARGETS.forwardAuthVsInline}× inline req/s (median of per-round ratios)`, measured: summary.this.forwardAuthVsInline, pass: summary.this.forwardAuthVsInline >= TARGETS.forwardAuthVsInline },
      { name: `unloaded forward-auth median ≤ ${TARGETS.unloadedMedianMs} ms (client to last byte, loopback)`, measured: summary.this.unloadedForwardAuthP50Ms, pass: summary.this.unloadedForwardAuthP50Ms <= TARGETS.unloadedMedianMs },
    ];
    const comparison = options.compare
      ? {
          other: options.compare,
          forwardAuthRps: round(ratio(rows.thisForwardAuth.rps, rows.otherForwardAuth.rps), 3),
          forwardAuthRpsPerRound: rounds.map((entry) => round(ratio(entry.results.thisForwardAuth.rps, entry.results.otherForwardAuth.rps), 3)),
          forwardAuthCpu: round(ratio(rows.thisForwardAuth.cpuMicrosPerRequest, rows.otherForwardAuth.cpuMicrosPerRequest), 3),
          inlineRps: round(ratio(rows.thisInline.rps, rows.otherInline.rps), 3),
          inlineRpsPerRound: rounds.map((entry) => round(ratio(entry.results.thisInline.rps, entry.results.otherInline.rps), 3)),
          unloadedForwardAuthP50: round(ratio(latency.thisForwardAuth.p50, latency.otherForwardAuth.p50), 3),
        }
      : null;

    log(`\nresults (medians over ${options.rounds} rounds; cpu = the gateway process's utime+stime per 2xx answer):`);
    log(
      table(
        ['target', 'req/s', 'range', 'p50 ms', 'p99 ms', 'cpu µs/req', 'unloaded p50 ms'],
        targets.map((target) => [
          target.label,
          fmtInt(rows[target.key].rps),
          `${fmtInt(rows[target.key].rpsRange[0])}–${fmtInt(rows[target.key].rpsRange[1])}`,
          fmt(rows[target.key].p50, 3),
          fmt(rows[target.key].p99, 3),
          fmt(rows[target.key].cpuMicrosPerRequest, 1),
          fmt(latency[target.key].p50, 4),
        ]),
      ),
    );
    log(`  direct upstream unloaded p50 ${fmt(latency.direct.p50, 4)} ms (a loopback round trip to a bare Node http server)`);
    for (const build of builds) {
      const entry = summary[build.key];
      log(`  ${build.label}: forward-auth ÷ inline ${fmt(entry.forwardAuthVsInline, 2)}× (rounds ${entry.forwardAuthVsInlinePerRound.map((value) => fmt(value, 2)).join(', ')}); unloaded forward-auth p50 ${fmt(entry.unloadedForwardAuthP50Ms, 4)} ms (${fmt(entry.unloadedForwardAuthP50OverDirectMs, 4)} ms over direct)`);
    }
    if (comparison) {
      log(`  this build ÷ compared: forward-auth req/s ${fmt(comparison.forwardAuthRps, 2)}× (rounds ${comparison.forwardAuthRpsPerRound.map((value) => fmt(value, 2)).join(', ')}), cpu/req ${fmt(comparison.forwardAuthCpu, 2)}×, unloaded p50 ${fmt(comparison.unloadedForwardAuthP50, 2)}×; inline req/s ${fmt(comparison.inlineRps, 2)}× (rounds ${comparison.inlineRpsPerRound.map((value) => fmt(value, 2)).join(', ')})`);
    }
    const invalid = Object.values(rows).filter((row) => row.failedRequests > 0);
    log('\ntargets:');
    for (const check of checks) log(`  ${check.pass ? 'PASS' : 'FAIL'}  ${check.name}: ${check.measured}`);
    if (invalid.length > 0) log(`  INVALID: non-2xx answers or errors from ${invalid.map((row) => `${row.label} (${row.failedRequests})`).join(', ')}`);

    const results = {
      generatedAt,
      mode: options.quick ? 'quick' : 'full',
      ...Object.fromEntries(Object.entries(summary).map(([key, value]) => [key === 'this' ? 'thisBuild' : 'comparedBuild', value])),
      targets: checks,
      table: rows,
      unloaded: { ...latency, requestsPerTarget: options.unloadedCount },
      rounds,
      ...(comparison ? { comparison } : {}),
      config: { ...options, writePolicy: undefined, benchmarkedRequest: `GET ${BENCH_PATH}`, forwardAuthRequest: `GET ${FORWARD_AUTH_PATH} (X-Original-Method: GET, X-Original-URI: ${BENCH_PATH})` },
      environment: { node: process.version, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? null, loadavgStart: loadStart, loadavgEnd: os.loadavg(), tokenStore: redis.url ? 'redis' : 'memory' },
      durationSeconds: (Date.now() - started) / 1000,
    };
    const files = writeResults(join(__dirname, 'results'), results, 'forward-auth');
    log(`\nwrote ${files.latest} and ${files.dated} (${results.durationSeconds.toFixed(0)} s)`);
    return options.strict && (checks.some((check) => !check.pass) || invalid.length > 0) ? 1 : 0;
  } finally {
    await stopAll();
    await cleanup();
  }
}

module.exports = { main };

if (require.main === module) runMain('bench', () => require('./run').main(['--forward-auth', ...process.argv.slice(2)]));
