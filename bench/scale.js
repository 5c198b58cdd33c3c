#!/usr/bin/env node
'use strict';
/**
 * `npm run bench:scale`: several gateway instances on one shared Redis (a single server, then a Redis Cluster
 * of 3 primaries + 3 replicas) and one shared PostgreSQL, all real processes on 127.0.0.1.
 *
 * Both topologies run side by side; gateways are added to each one at a time (1, 2, 3 instances); with each
 * count it measures
 *  - throughput: autocannon against every gateway of a topology directly and at the same time (warm sessions:
 *    one session used on every instance, as a load balancer without sticky sessions spreads a client), per
 *    instance and in total, with the CPU each gateway, Redis and the load generator spent per request; the
 *    rounds alternate between the topologies (ABBA), so drift on a shared machine favours neither;
 *  - revocation propagation: K sessions logged in through instance A and warmed on every instance (each has
 *    it in its session cache), then one by one logged out through A (`POST /iam/auth/logout`) while every
 *    instance is polled in a tight loop with the token: from the logout's answer to the moment every
 *    instance refuses it (401), and how many requests sent after the answer were still served (must be 0).
 * With --failover (cluster only): the primary that holds the benchmark session's slot is killed (SIGKILL)
 * under load, and the run measures how long requests fail before they succeed again.
 *
 * PostgreSQL: DATABASE_URL's server, on a fresh database `iam_bench_scale_<ts>_<pid>` (created and dropped
 * with psql). Without DATABASE_URL only one instance is measured (embedded PGlite): several instances need a
 * shared database. Redis: redis-server / redis-cli from the PATH (REDIS_SERVER_BIN, REDIS_CLI_BIN), started
 * by the run on free ports, nothing saved to disk. The cluster half needs a build that accepts
 * `REDIS_URL=redis+cluster://...`; an older build skips it and says so.
 *
 * Flags: --quick, --duration S, --warmup S, --rounds N, --connections N (total over the instances),
 * --sessions K, --instances N (most instances, default 3), --topology single|cluster|both, --failover.
 * Writes bench/results/scale-latest.json. See bench/README.md.
 */
const { randomBytes } = require('node:crypto');
const { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const { join } = require('node:path');
const { addCleanup, stopAll, runMain } = require('./lib/children');
const { DIST, ROOT, requireDist } = require('./lib/dist');
const { startGatewayProcess } = require('./lib/gateway');
const { login, request } = require('./lib/http');
const { measure, runAutocannon } = require('./lib/load');
const { BENCH_PATH, generatePolicy } = require('./lib/policy');
const { freshDatabase } = require('./lib/postgres');
const { cpuMicros } = require('./lib/proc');
const { keyCount, nodeOfKey, redisServerVersion, startRedisCluster, startSingleRedis } = require('./lib/redis-servers');
const { fmt, fmtInt, table } = require('./lib/report');
const { startUpstream } = require('./lib/services');
const { median, quantileSorted, round } = require('./lib/stats');

const FULL = { durationS: 10, warmupS: 3, rounds: 2, connections: 48, sessions: 100, maxInstances: 3, failoverLoadS: 12 };
const QUICK = { durationS: 3, warmupS: 1, rounds: 1, connections: 48, sessions: 20, maxInstances: 3, failoverLoadS: 8 };
const POLICY_ROUTES = 1000;
/** A revoked token still served this long after the logout answered means propagation failed. */
const PROPAGATION_DEADLINE_MS = 10_000;

const log = (message) => process.stdout.write(`${message}\n`);
const redact = (url) => (url ? url.replace(/\/\/[^@/]*@/, '//***@') : null);
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const bearer = (token) => ({ authorization: `Bearer ${token}` });

function usageError(message) {
  return Object.assign(new Error(message), { usage: true });
}

function parseArgs(argv) {
  const quick = argv.includes('--quick');
  const options = { ...(quick ? QUICK : FULL), quick, failover: argv.includes('--failover'), topologies: ['single', 'cluster'] };
  const numeric = { '--duration': 'durationS', '--warmup': 'warmupS', '--rounds': 'rounds', '--connections': 'connections', '--sessions': 'sessions', '--instances': 'maxInstances' };
  for (let i = 0; i < argv.length; i++) {
    const key = numeric[argv[i]];
    if (key) {
      const value = Number(argv[++i]);
      if (!(value >= 0)) throw usageError(`${argv[i - 1]} needs a number`);
      options[key] = value;
    } else if (argv[i] === '--topology') {
      const value = argv[++i];
      if (!['single', 'cluster', 'both'].includes(value)) throw usageError('--topology is single, cluster or both');
      options.topologies = value === 'both' ? ['single', 'cluster'] : [value];
    } else if (!['--quick', '--failover'].includes(argv[i])) {
      throw usageError(`unknown argument ${argv[i]} (see bench/README.md)`);
    }
  }
  if (options.durationS <= 0 || options.rounds < 1 || options.sessions < 1 || options.maxInstances < 1) throw usageError('--duration, --rounds, --sessions and --instances must be positive');
  if (options.connections < options.maxInstances) throw usageError('--connections must be at least --instances (they are split over the instances)');
  return options;
}

/** Newest modification time of the files under `dir` whose names end in `suffix`. */
function newestMtime(dir, suffix) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(path, suffix));
    else if (entry.name.endsWith(suffix)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** True when some compiled file names the `redis+cluster:` URL form (the build can reach a Redis Cluster). */
function buildSupports(scheme) {
  const search = (dir) =>
    readdirSync(dir, { withFileTypes: true }).some((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return search(path);
      return entry.name.endsWith('.js') && readFileSync(path, 'utf8').includes(scheme);
    });
  return search(DIST);
}

/** Busy share of every CPU from /proc/stat between two readings (null where /proc is missing). */
function cpuTimes() {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = fields[3] + (fields[4] ?? 0);
    return { idle, total: fields.reduce((sum, value) => sum + value, 0) };
  } catch {
    return null;
  }
}

