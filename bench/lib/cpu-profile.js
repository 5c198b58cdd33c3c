#!/usr/bin/env node
'use strict';
/**
 * Where the gateway's time goes per proxied request: starts the upstream and one gateway under
 * `node --cpu-prof`, drives the benchmarked request with autocannon, stops the gateway (the profile is
 * written at exit) and summarizes the .cpuprofile: self and inclusive time per function, per file and per
 * package, in microseconds per request.
 *
 * Usage: node bench/lib/cpu-profile.js [--cold | --baseline | --floor | --contract-floor] [--forward-auth] [--logins PER_SECOND] [--duration S] [--keep DIR] [--pin]
 *        (also: npm run bench -- --profile [--cold | --baseline | --floor] [--forward-auth])
 * --cold profiles with IAM_TOKEN_CACHE_ENABLED=false; --baseline profiles bench/baseline-proxy.js, --floor
 * bench/lib/bare-forwarder.js and --contract-floor the same with the contract's headers instead, for comparison; --logins runs that many logins per second in parallel
 * (the login-under-load phase); --forward-auth drives the forward-auth check of the same request as nginx asks it
 * (bench/forward-auth.js) instead of the proxied request; --keep writes the raw .cpuprofile into DIR (open it in
 * Chrome DevTools → Performance, or speedscope).
 */
const { mkdtempSync, readdirSync, readFileSync, rmSync, copyFileSync, mkdirSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const { join, relative } = require('node:path');
const { ROOT, addCleanup, stopAll, runMain } = require('./children');
const { startGatewayProcess } = require('./gateway');
const { login } = require('./http');
const { measure } = require('./load');
const { loginDriver } = require('./login-driver');
const { loginEachOnce, writeLoginUsers } = require('./login-users');
const { BENCH_PATH, generatePolicy } = require('./policy');
const { purgePrefixes, resolveRedis } = require('./redis');
const { enablePinning, pinPlan } = require('./pin');
const { fmt, table } = require('./report');
const { startBareForwarder, startBaselineProxy, startUpstream } = require('./services');

const log = (message) => process.stdout.write(`${message}\n`);

/** Short, stable name of a profile frame's file: `src/gateway/x.js`, `undici/lib/…`, `node:net`, `(gc)`. */
function fileOf(url) {
  if (!url) return '(native/vm)';
  let path = url.startsWith('file://') ? decodeURIComponent(url.slice(7)) : url;
  if (path.startsWith('node:')) return path;
  const nodeModules = path.lastIndexOf('/node_modules/');
  if (nodeModules >= 0) return path.slice(nodeModules + '/node_modules/'.length);
  if (path.startsWith(ROOT)) path = relative(ROOT, path);
  return path.startsWith('dist/') ? path.slice('dist/'.length) : path;
}

/** `undici`, `pino`, `gateway: src/…`, `node` (core), or the special `(garbage collector)`/`(program)`/`(idle)`. */
function packageOf(file, functionName) {
  if (file === '(native/vm)') return functionName.startsWith('(') ? functionName : '(native/vm)';
  if (file.startsWith('node:')) return 'node core';
  if (file.startsWith('src/')) return `gateway ${file.split('/').slice(0, 2).join('/')}/`;
  if (!file.includes('/')) return file;
  const parts = file.split('/');
  return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
}

/**
 * Self and inclusive time per function / file / package from a V8 .cpuprofile, counting only samples taken
 * inside `window` ({startUs, endUs} on the monotonic clock) when given. Inclusive counts a frame once per
 * sample even under recursion.
 */
function analyze(profile, window = null) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const keyOf = new Map();
  for (const node of profile.nodes) {
    const frame = node.callFrame;
    const file = fileOf(frame.url);
    const name = frame.functionName || '(anonymous)';
    keyOf.set(node.id, { fn: `${name} ${file}:${frame.lineNumber + 1}`, file, pkg: packageOf(file, name) });
  }
  const self = { fn: new Map(), file: new Map(), pkg: new Map() };
  const inclusive = { fn: new Map(), file: new Map(), pkg: new Map() };
  const add = (map, key, value) => map.set(key, (map.get(key) ?? 0) + value);
  let total = 0;
  let idle = 0;
  let at = profile.startTime;
  let inWindow = 0;
  profile.samples.forEach((sampleId, i) => {
    at += profile.timeDeltas[i];
    const micros = profile.timeDeltas[i + 1] ?? 0;
    if (window && (at < window.startUs || at > window.endUs)) return;
    inWindow++;
    const key = keyOf.get(sampleId);
    if (key.pkg === '(idle)') {
      idle += micros;
      return;
    }
    total += micros;
    add(self.fn, key.fn, micros);
    add(self.file, key.file, micros);
    add(self.pkg, key.pkg, micros);
    const seen = { fn: new Set(), file: new Set(), pkg: new Set() };
    for (let id = sampleId; id !== undefined; id = parent.get(id)) {
      const frame = keyOf.get(id);
      if (byId.get(id).callFrame.functionName === '(root)') continue;
      for (const level of ['fn', 'file', 'pkg']) {
        if (seen[level].has(frame[level])) continue;
        seen[level].add(frame[level]);
        add(inclusive[level], frame[level], micros);
      }
    }
  });
  return { self, inclusive, total, idle, samples: inWindow };
}

