#!/usr/bin/env node
'use strict';
/**
 * `npm run bench`: the gateway's throughput and latency against a baseline reverse proxy.
 *
 * On 127.0.0.1 it starts, each in its own process: a plain upstream (bench/upstream.js), a baseline proxy
 * (bench/baseline-proxy.js, http-proxy 1.18.1 + keep-alive agent), and two gateways (`node bin/iam-gateway.js
 * serve` from dist/, configured by environment only) with a generated 1,000-route policy: "warm" (local
 * session cache on, the default) and "cold" (IAM_TOKEN_CACHE_ENABLED=false: one Redis round trip per request).
 * The benchmarked request, GET /bench/projects/1 as alice, needs a permission and a scope.
 *
 * Phases: rounds of autocannon runs (50 connections, 3 s warm-up + 10 s measured) over the four targets in
 * ABBA order; the unloaded added latency (one request at a time, gateway vs direct); proxied p99 with and
 * without 20 logins/s in parallel. Prints the table and writes bench/results/latest.json and a dated copy.
 *
 * Flags: --quick (short run), --rounds N, --duration S, --warmup S, --connections N, --strict (exit 1 when a
 * target is missed), --no-floor (skip the gateway's forwarder alone, measured by default), --no-nginx (skip nginx
 * auth_request → forward-auth, measured by default where nginx exists), --no-workers (skip gateway warm with
 * `serve --workers 2`, measured by default where DATABASE_URL and Redis exist), --pin (the proxy under test on CPU 0,
 * everything else on the other CPUs), --external-db (PGlite in its own process instead of inside each
 * gateway), --workers N (this build's gateways run `serve --workers N`; needs DATABASE_URL and Redis; CPU is then
 * the primary's and its workers'). Other tools: --forward-auth (bench/forward-auth.js: forward-auth decisions
 * against inline proxying, same flags), --match (bench/match.js), --memory (bench/memory.js),
 * --profile (lib/cpu-profile.js), --work (lib/work-count.js), --hot-path (lib/hot-path.js), --login-cost
 * (lib/login-cost.js), --login-displacement (lib/login-displacement.js), --gc (lib/gc-cost.js), --ab DIR (lib/ab-pairs.js). See bench/README.md.
 */