function busyShare(before, after) {
  if (!before || !after || after.total === before.total) return null;
  return 1 - (after.idle - before.idle) / (after.total - before.total);
}

function sumCpu(pids) {
  let total = 0;
  for (const pid of pids) {
    const value = cpuMicros(pid);
    if (value === null) return null;
    total += value;
  }
  return total;
}

/** `name_sum` and `name_count` of a histogram on a gateway's /metrics (no labels), or null. */
async function histogram(managementUrl, name) {
  const answer = await request(`${managementUrl}/metrics`).catch(() => null);
  if (!answer || answer.status !== 200) return null;
  const value = (suffix) => {
    const line = answer.body.split('\n').find((entry) => entry.startsWith(`${name}_${suffix} `));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : null;
  };
  const buckets = [];
  for (const line of answer.body.split('\n')) {
    const match = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)`).exec(line);
    if (match) buckets.push({ le: match[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(match[1]), count: Number(match[2]) });
  }
  return { sum: value('sum'), count: value('count'), buckets };
}

/** Mean and the bucket bound under which 99% fall, of the observations between two scrapes. */
function histogramDelta(before, after) {
  if (!before || !after || after.count === null || before.count === null) return null;
  const count = after.count - before.count;
  if (count <= 0) return { count: 0, meanMs: null, p99BoundMs: null };
  const p99Bucket = after.buckets.find((bucket, i) => bucket.count - (before.buckets[i]?.count ?? 0) >= 0.99 * count);
  return { count, meanMs: ((after.sum - before.sum) / count) * 1000, p99BoundMs: p99Bucket ? p99Bucket.le * 1000 : null };
}

/** Writes the generated policy (the same 1,000 routes as bench/run.js) and checks it compiles. */
function writePolicy(dir) {
  const { compilePolicyFiles } = requireDist('policy/load-policy-directory');
  const { text } = generatePolicy(POLICY_ROUTES);
  const result = compilePolicyFiles([{ file: 'bench.yaml', text }]);
  if (!result.policy || result.policy.routes.length !== POLICY_ROUTES) throw new Error('the generated policy does not compile to the expected routes');
  writeFileSync(join(dir, 'bench.yaml'), text);
}

const topologyLabel = (kind) => (kind === 'single' ? 'single Redis' : 'Redis Cluster 3+3');

/**
 * One throughput round with `gateways.length` instances: warm-up on all at once, then one measured autocannon
 * run per instance at the same time, the connections split evenly.
 */
async function throughputRound(gateways, topology, token, options) {
  const perInstance = Math.floor(options.connections / gateways.length);
  const url = (gateway) => `${gateway.url}${BENCH_PATH}`;
  if (options.warmupS > 0) await Promise.all(gateways.map((gateway) => runAutocannon({ url: url(gateway), connections: perInstance, duration: options.warmupS, headers: bearer(token) })));
  const redisPids = topology.nodes.filter((node) => node.exitCode === undefined).map((node) => node.pid);
  const redisBefore = sumCpu(redisPids);
  const runnerBefore = cpuMicros(process.pid);
  const machineBefore = cpuTimes();
  const results = await Promise.all(
    gateways.map((gateway) => measure({ url: url(gateway), connections: perInstance, durationS: options.durationS, warmupS: 0, headers: bearer(token), watch: { target: gateway.pid } })),
  );
  const machineAfter = cpuTimes();
  const runnerAfter = cpuMicros(process.pid);
  const redisAfter = sumCpu(redisPids);
  const total = results.reduce((sum, result) => sum + result.requests, 0);
  const perRequest = (before, after) => (before === null || after === null || total === 0 ? null : (after - before) / total);
  return {
    connectionsPerInstance: perInstance,
    perInstance: results.map((result) => ({
      rps: result.rps,
      p50: result.p50,
      p99: result.p99,
      cpuMicrosPerRequest: result.cpuMicrosPerRequest.target,
      failed: result.non2xx + result.errors + result.timeouts,
    })),
    totalRps: results.reduce((sum, result) => sum + result.rps, 0),
    redisCpuMicrosPerRequest: perRequest(redisBefore, redisAfter),
    loadGeneratorCpuMicrosPerRequest: perRequest(runnerBefore, runnerAfter),
    machineBusy: busyShare(machineBefore, machineAfter),
  };
}

function logRound(label, round) {
  log(
    `    ${label}: ${round.perInstance.map((entry) => fmtInt(entry.rps)).join(' + ')} = ${fmtInt(round.totalRps)} req/s` +
      `  (p99 ${round.perInstance.map((entry) => fmt(entry.p99)).join(' / ')} ms; gateway cpu ${round.perInstance.map((entry) => fmt(entry.cpuMicrosPerRequest, 1)).join(' / ')} µs/req;` +
      ` redis ${fmt(round.redisCpuMicrosPerRequest, 1)} µs/req; load generator ${fmt(round.loadGeneratorCpuMicrosPerRequest, 1)} µs/req; machine ${fmt((round.machineBusy ?? Number.NaN) * 100, 0)}% busy)` +
      `${round.perInstance.some((entry) => entry.failed > 0) ? `  !! ${round.perInstance.map((entry) => entry.failed).join('/')} failed` : ''}`,
  );
}

/** The rounds of one topology and instance count: per instance and in total, the median over rounds. */
function summarizeThroughput(rounds) {
  const pick = (i, field) => median(rounds.map((entry) => entry.perInstance[i][field]));
  return {
    connectionsPerInstance: rounds[0].connectionsPerInstance,
    perInstance: rounds[0].perInstance.map((_entry, i) => ({ rps: pick(i, 'rps'), p50: pick(i, 'p50'), p99: pick(i, 'p99'), cpuMicrosPerRequest: pick(i, 'cpuMicrosPerRequest') })),
    totalRps: median(rounds.map((entry) => entry.totalRps)),
    redisCpuMicrosPerRequest: median(rounds.map((entry) => entry.redisCpuMicrosPerRequest ?? Number.NaN)),
    loadGeneratorCpuMicrosPerRequest: median(rounds.map((entry) => entry.loadGeneratorCpuMicrosPerRequest ?? Number.NaN)),
    machineBusy: median(rounds.map((entry) => entry.machineBusy ?? Number.NaN)),
    failedRequests: rounds.reduce((sum, entry) => sum + entry.perInstance.reduce((inner, result) => inner + result.failed, 0), 0),
    rounds,
  };
}

/**
 * Polls one instance with `token` in a tight loop (one request in flight) until it answers 401. Counts the
 * 200s to requests sent after `answeredAt()` (a revoked session served after the logout answered).
 */
async function pollUntilRefused(gateway, token, agent, answeredAt) {
  let stale = 0;
  let polls = 0;
  const other = {};
  const started = nowMs();
  for (;;) {
    const sentAt = nowMs();
    const answer = await request(`${gateway.url}${BENCH_PATH}`, { headers: bearer(token), agent }).catch((error) => ({ status: `error: ${error.message}` }));
    const receivedAt = nowMs();
    polls++;
    if (answer.status === 401) return { refusedAt: receivedAt, lastSentAt: sentAt, stale, polls, other };
    const answered = answeredAt();
    if (answer.status === 200) {
      if (answered !== null && sentAt > answered) stale++;
    } else {
      other[answer.status] = (other[answer.status] ?? 0) + 1;
    }
    if (receivedAt - started > PROPAGATION_DEADLINE_MS) return { refusedAt: null, lastSentAt: sentAt, stale, polls, other };
  }
}

/**
 * Revocation propagation with `gateways.length` instances: `sessions` logins through instance A, each
 * session used once on every instance (so every instance has it cached), then each logged out through A
 * while every instance is polled.
 */
async function propagation(gateways, options) {
  const [first] = gateways;
  const agents = gateways.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  const logoutAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const tokens = [];
    for (let i = 0; i < options.sessions; i++) tokens.push((await login(first.url, 'alice', 'alice-password', 'WEB', logoutAgent)).accessToken);
    for (const token of tokens) {
      for (let g = 0; g < gateways.length; g++) {
        const answer = await request(`${gateways[g].url}${BENCH_PATH}`, { headers: bearer(token), agent: agents[g] });
        if (answer.status !== 200) throw new Error(`${gateways[g].name}: a fresh session answered ${answer.status} ${answer.body.slice(0, 200)}`);
      }
    }
    const channelBefore = await Promise.all(gateways.map((gateway) => histogram(gateway.managementUrl, 'iam_revocation_propagation_seconds')));
    const samples = [];
    for (const token of tokens) {
      let answeredAt = null;
      const started = nowMs();
      const polls = gateways.map((gateway, g) => pollUntilRefused(gateway, token, agents[g], () => answeredAt));
      const answer = await request(`${first.url}/iam/auth/logout`, { method: 'POST', headers: bearer(token), agent: logoutAgent });
      answeredAt = nowMs();
      if (answer.status !== 204) throw new Error(`logout through ${first.name} answered ${answer.status} ${answer.body.slice(0, 200)}`);
      const outcomes = await Promise.all(polls);
      const refusedAll = outcomes.every((outcome) => outcome.refusedAt !== null) ? Math.max(...outcomes.map((outcome) => outcome.refusedAt)) : null;
      samples.push({
        logoutMs: answeredAt - started,
        allRefusedAfterAnswerMs: refusedAll === null ? null : refusedAll - answeredAt,
        allRefusedAfterStartMs: refusedAll === null ? null : refusedAll - started,
        perInstanceAfterAnswerMs: outcomes.map((outcome) => (outcome.refusedAt === null ? null : outcome.refusedAt - answeredAt)),
        staleAfterAnswer: outcomes.reduce((sum, outcome) => sum + outcome.stale, 0),
        polls: outcomes.reduce((sum, outcome) => sum + outcome.polls, 0),
        otherStatuses: outcomes.map((outcome) => outcome.other),
      });
    }
    const channelAfter = await Promise.all(gateways.map((gateway) => histogram(gateway.managementUrl, 'iam_revocation_propagation_seconds')));
    const sorted = (field) =>
      samples
        .map((sample) => sample[field])
        .filter((value) => value !== null)
        .sort((a, b) => a - b);
    const quantiles = (field) => {
      const values = sorted(field);
      return { p50: quantileSorted(values, 0.5), p99: quantileSorted(values, 0.99), max: values.length ? values[values.length - 1] : Number.NaN };
    };
    const channel = channelAfter.map((after, g) => histogramDelta(channelBefore[g], after));
    return {
      revocations: samples.length,
      notRefusedWithinDeadline: samples.filter((sample) => sample.allRefusedAfterAnswerMs === null).length,
      staleAfterAnswer: samples.reduce((sum, sample) => sum + sample.staleAfterAnswer, 0),
      logoutMs: quantiles('logoutMs'),
      allRefusedAfterAnswerMs: quantiles('allRefusedAfterAnswerMs'),
      allRefusedAfterStartMs: quantiles('allRefusedAfterStartMs'),
      channelDelay: channel,
      channelDelayMeanMs: median(channel.slice(1).map((entry) => entry?.meanMs ?? Number.NaN)),
      samples,
    };
  } finally {
    for (const agent of [...agents, logoutAgent]) agent.destroy();
  }
}

/**
 * --failover (cluster): the primary that serves the benchmark session's token key is killed with SIGKILL
 * while every gateway is polled with that session; measures, per instance, from the kill to the first
 * success after the last failure, and how many requests failed (503) meanwhile.
 */
async function failover(gateways, topology, token, prefix, options) {
  const { hashToken } = requireDist('domain/token-hash');
  const key = `${prefix}:token:${hashToken(token)}`;
  const victim = await nodeOfKey(topology.nodes, key);
  if (!victim) throw new Error(`no primary found for ${key}`);
  const agents = gateways.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  const stopAt = { ms: Number.POSITIVE_INFINITY };
  let killedAt = null;
  const watch = async (gateway, agent) => {
    const trace = [];
    while (nowMs() < stopAt.ms) {
      const sentAt = nowMs();
      const answer = await request(`${gateway.url}${BENCH_PATH}`, { headers: bearer(token), agent, timeoutMs: 5000 }).catch((error) => ({ status: `error: ${error.message}` }));
      trace.push({ sentAt, receivedAt: nowMs(), status: answer.status });
    }
    return trace;
  };
  const watchers = gateways.map((gateway, g) => watch(gateway, agents[g]));
  await sleep(1000);
  killedAt = nowMs();
  victim.child.kill('SIGKILL');
  log(`    killed primary 127.0.0.1:${victim.port} (pid ${victim.pid}), which serves the session's key, with SIGKILL`);
  stopAt.ms = killedAt + options.failoverLoadS * 1000;
  const traces = await Promise.all(watchers);
  for (const agent of agents) agent.destroy();
  await victim.exited;
  const perInstance = traces.map((trace) => {
    const after = trace.filter((entry) => entry.sentAt >= killedAt);
    const failures = after.filter((entry) => entry.status !== 200);
    const lastFailure = failures.length ? failures[failures.length - 1] : null;
    const recovered = lastFailure ? trace.find((entry) => entry.sentAt > lastFailure.receivedAt && entry.status === 200) : null;
    const statuses = {};
    for (const entry of after) statuses[entry.status] = (statuses[entry.status] ?? 0) + 1;
    return {
      failed: failures.length,
      requests: after.length,
      firstFailureAfterKillMs: failures.length ? failures[0].sentAt - killedAt : null,
      windowMs: lastFailure ? (recovered ? recovered.receivedAt - killedAt : null) : 0,
      outageMs: lastFailure ? (recovered ? recovered.receivedAt - failures[0].sentAt : null) : 0,
      statuses,
    };
  });
  const newPrimaries = (await topology.primaries()).map((node) => node.port);
  return { killedPort: victim.port, loadSeconds: options.failoverLoadS, perInstance, primariesAfter: newPrimaries };
}