function top(map, count, filter = () => true) {
  return [...map].filter(([key]) => filter(key)).sort((a, b) => b[1] - a[1]).slice(0, count);
}

async function main(argv = []) {
  const cold = argv.includes('--cold');
  const baseline = argv.includes('--baseline');
  const contractFloor = argv.includes('--contract-floor');
  const floor = argv.includes('--floor') || contractFloor;
  const forwardAuth = argv.includes('--forward-auth') && !baseline && !floor;
  const label = baseline ? 'baseline proxy' : contractFloor ? 'forwarder + contract headers' : floor ? 'forwarder only (floor)' : `gateway ${cold ? 'cold' : 'warm'}${forwardAuth ? ', forward-auth' : ''}`;
  const durationIndex = argv.indexOf('--duration');
  const durationS = durationIndex >= 0 ? Number(argv[durationIndex + 1]) : 10;
  const loginsIndex = argv.indexOf('--logins');
  const loginsPerSecond = loginsIndex >= 0 ? Number(argv[loginsIndex + 1]) : 0;
  const keepIndex = argv.indexOf('--keep');
  const keepDir = keepIndex >= 0 ? argv[keepIndex + 1] : null;
  // --pin: the profiled proxy alone on one CPU, load and upstream on the others (lib/pin.js), so that the profile's
  // wall-clock samples are the proxy's own CPU time, not time it spent preempted by the load generator.
  if (argv.includes('--pin')) {
    const pinning = pinPlan();
    if (pinning.ok) log(`--pin: the profiled proxy on CPU ${enablePinning(pinning).proxyCpus}, load on ${pinning.loadCpus}`);
    else log(`--pin skipped: ${pinning.reason}; running unpinned`);
  }
  const redis = await resolveRedis();
  const policyDir = mkdtempSync(join(os.tmpdir(), 'iam-bench-policy-'));
  const profileDir = mkdtempSync(join(os.tmpdir(), 'iam-bench-cpuprof-'));
  const prefix = `bench-prof-${process.pid}`;
  const cleanup = addCleanup(async () => {
    if (redis.url) await purgePrefixes(redis.url, [prefix]).catch((error) => process.stderr.write(`bench: could not purge ${prefix}: ${error.message}\n`));
    rmSync(policyDir, { recursive: true, force: true });
    rmSync(profileDir, { recursive: true, force: true });
  });
  try {
    writeFileSync(join(policyDir, 'bench.yaml'), generatePolicy(1000).text);
    // --logins: users of their own, in turn (lib/login-users.js), so the profiled session stays under the session cap.
    const loginUsers = loginsPerSecond > 0 ? writeLoginUsers(profileDir) : null;
    const upstream = await startUpstream();
    const nodeFlags = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, '--cpu-prof-interval=250'];
    let target;
    let headers = {};
    if (baseline || floor) {
      target = await (baseline ? startBaselineProxy(upstream.url, nodeFlags) : startBareForwarder(upstream.url, nodeFlags, { contract: contractFloor }));
    } else {
      target = await startGatewayProcess({
        name: 'gateway-profiled',
        upstreamUrl: upstream.url,
        policyDir,
        redisUrl: redis.url,
        prefix,
        extraEnv: { ...(cold ? { IAM_TOKEN_CACHE_ENABLED: 'false' } : {}), ...(loginUsers ? loginUsers.env : {}) },
        nodeFlags,
      });
      headers = { authorization: `Bearer ${(await login(target.url, 'alice', 'alice-password')).accessToken}` };
      if (loginUsers) await loginEachOnce(target.url, loginUsers);
    }
    const during = loginUsers && !baseline && !floor
      ? loginDriver({ gatewayUrl: target.url, username: loginUsers.usernames, password: loginUsers.password, rate: loginsPerSecond, maxSeconds: durationS + 1 })
      : null;
    const path = forwardAuth ? '/iam/authorization/forward-auth' : BENCH_PATH;
    if (forwardAuth) headers = { ...headers, 'x-original-method': 'GET', 'x-original-uri': BENCH_PATH };
    const result = await measure({ url: `${target.url}${path}`, connections: 50, durationS, warmupS: 2, headers, watch: { target: target.pid }, during });
    if (result.background) log(`logins in parallel: ${JSON.stringify(result.background)}`);
    log(`profiled ${label}: ${Math.round(result.rps)} req/s, p99 ${fmt(result.p99)} ms, cpu ${fmt(result.cpuMicrosPerRequest.target, 1)} µs/req (${result.non2xx} non-2xx)`);
    // Our own children exit when their IPC channel closes.
    if (baseline || floor) {
      target.child.disconnect();
      await target.exited;
    } else {
      await target.stop();
    }
    const gateway = target;
    const requests = result.requests;
    const file = readdirSync(profileDir).find((name) => name.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no .cpuprofile written in ${profileDir}:\n${gateway.tail()}`);
    if (keepDir) {
      mkdirSync(keepDir, { recursive: true });
      copyFileSync(join(profileDir, file), join(keepDir, file));
      log(`raw profile: ${join(keepDir, file)}`);
    }
    // Only the measured run: start-up (migrations, policy compile) and warm-up are left out.
    const { self, inclusive, total, idle, samples } = analyze(JSON.parse(readFileSync(join(profileDir, file), 'utf8')), result.window);
    if (samples === 0) throw new Error('no profile sample falls inside the measured run (clock mismatch?)');
    const perRequest = (micros) => fmt(micros / requests, 2);
    const share = (micros) => `${fmt((100 * micros) / total, 1)}%`;
    log(`\nmeasured run only: ${samples.toLocaleString('en-US')} samples, main thread busy ${fmt(total / 1e6, 2)} s, idle ${fmt(idle / 1e6, 2)} s, ${requests.toLocaleString('en-US')} requests; µs/req = time ÷ requests`);
    log('(main JS thread only: the profile does not see libuv/GC helper threads, so it sums to less than the cpu figure above)\n');
    log('by package / gateway folder (self time):');
    log(table(['package', 'µs/req', 'share'], top(self.pkg, 16).map(([key, micros]) => [key, perRequest(micros), share(micros)])));
    log('\nby package / gateway folder (inclusive: time under any frame of it):');
    log(table(['package', 'µs/req', 'share'], top(inclusive.pkg, 16).map(([key, micros]) => [key, perRequest(micros), share(micros)])));
    log('\ngateway functions (dist/src), inclusive:');
    log(table(['function', 'µs/req', 'share'], top(inclusive.fn, 30, (key) => key.includes(' src/')).map(([key, micros]) => [key, perRequest(micros), share(micros)])));
    log('\nhottest functions anywhere (self time):');
    log(table(['function', 'µs/req', 'share'], top(self.fn, 30).map(([key, micros]) => [key, perRequest(micros), share(micros)])));
    return 0;
  } finally {
    await stopAll();
    await cleanup();
  }
}

if (require.main === module) runMain('bench profile', main);

module.exports = { main, analyze };