const { existsSync, mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const { join, resolve } = require('node:path');
const { addCleanup, stopAll, runMain } = require('./lib/children');
const { requireDist } = require('./lib/dist');
const { gatewayMetricValue, startGatewayProcess } = require('./lib/gateway');
const { login, request } = require('./lib/http');
const { measure } = require('./lib/load');
const { loginDriver } = require('./lib/login-driver');
const { loginEachOnce, writeLoginUsers } = require('./lib/login-users');
const { checkIdentityHeaders, forwardAuthTarget, unloadedForwardAuth } = require('./lib/forward-auth-target');
const { nginxAvailable, startNginxForwardAuth } = require('./lib/nginx');
const { enablePinning, pinPlan } = require('./lib/pin');
const { BENCH_PATH, generatePolicy } = require('./lib/policy');
const { memoryKb, memoryKbTree } = require('./lib/proc');
const { commandCalls, purgePrefixes, resolveRedis, TOKEN_READ_COMMANDS } = require('./lib/redis');
const { fmt, fmtInt, table, writeResults } = require('./lib/report');
const { startBareForwarder, startBaselineProxy, startDatabaseProcess, startUpstream } = require('./lib/services');
const { median, ratio, round } = require('./lib/stats');
const { computeTargets, formatTargets } = require('./lib/targets');
const { unloadedLatency } = require('./lib/unloaded');

const FULL = { rounds: 3, durationS: 10, warmupS: 3, connections: 50, unloadedCount: 3000, unloadedWarmup: 300, loginPairs: 2, loginDurationS: 10, loginWarmupS: 5, loginRate: 20 };
const QUICK = { rounds: 3, durationS: 3, warmupS: 1, connections: 50, unloadedCount: 600, unloadedWarmup: 100, loginPairs: 1, loginDurationS: 4, loginWarmupS: 2, loginRate: 20 };
const POLICY_ROUTES = 1000;

function usageError(message) {
  return Object.assign(new Error(message), { usage: true });
}

function parseArgs(argv) {
  const flags = ['--quick', '--strict', '--floor', '--no-floor', '--nginx', '--no-nginx', '--no-forward-auth', '--no-workers', '--pin', '--external-db', '--forward-auth'];
  const options = {
    ...(argv.includes('--quick') ? QUICK : FULL),
    quick: argv.includes('--quick'),
    strict: argv.includes('--strict'),
    // The bare forwarder and nginx are part of the default run (issue #18's table needs both); --floor and --nginx are accepted as before.
    floor: !argv.includes('--no-floor'),
    nginx: !argv.includes('--no-nginx'),
    // Forward-auth decisions of gateway warm in the same rounds (lib/forward-auth-target.js); --forward-auth runs the
    // separate scenario of bench/forward-auth.js instead.
    forwardAuthTarget: !argv.includes('--no-forward-auth'),
    // `serve --workers 2` beside gateway warm in the same rounds (the workers row), where a shared database and Redis exist.
    workersTarget: !argv.includes('--no-workers'),
    pin: argv.includes('--pin'),
    externalDb: argv.includes('--external-db'),
    forwardAuth: argv.includes('--forward-auth'),
  };
  const numeric = { '--rounds': 'rounds', '--duration': 'durationS', '--warmup': 'warmupS', '--connections': 'connections', '--login-pairs': 'loginPairs', '--workers': 'workers' };
  options.workers = 1;
  options.compare = null;
  for (let i = 0; i < argv.length; i++) {
    const key = numeric[argv[i]];
    if (argv[i] === '--compare') {
      const dir = argv[++i];
      if (!dir || !existsSync(join(dir, 'dist', 'src'))) throw usageError('--compare needs the directory of another built checkout (with dist/src)');
      options.compare = resolve(dir);
    } else if (key) {
      const value = Number(argv[++i]);
      if (!(value >= 0)) throw usageError(`${argv[i - 1]} needs a number`);
      options[key] = value;
    } else if (!flags.includes(argv[i])) {
      throw usageError(`unknown argument ${argv[i]} (see bench/README.md)`);
    }
  }
  if (options.rounds < 1 || options.durationS <= 0 || options.connections < 1 || options.loginPairs < 1) throw usageError('--rounds, --duration, --connections and --login-pairs must be positive');
  if (!Number.isInteger(options.workers) || options.workers < 1) throw usageError('--workers needs a whole number from 1');
  if (options.workers > 1 && !process.env.DATABASE_URL) throw usageError('--workers N (N > 1) needs DATABASE_URL (and Redis): several gateway processes cannot share the embedded database');
  return options;
}

const log = (message) => process.stdout.write(`${message}\n`);
const redact = (url) => (url ? url.replace(/\/\/[^@/]*@/, '//***@') : null);

/** Writes the generated policy and checks it compiles with the real compiler to exactly POLICY_ROUTES routes. */
function writePolicy(dir) {
  const { compilePolicyFiles } = requireDist('policy/load-policy-directory');
  const { text } = generatePolicy(POLICY_ROUTES);
  const result = compilePolicyFiles([{ file: 'bench.yaml', text }]);
  const errors = result.issues.filter((issue) => issue.severity === 'error');
  if (!result.policy || errors.length > 0) throw new Error(`generated policy does not compile: ${errors.map((issue) => issue.message).join('; ')}`);
  if (result.policy.routes.length !== POLICY_ROUTES) throw new Error(`generated policy has ${result.policy.routes.length} routes, not ${POLICY_ROUTES}`);
  writeFileSync(join(dir, 'bench.yaml'), text);
}

/** Every target answers the benchmarked request with the upstream's body; the gateways enforce scope and auth. */
async function sanityCheck(targets, gateways) {
  const expected = (await request(targets[0].url, { headers: targets[0].headers })).body;
  for (const target of targets) {
    const answer = await request(target.url, { headers: target.headers });
    // A forward-auth decision answers 200 with no body and the identity headers instead.
    const body = target.expectedBody ?? expected;
    if (answer.status !== 200 || answer.body !== body) throw new Error(`${target.label}: expected 200 with ${target.expectedBody === '' ? 'no body' : 'the upstream body'}, got ${answer.status} ${answer.body.slice(0, 200)}`);
    if (target.key === 'forwardAuth') checkIdentityHeaders(answer);
  }
  for (const gateway of gateways) {
    const otherProject = await request(`${gateway.url}/bench/projects/2`, { headers: gateway.headers });
    if (otherProject.status !== 403 || !otherProject.body.includes('SCOPE_DENIED')) {
      throw new Error(`${gateway.name}: /bench/projects/2 should be 403 SCOPE_DENIED (scope check), got ${otherProject.status} ${otherProject.body.slice(0, 200)}`);
    }
    const anonymous = await request(`${gateway.url}${BENCH_PATH}`);
    if (anonymous.status !== 401) throw new Error(`${gateway.name}: a request without a token should be 401, got ${anonymous.status}`);
  }
}

/**
 * Redis token-read commands (GET, MGET, EVALSHA) per request around a measured run: 1 = one command per
 * request; below 1 = reads of one event-loop turn coalesced into one MGET. Server-wide counter: other clients add noise.
 */
function redisHooks(redisUrl) {
  if (!redisUrl) return {};
  return {
    before: () => commandCalls(redisUrl, TOKEN_READ_COMMANDS),
    after: async (before, requests) => {
      const after = await commandCalls(redisUrl, TOKEN_READ_COMMANDS);
      return before === null || after === null || requests === 0 ? null : (after - before) / requests;
    },
  };
}

async function runRounds(targets, options, redisUrl, upstreamPid, processes = []) {
  const rounds = [];
  for (let r = 0; r < options.rounds; r++) {
    // ABBA: every other round runs the targets in reverse order, so slow drift favours no target.
    const order = r % 2 === 0 ? targets : [...targets].reverse();
    const results = {};
    for (const target of order) {
      const result = await measure({
        url: target.url,
        connections: options.connections,
        durationS: options.durationS,
        warmupS: options.warmupS,
        headers: target.headers,
        // target.watch: the parts of a target made of several processes (nginx + gateway), each also on its own.
        watch: { target: target.pid, upstream: upstreamPid, ...target.watch },
        hooks: target.gateway ? redisHooks(redisUrl) : {},
      });
      results[target.key] = result;
      const bad = result.non2xx + result.errors + result.timeouts;
      log(
        `  round ${r + 1}/${options.rounds}  ${target.label.padEnd(34)} ${fmtInt(result.rps).padStart(7)} req/s  p50 ${fmt(result.p50)} ms  p99 ${fmt(result.p99)} ms` +
          `${target.key === 'direct' ? '' : `  cpu ${fmt(result.cpuMicrosPerRequest.target, 1)} µs/req`}${bad ? `  !! ${bad} non-2xx/errors` : ''}`,
      );
      // A process that went away (killed from outside: e.g. something running `pkill -x nginx`) is named, not left to
      // show as refused connections later.
      for (const handle of processes) {
        if (handle.exitCode !== undefined) throw new Error(`${handle.name} exited (${handle.exitCode}) during the rounds; its last output:\n${handle.tail()}`);
      }
    }
    rounds.push({ round: r + 1, order: order.map((target) => target.key), results });
  }
  return rounds;
}

function summarizeRounds(targets, rounds) {
  const pick = (key, get) => median(rounds.map((entry) => get(entry.results[key])));
  const rows = {};
  for (const target of targets) {
    const get = (field) => pick(target.key, (result) => result[field]);
    rows[target.key] = {
      label: target.label,
      rps: get('rps'),
      p50: get('p50'),
      p99: get('p99'),
      cpuMicrosPerRequest: target.key === 'direct' ? null : pick(target.key, (result) => result.cpuMicrosPerRequest.target),
      upstreamCpuMicrosPerRequest: pick(target.key, (result) => result.cpuMicrosPerRequest.upstream),
      redisCallsPerRequest: target.gateway ? pick(target.key, (result) => result.hook ?? Number.NaN) : null,
      ...(target.watch ? { cpuParts: Object.fromEntries(Object.keys(target.watch).map((part) => [part, pick(target.key, (result) => result.cpuMicrosPerRequest[part])])) } : {}),
      failedRequests: rounds.reduce((sum, entry) => sum + entry.results[target.key].non2xx + entry.results[target.key].errors + entry.results[target.key].timeouts, 0),
    };
  }
  for (const row of Object.values(rows)) {
    for (const [suffix, base] of [
      ['VsBaseline', rows.baseline],
      ['VsDirect', rows.direct],
    ]) {
      row[`rps${suffix}`] = ratio(row.rps, base.rps);
      row[`p50${suffix}`] = ratio(row.p50, base.p50);
      row[`p99${suffix}`] = ratio(row.p99, base.p99);
    }
  }
  return rows;
}

/** `--compare`: this build's warm and cold req/s ÷ the other build's, from the medians and round by round. */
function compareBuilds(rows, rounds) {
  const out = {};
  for (const [key, otherKey] of [
    ['warm', 'otherWarm'],
    ['cold', 'otherCold'],
  ]) {
    out[key] = {
      thisVsBaseline: round(rows[key].rpsVsBaseline),
      otherVsBaseline: round(rows[otherKey].rpsVsBaseline),
      ratio: round(ratio(rows[key].rpsVsBaseline, rows[otherKey].rpsVsBaseline), 4),
      perRound: rounds.map((entry) => round(ratio(entry.results[key].rps, entry.results[otherKey].rps), 4)),
    };
  }
  return out;
}

/**
 * p99 of gateway warm under the load without and with logins, in pairs. With `--compare`, the compared build's warm
 * gateway too, pair by pair in alternating order (ABBA), so both builds see the same machine: `{ this, other }`.
 */
async function loginUnderLoad(subjects, options, users) {
  const pairs = subjects.map(() => []);
  const startDriver = (gateway, seconds) => loginDriver({ gatewayUrl: gateway.url, username: users.usernames, password: users.password, rate: options.loginRate, maxSeconds: seconds });
  // `watched`: what the CPU figure counts (with --workers, the primary and its workers).
  const loadOn = (gateway, durationS, watched = gateway.pid) => ({ url: `${gateway.url}${BENCH_PATH}`, connections: options.connections, durationS, warmupS: 0, headers: gateway.headers, watch: { target: watched } });
  for (const { label, gateway } of subjects) {
    // Warm-up, not measured: every login user once, then logins at the phase's rate under the load, so that the
    // login path is compiled (V8 optimizes it on its helper threads, at the proxy's priority) before the pairs.
    await loginEachOnce(gateway.url, users);
    const warmup = await measure({ ...loadOn(gateway, options.loginWarmupS), during: startDriver(gateway, options.loginWarmupS + 1) });
    log(`  ${label}warm-up: ${options.loginWarmupS} s with ${fmt(warmup.background.ratePerSecond, 1)} logins/s (not measured)`);
  }
  for (let i = 0; i < options.loginPairs; i++) {
    const order = i % 2 === 0 ? subjects.map((_, s) => s) : subjects.map((_, s) => subjects.length - 1 - s);
    for (const s of order) {
      const { label, gateway, watched } = subjects[s];
      const without = await measure(loadOn(gateway, options.loginDurationS, watched));
      // Many users in turn (lib/login-users.js): alice alone would reach the session cap and revoke the measured session.
      const starvedBefore = await gatewayMetricValue(gateway.managementUrl, STARVED_METRIC);
      const withLogins = await measure({ ...loadOn(gateway, options.loginDurationS, watched), during: startDriver(gateway, options.loginDurationS + 1) });
      const logins = withLogins.background;
      // Password checks that found no idle CPU for 250 ms and left SCHED_IDLE (null: a build without the metric).
      const starvedAfter = await gatewayMetricValue(gateway.managementUrl, STARVED_METRIC);
      logins.starvedVerifications = starvedBefore === null || starvedAfter === null ? null : starvedAfter - starvedBefore;
      log(
        `  ${label}pair ${i + 1}/${options.loginPairs}  p99 ${fmt(without.p99)} ms without logins, ${fmt(withLogins.p99)} ms with ${fmt(logins.ratePerSecond, 1)} logins/s` +
          ` (×${fmt(ratio(withLogins.p99, without.p99))}; req/s ${fmtInt(without.rps)} → ${fmtInt(withLogins.rps)}; login p50 ${fmt(logins.loginP50Ms, 1)} ms, p99 ${fmt(logins.loginP99Ms, 1)} ms, ${logins.failed} failed, ${logins.skipped} skipped` +
          `${logins.starvedVerifications === null ? '' : `, ${logins.starvedVerifications} password checks starved`})`,
      );
      pairs[s].push({ without, with: withLogins });
    }
  }
  const summaries = subjects.map((_, s) => summarizeLoginPairs(pairs[s], options, users));
  // The same logins below saturation (this build's gateway only): an open-loop load at half the req/s it reached
  // without logins. At saturation every CPU millisecond a login takes comes out of the proxied load, so that p99
  // measures the machine's share; here there is idle CPU, and the ratio shows what logins do to a gateway with headroom.
  const { gateway, watched } = subjects[0];
  const rate = Math.max(1, Math.round(OPEN_LOOP_SHARE * summaries[0].rpsWithout));
  const openPairs = [];
  for (let i = 0; i < options.loginPairs; i++) {
    const without = await measure({ ...loadOn(gateway, options.loginDurationS, watched), overallRate: rate });
    const withLogins = await measure({ ...loadOn(gateway, options.loginDurationS, watched), overallRate: rate, during: startDriver(gateway, options.loginDurationS + 1) });
    const logins = withLogins.background;
    log(
      `  ${subjects[0].label}open loop at ${fmtInt(rate)} req/s (${OPEN_LOOP_SHARE * 100}% of the saturated req/s), pair ${i + 1}/${options.loginPairs}  p99 ${fmt(without.p99)} ms without logins, ${fmt(withLogins.p99)} ms with ${fmt(logins.ratePerSecond, 1)} logins/s` +
        ` (×${fmt(ratio(withLogins.p99, without.p99))}; req/s ${fmtInt(without.rps)} → ${fmtInt(withLogins.rps)}; login p50 ${fmt(logins.loginP50Ms, 1)} ms, p99 ${fmt(logins.loginP99Ms, 1)} ms, ${logins.failed} failed)`,
    );
    openPairs.push({ without, with: withLogins });
  }
  summaries[0].openLoop = { ...summarizeLoginPairs(openPairs, options, users), requestsPerSecond: rate, share: OPEN_LOOP_SHARE };
  return summaries;
}

/**
 * Whether this run can measure `serve --workers 2` beside gateway warm: the workers share one database (a real one,
 * DATABASE_URL: several processes cannot share the embedded one) and the token store (Redis); with --pin, the proxies
 * need two CPUs of their own.
 */
function workersAvailable(options, redisUrl, placement) {
  if (!options.workersTarget) return { ok: false, reason: 'not asked (--no-workers)' };
  // Two workers on one pinned CPU only take turns on it: that measures the core, not the workers.
  if (placement.mode === 'pinned' && freeCores(placement) < 2) return { ok: false, reason: `--pin gives the proxies ${freeCores(placement)} CPU; two workers would share it` };
  if (options.workers > 1) return { ok: false, reason: `this run's gateways already run --workers ${options.workers}` };
  if (!process.env.DATABASE_URL) return { ok: false, reason: 'needs DATABASE_URL (workers share one database; the embedded one is per process)' };
  if (!redisUrl) return { ok: false, reason: 'needs Redis (workers share the token store)' };
  return { ok: true };
}

/**
 * The cores a gateway's workers can use besides the load generator and the upstream: with --pin, the proxy CPUs;
 * otherwise every core but one (the load generator and the upstream need one between them at least).
 */
function freeCores(placement) {
  if (placement.mode === 'pinned') return placement.proxyCpus.split(',').length;
  return Math.max(0, os.cpus().length - 1);
}

/** The gateway's count of password checks that found no idle CPU in time and moved off SCHED_IDLE. */
const STARVED_METRIC = 'iam_password_verifications_starved_total';

/** The open-loop login phase's proxied load, as a share of the req/s gateway warm reached without logins. */
const OPEN_LOOP_SHARE = 0.5;

function summarizeLoginPairs(pairs, options, users) {
  const p99Without = median(pairs.map((pair) => pair.without.p99));
  const p99With = median(pairs.map((pair) => pair.with.p99));
  return {
    loginsPerSecondTarget: options.loginRate,
    users: users.usernames.length,
    p99WithoutMs: p99Without,
    p99WithMs: p99With,
    // Each pair's with ÷ without (measured back to back), then the median: drift between pairs cancels out.
    p99Ratio: median(pairs.map((pair) => ratio(pair.with.p99, pair.without.p99))),
    perPairP99Ratio: pairs.map((pair) => round(ratio(pair.with.p99, pair.without.p99))),
    rpsWithout: median(pairs.map((pair) => pair.without.rps)),
    rpsWith: median(pairs.map((pair) => pair.with.rps)),
    logins: pairs.map((pair) => pair.with.background),
    failedProxiedRequests: pairs.reduce((sum, pair) => sum + pair.without.non2xx + pair.with.non2xx + pair.without.errors + pair.with.errors, 0),
  };
}

function printTable(rows) {
  const header = ['target', 'req/s', '×base', '×direct', 'p50 ms', '×base', '×direct', 'p99 ms', '×base', '×direct', 'cpu µs/req', 'cpu %', 'redis/req'];
  const body = Object.values(rows).map((row) => [
    row.label,
    fmtInt(row.rps),
    fmt(row.rpsVsBaseline),
    fmt(row.rpsVsDirect),
    fmt(row.p50, 3),
    fmt(row.p50VsBaseline),
    fmt(row.p50VsDirect),
    fmt(row.p99, 3),
    fmt(row.p99VsBaseline),
    fmt(row.p99VsDirect),
    row.cpuMicrosPerRequest === null ? '-' : fmt(row.cpuMicrosPerRequest, 1),
    // How busy the proxy's processes kept one core (with --pin: whether the proxy's CPU was the limit).
    row.cpuMicrosPerRequest === null ? '-' : fmt((row.cpuMicrosPerRequest * row.rps) / 1e4, 0),
    row.redisCallsPerRequest === null ? '-' : fmt(row.redisCallsPerRequest, 2),
  ]);
  log(table(header, body));
}

async function main(argv) {
  if (argv.includes('--match')) return require('./match').main(argv.filter((arg) => arg !== '--match'));
  if (argv.includes('--memory')) return require('./memory').main(argv.filter((arg) => arg !== '--memory'));
  if (argv.includes('--profile')) return require('./lib/cpu-profile').main(argv.filter((arg) => arg !== '--profile'));
  if (argv.includes('--work')) return require('./lib/work-count').main(argv.filter((arg) => arg !== '--work'));
  if (argv.includes('--hot-path')) return require('./lib/hot-path').main(argv.filter((arg) => arg !== '--hot-path'));
  if (argv.includes('--login-cost')) return require('./lib/login-cost').main(argv.filter((arg) => arg !== '--login-cost'));
  if (argv.includes('--login-displacement')) return require('./lib/login-displacement').main(argv.filter((arg) => arg !== '--login-displacement'));
  if (argv.includes('--gc')) return require('./lib/gc-cost').main(argv.filter((arg) => arg !== '--gc'));
  if (argv.includes('--ab')) return require('./lib/ab-pairs').main(argv.filter((arg) => arg !== '--ab'));
  if (argv.includes('--policy-tools')) return require('./policy-tools').main(argv.filter((arg) => arg !== '--policy-tools'));
  if (argv.includes('--host-decisions')) return require('./host-decisions').main(argv.filter((arg) => arg !== '--host-decisions'));
  if (argv.includes('--filter')) return require('./filter').main(argv.filter((arg) => arg !== '--filter'));
  const options = parseArgs(argv);
  // --pin before anything starts (the forward-auth scenario included): the runner moves to the load CPUs, children
  // are placed by role (lib/pin.js).
  const pinning = options.pin ? pinPlan() : { ok: false, reason: 'not asked (--pin)' };
  if (options.pin && !pinning.ok) log(`bench: --pin skipped: ${pinning.reason}; running unpinned`);
  const placement = pinning.ok ? enablePinning(pinning) : { mode: 'unpinned', ...(options.pin ? { skipped: pinning.reason } : {}) };
  // The forward-auth scenario (bench/forward-auth.js) takes the same flags (--quick, --rounds, --compare, …).
  if (options.forwardAuth) return require('./forward-auth').main({ ...options, writePolicy });
  const nginxCheck = options.nginx ? nginxAvailable() : { ok: false, reason: 'not asked (--no-nginx)' };
  const started = Date.now();
  const generatedAt = new Date().toISOString();
  const redis = await resolveRedis();
  const prefix = `bench-${require('node:crypto').randomBytes(4).toString('hex')}`;
  const prefixes = [`${prefix}-warm`, `${prefix}-cold`, `${prefix}-other-warm`, `${prefix}-other-cold`, `${prefix}-workers`];
  const policyDir = mkdtempSync(join(os.tmpdir(), 'iam-bench-policy-'));
  const usersDir = mkdtempSync(join(os.tmpdir(), 'iam-bench-users-'));
  const loadStart = os.loadavg();
  const cleanup = addCleanup(async () => {
    await purgePrefixes(redis.url, prefixes).catch((error) => log(`bench: could not purge ${prefixes.join(', ')}: ${error.message}`));
    rmSync(policyDir, { recursive: true, force: true });
    rmSync(usersDir, { recursive: true, force: true });
  });
  let nginx = null;
  try {
    writePolicy(policyDir);
    const loginUsers = writeLoginUsers(usersDir);
    const workersCheck = workersAvailable(options, redis.url, placement);
    const targetCount = 4 + (options.floor ? 2 : 0) + (options.forwardAuthTarget ? 1 : 0) + (nginxCheck.ok ? 1 : 0) + (workersCheck.ok ? 1 : 0) + (options.compare ? 2 : 0);
    log(`iam-gateway bench (${options.quick ? 'quick' : 'full'}, ${placement.mode}): ${options.rounds} rounds × ${targetCount} targets, ${options.connections} connections, ${options.warmupS} s warm-up + ${options.durationS} s each`);
    if (placement.mode === 'pinned') log(`  --pin: proxies under test (gateways, baseline, forwarder, nginx) on CPU ${placement.proxyCpus}; this runner (load generator), upstream and the gateways' embedded databases on CPU ${placement.loadCpus}`);
    if (options.nginx && !nginxCheck.ok) log(`  nginx skipped: ${nginxCheck.reason}`);
    if (options.workersTarget && !workersCheck.ok) log(`  --workers 2 skipped: ${workersCheck.reason}`);
    log(`  token store: ${redis.url ? `Redis ${redact(redis.url)} (${redis.source})` : 'in-process store (no Redis answered): "cold" then measures the in-process store, not a Redis round trip'}`);
    const database = options.externalDb && !process.env.DATABASE_URL ? await startDatabaseProcess() : null;
    const databaseLabel = process.env.DATABASE_URL ? 'DATABASE_URL' : database ? 'PGlite in a separate process (--external-db)' : 'embedded PGlite in each gateway process, in memory';
    log(`  database: ${databaseLabel}; policy: ${POLICY_ROUTES} generated routes; machine: ${os.cpus().length} cpus, load ${loadStart.map((x) => x.toFixed(2)).join(' ')}`);
    const upstream = await startUpstream();
    const baseline = await startBaselineProxy(upstream.url);
    const floor = options.floor ? await startBareForwarder(upstream.url) : null;
    const contractFloor = options.floor ? await startBareForwarder(upstream.url, [], { contract: true }) : null;
    if (options.workers > 1 && !redis.url) throw usageError('--workers N (N > 1) needs Redis (REDIS_URL, or one answering on 127.0.0.1:6379)');
    const common = { upstreamUrl: upstream.url, policyDir, redisUrl: redis.url, databaseUrl: database?.url ?? null };
    // --workers N: this build's gateways only (`serve --workers N` through SERVER_WORKERS); CPU and RSS are then the
    // primary's and its workers' together. Every gateway knows the login phase's users (lib/login-users.js); only
    // gateway warm is logged in to by them.
    const workersEnv = options.workers > 1 ? { SERVER_WORKERS: String(options.workers) } : {};
    if (options.workers > 1) log(`  this build's gateways run ${options.workers} worker processes each (SERVER_WORKERS=${options.workers}); cpu µs/req and RSS count the primary and its workers`);
    const warm = await startGatewayProcess({ ...common, name: 'gateway-warm', prefix: prefixes[0], extraEnv: { ...loginUsers.env, ...workersEnv } });
    const cold = await startGatewayProcess({ ...common, name: 'gateway-cold', prefix: prefixes[1], extraEnv: { ...loginUsers.env, ...workersEnv, IAM_TOKEN_CACHE_ENABLED: 'false' } });
    const watched = (pid) => (options.workers > 1 ? { tree: pid } : pid);
    // --compare: the same two gateways from another build, measured in the same rounds (ABBA order).
    const other = options.compare
      ? {
          warm: await startGatewayProcess({ ...common, name: 'other-warm', prefix: prefixes[2], root: options.compare, extraEnv: loginUsers.env }),
          cold: await startGatewayProcess({ ...common, name: 'other-cold', prefix: prefixes[3], root: options.compare, extraEnv: { ...loginUsers.env, IAM_TOKEN_CACHE_ENABLED: 'false' } }),
        }
      : null;
    // The workers row: the same gateway as warm (same database, Redis and settings) with `serve --workers 2`.
    const workers2 = workersCheck.ok ? await startGatewayProcess({ ...common, name: 'gateway-workers-2', prefix: prefixes[4], extraEnv: { SERVER_WORKERS: '2' } }) : null;
    const gateways = [warm, cold, ...(workers2 ? [workers2] : []), ...(other ? [other.warm, other.cold] : [])];
    for (const gateway of gateways) gateway.headers = { authorization: `Bearer ${(await login(gateway.url, 'alice', 'alice-password')).accessToken}` };
    // nginx in front of the upstream, asking gateway warm's forward-auth endpoint (lib/nginx.js), with alice's warm session.
    nginx = nginxCheck.ok ? await startNginxForwardAuth({ gatewayUrl: warm.url, upstreamUrl: upstream.url, binary: nginxCheck.binary }) : null;
    if (nginx) Object.assign(nginx, { name: 'nginx', headers: warm.headers });
    const targets = [
      { key: 'direct', label: 'direct upstream', url: `${upstream.url}${BENCH_PATH}`, headers: warm.headers, pid: upstream.pid },
      { key: 'baseline', label: 'baseline proxy (http-proxy 1.18.1)', url: `${baseline.url}${BENCH_PATH}`, headers: warm.headers, pid: baseline.pid },
      { key: 'warm', label: 'gateway warm (session cache)', url: `${warm.url}${BENCH_PATH}`, headers: warm.headers, pid: watched(warm.pid), gateway: true },
      { key: 'cold', label: 'gateway cold (no session cache)', url: `${cold.url}${BENCH_PATH}`, headers: cold.headers, pid: watched(cold.pid), gateway: true },
    ];
    // Optional reference: the gateway's forwarder with nothing in front (what the gateway's own pipeline is measured against).
    if (floor) targets.splice(2, 0, { key: 'floor', label: 'forwarder only (no auth)', url: `${floor.url}${BENCH_PATH}`, headers: warm.headers, pid: floor.pid });
    // And the same forwarder sending the host what the contract requires (request id, X-Forwarded-*, identity headers):
    // what the gateway costs beyond the headers it must send (lib/bare-forwarder.js).
    if (contractFloor) targets.splice(3, 0, { key: 'contractFloor', label: 'forwarder + contract headers (no auth)', url: `${contractFloor.url}${BENCH_PATH}`, headers: warm.headers, pid: contractFloor.pid });
    if (options.forwardAuthTarget) targets.push(forwardAuthTarget(warm, watched(warm.pid)));
    if (workers2) targets.push({ key: 'workers2', label: 'gateway warm, --workers 2', url: `${workers2.url}${BENCH_PATH}`, headers: workers2.headers, pid: { tree: workers2.pid }, gateway: true });
    if (nginx) {
      // Its CPU: nginx's processes and the gateway answering its auth subrequests, together and each on its own.
      const nginxPids = nginx.pids();
      targets.push({ key: 'nginx', label: 'nginx auth_request → gateway warm', url: `${nginx.url}${BENCH_PATH}`, headers: warm.headers, pid: [...nginxPids, watched(warm.pid)], watch: { nginx: nginxPids, gateway: watched(warm.pid) }, gateway: true });
    }
    if (other) {
      log(`  --compare: also gateway warm and cold built in ${options.compare}`);
      targets.push(
        { key: 'otherWarm', label: 'compared build warm', url: `${other.warm.url}${BENCH_PATH}`, headers: other.warm.headers, pid: other.warm.pid, gateway: true },
        { key: 'otherCold', label: 'compared build cold', url: `${other.cold.url}${BENCH_PATH}`, headers: other.cold.headers, pid: other.cold.pid, gateway: true },
      );
    }
    await sanityCheck(targets, nginx ? [...gateways, nginx] : gateways);
    log(`  ready after ${((Date.now() - started) / 1000).toFixed(1)} s; sanity checks passed (200 + upstream body; 403 SCOPE_DENIED on project 2; 401 without token)\n`);

    log('throughput and latency under load:');
    const rounds = await runRounds(targets, options, redis.url, upstream.pid, [upstream, baseline, ...(floor ? [floor, contractFloor] : []), ...gateways, ...(nginx ? [nginx] : [])]);
    const rows = summarizeRounds(targets, rounds);

    log('\nunloaded latency (1 request at a time, gateway warm vs direct upstream):');
    const byKey = Object.fromEntries(targets.map((target) => [target.key, target]));
    const unloaded = await unloadedLatency(
      ['direct', 'baseline', ...(floor ? ['floor'] : []), 'warm', ...(nginx ? ['nginx'] : [])].map((key) => ({ name: key, url: byKey[key].url, headers: byKey[key].headers })),
      { count: options.unloadedCount, warmup: options.unloadedWarmup },
    );
    const unloadedAdded = unloaded.warm.p50 - unloaded.direct.p50;
    // Forward-auth's unloaded median the way bench/forward-auth.js measures it (raw client), against the upstream asked directly.
    const unloadedDecision = byKey.forwardAuth ? await unloadedForwardAuth(byKey.direct, byKey.forwardAuth, { count: options.unloadedCount, warmup: options.unloadedWarmup }) : null;
    log(`  median: direct ${fmt(unloaded.direct.p50, 3)} ms, baseline ${fmt(unloaded.baseline.p50, 3)} ms, gateway ${fmt(unloaded.warm.p50, 3)} ms → added ${fmt(unloadedAdded, 3)} ms (median of paired differences ${fmt(unloaded.warm.medianDeltaMs, 3)} ms; baseline adds ${fmt(unloaded.baseline.p50 - unloaded.direct.p50, 3)} ms` +
        `${floor ? `, forwarder only adds ${fmt(unloaded.floor.p50 - unloaded.direct.p50, 3)} ms` : ''}${nginx ? `, nginx + forward-auth adds ${fmt(unloaded.nginx.p50 - unloaded.direct.p50, 3)} ms` : ''})`);
    if (unloadedDecision) log(`  forward-auth decision (raw client, as bench/forward-auth.js): median ${fmt(unloadedDecision.p50, 4)} ms, p99 ${fmt(unloadedDecision.p99, 4)} ms; upstream asked directly ${fmt(unloadedDecision.directP50, 4)} ms`);

    log(`\nlogin under load (gateway warm${other ? ' of both builds, alternating' : ''}, ${options.connections} connections, with/without ${options.loginRate} logins/s):`);
    const [loginLoad, loginLoadCompared = null] = await loginUnderLoad(
      [{ label: other ? 'this build   ' : '', gateway: warm, watched: watched(warm.pid) }, ...(other ? [{ label: 'compared build ', gateway: other.warm }] : [])],
      options,
      loginUsers,
    );

    const gatewayMemory = options.workers > 1 ? memoryKbTree : memoryKb;
    const rss = { warm: gatewayMemory(warm.pid), cold: gatewayMemory(cold.pid), baseline: memoryKb(baseline.pid) };
    const summary = {
      throughputRatioWarm: round(rows.warm.rpsVsBaseline),
      throughputRatioCold: round(rows.cold.rpsVsBaseline),
      p99RatioWarm: round(rows.warm.p99VsBaseline),
      p99RatioCold: round(rows.cold.p99VsBaseline),
      unloadedAddedMedianMs: round(unloadedAdded, 4),
      loginLoadP99Ratio: round(loginLoad.p99Ratio),
      warmVsFloorRps: floor ? round(ratio(rows.warm.rps, rows.floor.rps)) : null,
      warmVsFloorCpu: floor ? round(ratio(rows.warm.cpuMicrosPerRequest, rows.floor.cpuMicrosPerRequest)) : null,
      warmVsContractFloorRps: contractFloor ? round(ratio(rows.warm.rps, rows.contractFloor.rps)) : null,
      warmVsContractFloorCpu: contractFloor ? round(ratio(rows.warm.cpuMicrosPerRequest, rows.contractFloor.cpuMicrosPerRequest)) : null,
      coldVsWarmRps: round(ratio(rows.cold.rps, rows.warm.rps)),
      nginxVsWarmRps: nginx ? round(ratio(rows.nginx.rps, rows.warm.rps)) : null,
    };
    // The scenarios that measure the other rows of issue #18's table (see lib/targets.js for their shape): forward-auth
    // decisions/s and unloaded p50 (null: not measured in this run), `serve --workers 2` ÷ 1 worker ({skipped} with why).
    const scenarios = {
      forwardAuth: byKey.forwardAuth
        ? {
            decisionsPerSecond: rows.forwardAuth.rps,
            // Each round's decisions/s ÷ that round's inline warm req/s (same gateway), then the median.
            vsInline: median(rounds.map((entry) => ratio(entry.results.forwardAuth.rps, entry.results.warm.rps))),
            vsInlinePerRound: rounds.map((entry) => round(ratio(entry.results.forwardAuth.rps, entry.results.warm.rps))),
            cpuMicrosPerDecision: rows.forwardAuth.cpuMicrosPerRequest,
            unloadedP50Ms: unloadedDecision.p50,
            unloadedP50OverDirectMs: unloadedDecision.overDirectMs,
          }
        : null,
      workers: workers2
        ? {
            rps1: rows.warm.rps,
            rps2: rows.workers2.rps,
            cpuMicrosPerRequest1: rows.warm.cpuMicrosPerRequest,
            cpuMicrosPerRequest2: rows.workers2.cpuMicrosPerRequest,
            perRound: rounds.map((entry) => round(ratio(entry.results.workers2.rps, entry.results.warm.rps))),
            freeCores: freeCores(placement),
          }
        : { skipped: workersCheck.reason },
    };
    summary.forwardAuthVsInline = scenarios.forwardAuth ? round(scenarios.forwardAuth.vsInline) : null;
    summary.forwardAuthUnloadedP50Ms = scenarios.forwardAuth ? round(scenarios.forwardAuth.unloadedP50Ms, 4) : null;
    const checks = computeTargets({ rows, rounds, loginLoad, unloadedAddedMs: unloadedAdded, pinned: placement.mode === 'pinned', quick: options.quick, ...scenarios });
    const invalid = Object.values(rows).filter((row) => row.failedRequests > 0);
    const comparison = other ? compareBuilds(rows, rounds) : null;

    log(`\nresults (medians over ${options.rounds} rounds; ratios: ×base = ÷ baseline proxy, ×direct = ÷ direct upstream; cpu = the proxy process's utime+stime per 2xx request):`);
    printTable(rows);
    log(`\n  upstream cpu µs/req: ${Object.values(rows).map((row) => `${row.label.split(' (')[0]} ${fmt(row.upstreamCpuMicrosPerRequest, 1)}`).join(', ')}`);
    log(`  RSS after the load: gateway warm ${fmtInt(rss.warm?.rssKb / 1024)} MB, gateway cold ${fmtInt(rss.cold?.rssKb / 1024)} MB, baseline ${fmtInt(rss.baseline?.rssKb / 1024)} MB`);
    if (nginx) {
      const part = rows.nginx.cpuParts ?? {};
      log(`  nginx auth_request: ${fmtInt(rows.nginx.rps)} req/s = ${fmt(summary.nginxVsWarmRps)}× the inline gateway; cpu µs/req nginx ${fmt(part.nginx, 1)} + gateway (forward-auth) ${fmt(part.gateway, 1)} = ${fmt(rows.nginx.cpuMicrosPerRequest, 1)} (inline gateway ${fmt(rows.warm.cpuMicrosPerRequest, 1)})`);
    }
    log(`\ntargets (issue #18; ${placement.mode}${options.quick ? ', quick run' : ''}):`);
    log(formatTargets(checks));
    if (invalid.length > 0) log(`  INVALID: non-2xx answers or errors from ${invalid.map((row) => `${row.label} (${row.failedRequests})`).join(', ')}`);
    if (comparison) {
      log(`\nthis build ÷ the build in ${options.compare} (same rounds; ratio of the ×base medians, and the per-round range):`);
      for (const [key, entry] of Object.entries(comparison)) {
        log(`  ${key.padEnd(5)} this ${fmt(entry.thisVsBaseline, 3)}× base, compared ${fmt(entry.otherVsBaseline, 3)}× base → ${fmt((entry.ratio - 1) * 100, 1)}% (rounds ${entry.perRound.map((value) => `${fmt((value - 1) * 100, 1)}%`).join(', ')})`);
      }
      log(`  p99 with ${options.loginRate} logins/s ÷ without: this ${fmt(loginLoad.p99Ratio)} (pairs ${loginLoad.perPairP99Ratio.map((value) => fmt(value)).join(', ')}), compared ${fmt(loginLoadCompared.p99Ratio)} (pairs ${loginLoadCompared.perPairP99Ratio.map((value) => fmt(value)).join(', ')})`);
    }

    const results = {
      generatedAt,
      mode: options.quick ? 'quick' : 'full',
      pinning: placement,
      ...summary,
      targets: checks,
      ...scenarios,
      nginx: nginx ? { version: nginxCheck.version, workers: 1, config: nginx.config } : { skipped: nginxCheck.reason },
      table: rows,
      unloaded: { ...unloaded, addedMedianMs: unloadedAdded, requestsPerTarget: options.unloadedCount },
      loginLoad,
      ...(loginLoadCompared ? { loginLoadCompared } : {}),
      rssKbAfterLoad: rss,
      rounds,
      ...(comparison ? { comparison: { other: options.compare, ...comparison } } : {}),
      config: { ...options, policyRoutes: POLICY_ROUTES, benchmarkedRequest: `GET ${BENCH_PATH}` },
      environment: {
        node: process.version,
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model ?? null,
        loadavgStart: loadStart,
        loadavgEnd: os.loadavg(),
        tokenStore: redis.url ? { kind: 'redis', url: redact(redis.url), source: redis.source } : { kind: 'memory' },
        database: databaseLabel,
      },
      durationSeconds: (Date.now() - started) / 1000,
    };
    const files = writeResults(join(__dirname, 'results'), results);
    log(`\nwrote ${files.latest} and ${files.dated} (${results.durationSeconds.toFixed(0)} s)`);
    return options.strict && (checks.some((check) => check.pass === false) || invalid.length > 0) ? 1 : 0;
  } finally {
    await stopAll();
    await nginx?.cleanup();
    await cleanup();
  }
}

if (require.main === module) runMain('bench', main);

module.exports = { main };