/** Starts one Redis topology and resolves its run state (no gateway yet). */
async function startTopology(kind, tmp) {
  const topology = kind === 'single' ? await startSingleRedis(join(tmp, `redis-${kind}`)) : await startRedisCluster(join(tmp, `redis-${kind}`));
  log(`  ${topologyLabel(kind)}: ${topology.describe}; gateway REDIS_URL=${topology.url}`);
  return { kind, topology, prefix: `bench-scale-${randomBytes(4).toString('hex')}`, gateways: [], token: null, steps: [], failover: null };
}

/** Adds gateway number `n` on `run`'s topology; the first logs in the session every instance then serves. */
async function addGateway(run, n, context, options) {
  const name = `gateway-${run.kind}-${n}`;
  const spool = join(context.tmp, 'spool', name);
  mkdirSync(spool, { recursive: true });
  const t0 = Date.now();
  run.gateways.push(
    await startGatewayProcess({
      name,
      upstreamUrl: context.upstream.url,
      policyDir: context.policyDir,
      redisUrl: run.topology.url,
      prefix: run.prefix,
      extraEnv: {
        ...(context.database ? { DATABASE_URL: context.database.url } : {}),
        IAM_ACCESS_LOG: 'off',
        IAM_AUDIT_SPOOL_DIR: spool,
        // The propagation phase holds `sessions` sessions of one user at once.
        IAM_TOKEN_MAX_SESSIONS_PER_USER: String(Math.max(50, options.sessions * 2)),
      },
    }),
  );
  if (run.token === null) {
    run.token = (await login(run.gateways[0].url, 'alice', 'alice-password')).accessToken;
    const keys = await keyCount(run.topology.nodes);
    if (!(keys > 0)) throw new Error(`${name} logged in, but ${run.topology.describe} holds no key: the gateway is not using it`);
  }
  for (const gateway of run.gateways) {
    const answer = await request(`${gateway.url}${BENCH_PATH}`, { headers: bearer(run.token) });
    if (answer.status !== 200) throw new Error(`${gateway.name}: expected 200 with the shared session, got ${answer.status} ${answer.body.slice(0, 200)}`);
    const anonymous = await request(`${gateway.url}${BENCH_PATH}`);
    if (anonymous.status !== 401) throw new Error(`${gateway.name}: a request without a token should be 401, got ${anonymous.status}`);
  }
  return (Date.now() - t0) / 1000;
}

/**
 * Every topology's gateways are added one at a time; with each count, the throughput rounds alternate
 * between the topologies (ABBA: round 2 runs them in the opposite order), so drift on a shared machine
 * favours neither; then each topology's revocation propagation.
 */
async function runAll(runs, context, options) {
  for (let n = 1; n <= context.maxInstances; n++) {
    const started = [];
    for (const run of runs) started.push(`${topologyLabel(run.kind)} ${fmt(await addGateway(run, n, context, options), 1)} s`);
    log(`\n== ${n} instance${n > 1 ? 's' : ''} per topology (gateway ${n} started: ${started.join(', ')}; the shared session answers 200 on each)`);
    log(`  throughput, ${options.connections} connections split over ${n}:`);
    const rounds = new Map(runs.map((run) => [run, []]));
    for (let r = 0; r < options.rounds; r++) {
      for (const run of r % 2 === 0 ? runs : [...runs].reverse()) {
        const round = await throughputRound(run.gateways, run.topology, run.token, options);
        rounds.get(run).push(round);
        logRound(`round ${r + 1}/${options.rounds} ${topologyLabel(run.kind).padEnd(17)}`, round);
      }
    }
    log(`  revocation propagation, ${options.sessions} logouts through instance 1:`);
    for (const run of runs) {
      const spread = await propagation(run.gateways, options);
      log(
        `    ${topologyLabel(run.kind).padEnd(17)} logout answered in p50 ${fmt(spread.logoutMs.p50)} / p99 ${fmt(spread.logoutMs.p99)} ms; refused on every instance ${fmt(spread.allRefusedAfterAnswerMs.p50)} / ${fmt(spread.allRefusedAfterAnswerMs.p99)} ms after the answer` +
          ` (${fmt(spread.allRefusedAfterStartMs.p50)} / ${fmt(spread.allRefusedAfterStartMs.p99)} ms after the call began); stale 200s after the answer: ${spread.staleAfterAnswer}` +
          `${n > 1 ? `; events channel delay (gateway metric, other instances) mean ${fmt(spread.channelDelayMeanMs)} ms` : ''}` +
          `${spread.notRefusedWithinDeadline ? `  !! ${spread.notRefusedWithinDeadline} not refused within ${PROPAGATION_DEADLINE_MS / 1000} s` : ''}`,
      );
      run.steps.push({ instances: n, throughput: summarizeThroughput(rounds.get(run)), propagation: spread });
    }
  }
  for (const run of runs) {
    if (!options.failover || run.kind !== 'cluster') continue;
    log(`\n== failover (Redis Cluster, ${run.gateways.length} instances polled with the shared session)`);
    run.failover = await failover(run.gateways, run.topology, run.token, run.prefix, options);
    for (const [g, entry] of run.failover.perInstance.entries()) {
      log(
        `  instance ${g + 1}: ${entry.failed} of ${entry.requests} requests failed (${JSON.stringify(entry.statuses)}); first failing request sent ${fmt(entry.firstFailureAfterKillMs, 0)} ms after the kill;` +
          ` succeeding again ${entry.windowMs === null ? 'never (within the run)' : `${fmt(entry.windowMs, 0)} ms after the kill (${fmt(entry.outageMs, 0)} ms after the first failing request was sent)`}`,
      );
    }
  }
  return runs.map((run) => ({ topology: run.kind, redis: run.topology.describe, redisUrl: run.topology.url, steps: run.steps, failover: run.failover }));
}

function printTables(results) {
  log('\nthroughput (warm sessions; autocannon against each instance directly, at the same time; median of rounds):');
  const rows = [];
  for (const entry of results) {
    for (const step of entry.steps) {
      const load = step.throughput;
      rows.push([
        topologyLabel(entry.topology),
        String(step.instances),
        load.perInstance.map((result) => fmtInt(result.rps)).join(' / '),
        fmtInt(load.totalRps),
        load.perInstance.map((result) => fmt(result.p99)).join(' / '),
        fmt(median(load.perInstance.map((result) => result.cpuMicrosPerRequest)), 1),
        fmt(load.redisCpuMicrosPerRequest, 1),
        fmt(load.loadGeneratorCpuMicrosPerRequest, 1),
        `${fmt(load.machineBusy * 100, 0)}%`,
        String(load.failedRequests),
      ]);
    }
  }
  log(table(['redis', 'instances', 'req/s per instance', 'total req/s', 'p99 ms per instance', 'gw cpu µs/req', 'redis µs/req', 'loadgen µs/req', 'cpu busy', 'failed'], rows));
  log('\nrevocation propagation (logout through instance 1; every instance polled with the token):');
  const spreadRows = [];
  for (const entry of results) {
    for (const step of entry.steps) {
      const spread = step.propagation;
      spreadRows.push([
        topologyLabel(entry.topology),
        String(step.instances),
        String(spread.revocations),
        `${fmt(spread.logoutMs.p50)} / ${fmt(spread.logoutMs.p99)}`,
        `${fmt(spread.allRefusedAfterAnswerMs.p50)} / ${fmt(spread.allRefusedAfterAnswerMs.p99)}`,
        `${fmt(spread.allRefusedAfterStartMs.p50)} / ${fmt(spread.allRefusedAfterStartMs.p99)}`,
        String(spread.staleAfterAnswer),
        step.instances > 1 ? fmt(spread.channelDelayMeanMs) : '-',
      ]);
    }
  }
  log(table(['redis', 'instances', 'logouts', 'logout ms p50/p99', 'all refuse, ms after answer p50/p99', 'ms after call start p50/p99', 'stale 200s', 'channel ms (mean)'], spreadRows));
}

async function main(argv) {
  const options = parseArgs(argv);
  const started = Date.now();
  const generatedAt = new Date().toISOString();
  requireDist('policy/load-policy-directory');
  const distAt = statSync(join(DIST, 'cli', 'main.js')).mtimeMs;
  const sourcesAt = Math.max(newestMtime(join(ROOT, 'src'), '.ts'), newestMtime(join(ROOT, 'migrations'), '.ts'));
  const redisVersion = await redisServerVersion();
  if (!redisVersion) throw new Error('redis-server is not on the PATH (or REDIS_SERVER_BIN): bench:scale starts its own Redis servers');
  const clusterSupported = buildSupports('redis+cluster:');
  const cpus = os.cpus().length;
  const loadStart = os.loadavg();
  const tmp = mkdtempSync(join(os.tmpdir(), 'iam-bench-scale-'));
  const policyDir = join(tmp, 'policy');
  mkdirSync(policyDir);
  let database = null;
  const cleanup = addCleanup(async () => {
    if (database) await database.drop().catch((error) => log(`bench: could not drop database ${database.name}: ${error.message}`));
    rmSync(tmp, { recursive: true, force: true });
  });
  try {
    writePolicy(policyDir);
    let maxInstances = options.maxInstances;
    let databaseLabel;
    if (process.env.DATABASE_URL) {
      database = await freshDatabase(process.env.DATABASE_URL, 'iam_bench_scale');
      databaseLabel = `PostgreSQL ${redact(database.url)} (fresh database, dropped at the end)`;
    } else {
      maxInstances = 1;
      databaseLabel = 'embedded PGlite in the gateway (no DATABASE_URL)';
    }
    log(`iam-gateway bench:scale (${options.quick ? 'quick' : 'full'}): 1..${maxInstances} gateway instances; ${options.rounds} round(s) of ${options.warmupS} s warm-up + ${options.durationS} s; ${options.sessions} revocations per step`);
    log(`  machine: ${cpus} cpus (${os.cpus()[0]?.model ?? 'unknown'}), load ${loadStart.map((x) => x.toFixed(2)).join(' ')}; node ${process.version}; ${redisVersion.split(' ').slice(0, 3).join(' ')}`);
    log(`  every process shares these ${cpus} cpus: the load generator (this process), the upstream, every gateway and every Redis node.` + (cpus <= 4 ? ' Totals are not expected to grow with instances here: more instances divide the same cores.' : ''));
    log(`  database: ${databaseLabel}`);
    if (!process.env.DATABASE_URL) log('  DATABASE_URL is not set: several instances need one shared PostgreSQL, so only 1 instance is measured (set DATABASE_URL to measure 2 and 3).');
    if (distAt < sourcesAt) log('  WARNING: dist/ is older than src/: run `npm run build` to measure the current code.');
    const topologies = options.topologies.filter((kind) => kind !== 'cluster' || clusterSupported);
    const skipped = options.topologies.includes('cluster') && !clusterSupported ? 'this build does not accept REDIS_URL=redis+cluster:// (no compiled file names it): the Redis Cluster half is skipped' : null;
    if (skipped) log(`  ${skipped}`);
    if (options.failover && !topologies.includes('cluster')) log('  --failover needs the Redis Cluster half: not measured');
    const upstream = await startUpstream();
    const context = { upstream, policyDir, tmp, database, maxInstances };
    const runs = [];
    for (const kind of topologies) runs.push(await startTopology(kind, tmp));
    const results = await runAll(runs, context, options);
    printTables(results);
    for (const entry of results) {
      if (!entry.failover) continue;
      const per = entry.failover.perInstance;
      log(
        `\nfailover (Redis Cluster, primary 127.0.0.1:${entry.failover.killedPort} killed with SIGKILL): requests succeed again ${per.map((result) => (result.windowMs === null ? 'never' : `${fmt(result.windowMs, 0)}`)).join(' / ')} ms after the kill` +
          ` (per instance; failing from ${per.map((result) => fmt(result.firstFailureAfterKillMs, 0)).join(' / ')} ms; ${per.map((result) => result.failed).join(' / ')} requests failed)`,
      );
    }
    const output = {
      generatedAt,
      mode: options.quick ? 'quick' : 'full',
      note: `${cpus} cpus shared by the load generator, the upstream, every gateway and every Redis node: totals do not scale with instances on this machine`,
      results,
      skipped: skipped ? [skipped] : [],
      config: { ...options, maxInstances, policyRoutes: POLICY_ROUTES, benchmarkedRequest: `GET ${BENCH_PATH}`, revokedWith: 'POST /iam/auth/logout' },
      environment: { node: process.version, cpus, cpuModel: os.cpus()[0]?.model ?? null, loadavgStart: loadStart, loadavgEnd: os.loadavg(), redis: redisVersion, database: databaseLabel },
      durationSeconds: (Date.now() - started) / 1000,
    };
    const dir = join(__dirname, 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'scale-latest.json'), `${JSON.stringify(output, (_key, value) => (typeof value === 'number' && !Number.isInteger(value) ? round(value, 3) : value), 2)}\n`);
    log(`\nwrote bench/results/scale-latest.json (${output.durationSeconds.toFixed(0)} s)`);
    const failed = results.some((entry) => entry.steps.some((step) => step.throughput.failedRequests > 0 || step.propagation.staleAfterAnswer > 0 || step.propagation.notRefusedWithinDeadline > 0));
    if (failed) log('  !! some requests failed, or a revoked session was served after its logout answered: see above');
    return failed ? 1 : 0;
  } finally {
    await stopAll();
    await cleanup();
  }
}

if (require.main === module) runMain('bench scale', main);

module.exports = { main };
