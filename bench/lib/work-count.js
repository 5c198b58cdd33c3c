#!/usr/bin/env node
'use strict';
/**
 * Counts the work the gateway does per proxied request, independent of machine noise: async resources
 * created (promises, nextTicks, immediates, write requests...) and heap bytes allocated (by function), per request, for
 * the real gateway (started in this process from dist/, warm session cache) and for the gateway's own
 * UpstreamForwarder with nothing in front of it (the forwarding floor). Also tells whether async_hooks
 * promise hooks are active in the gateway process (an enabled AsyncLocalStorage turns them on for every
 * promise in Node 20).
 *
 * The client runs in a child process (so its own work is not counted); requests go one at a time.
 * Usage: node bench/lib/work-count.js [--requests N]   (also: npm run bench -- --work)
 */
const { createHook } = require('node:async_hooks');
const { join } = require('node:path');
const os = require('node:os');
const { mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const { Session } = require('node:inspector');
const { ROOT, addCleanup, spawnNode, stopAll, runMain } = require('./children');
const { requireDist } = require('./dist');
const { EXAMPLE_IDENTITIES_ENV } = require('./gateway');
const { login } = require('./http');
const { BENCH_PATH, generatePolicy } = require('./policy');
const { purgePrefixes, resolveRedis } = require('./redis');
const { fmt, table } = require('./report');
const { startUpstream } = require('./services');
const { startBareForwarderServer } = require('./bare-forwarder');

const log = (message) => process.stdout.write(`${message}\n`);

/** ns per `await new Promise(...)`: several times slower when promise hooks are on. */
async function promiseCost(iterations = 200_000) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) await new Promise((resolve) => resolve(i));
  return Number(process.hrtime.bigint() - t0) / iterations;
}

/** Sends `count` sequential keep-alive GETs from a child process; resolves when it is done. */
async function runClient(url, headers, count) {
  const handle = spawnNode('client', join(__dirname, 'sequential-client.js'), [url, JSON.stringify(headers), String(count)], { ipc: true });
  const done = await handle.ready;
  await handle.exited;
  if (done.bad > 0) throw new Error(`${done.bad} of ${count} requests to ${url} were not 200`);
}

/** Heap allocations by function (V8 sampling heap profiler, collected objects included), in bytes. */
async function allocationProfile(session, work) {
  const post = (method, params = {}) => new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await work();
  const { profile } = await post('HeapProfiler.stopSampling');
  await post('HeapProfiler.disable');
  const bytes = new Map();
  let total = 0;
  const visit = (node) => {
    const frame = node.callFrame;
    const file = frame.url ? frame.url.replace(/^file:\/\//, '').replace(`${ROOT}/`, '').replace(/^.*\/node_modules\//, '') : '(native)';
    const key = `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
    bytes.set(key, (bytes.get(key) ?? 0) + node.selfSize);
    total += node.selfSize;
    for (const child of node.children) visit(child);
  };
  visit(profile.head);
  return { total, bytes };
}

/** Async resources by type, CPU and heap bytes allocated (by function) per request while `count` requests run. */
async function countWork(session, url, headers, count) {
  await runClient(url, headers, 300); // warm-up: JIT, pools, caches
  // CPU first, with no instrumentation of ours (the counting hook below has a cost of its own).
  const cpuBefore = process.cpuUsage();
  const wallBefore = process.hrtime.bigint();
  await runClient(url, headers, count);
  const wallMicros = Number(process.hrtime.bigint() - wallBefore) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const counts = new Map();
  const hook = createHook({
    init(_id, type) {
      counts.set(type, (counts.get(type) ?? 0) + 1);
    },
  });
  hook.enable();
  await runClient(url, headers, count);
  hook.disable();
  const perRequest = {};
  for (const [type, n] of counts) perRequest[type] = n / count;
  // A separate pass for allocations: the sampling profiler has a cost of its own.
  const allocations = await allocationProfile(session, () => runClient(url, headers, count));
  return {
    asyncResources: perRequest,
    cpuMicrosPerRequest: (cpu.user + cpu.system) / count,
    // Includes the client process's start-up: compare between targets only.
    wallMicrosPerRequest: wallMicros / count,
    allocatedBytesPerRequest: allocations.total / count,
    allocationsByFunction: [...allocations.bytes].map(([fn, total]) => [fn, total / count]).sort((a, b) => b[1] - a[1]),
  };
}

async function main(argv = []) {
  const index = argv.indexOf('--requests');
  const count = index >= 0 ? Number(argv[index + 1]) : 5000;
  const redis = await resolveRedis();
  const prefix = `bench-work-${process.pid}`;
  const policyDir = mkdtempSync(join(os.tmpdir(), 'iam-bench-policy-'));
  let gateway = null;
  let bare = null;
  const cleanup = addCleanup(async () => {
    if (redis.url) await purgePrefixes(redis.url, [prefix]).catch((error) => process.stderr.write(`bench: could not purge ${prefix}: ${error.message}\n`));
    rmSync(policyDir, { recursive: true, force: true });
  });
  try {
    writeFileSync(join(policyDir, 'bench.yaml'), generatePolicy(1000).text);
    const upstream = await startUpstream();
    const promiseNsBefore = await promiseCost();
    bare = await startBareForwarderServer(upstream.url);
    const session = new Session();
    session.connect();
    const bareWork = await countWork(session, `${bare.url}${BENCH_PATH}`, {}, count);
    await bare.close();
    // The same forwarder sending the contract's headers (lib/bare-forwarder.js --contract): "gateway − this" is what
    // deciding costs.
    bare = await startBareForwarderServer(upstream.url, 0, { contract: true });
    const contractWork = await countWork(session, `${bare.url}${BENCH_PATH}`, {}, count);

    const { loadConfig } = requireDist('config');
    const { startGateway } = requireDist('app/start-gateway');
    const { createLogger } = requireDist('observability/logger');
    const env = {
      PORT: '0',
      MANAGEMENT_PORT: '0',
      SERVER_HOST: '127.0.0.1',
      UPSTREAM_URL: upstream.url,
      IAM_POLICIES_DIR: policyDir,
      IAM_TOKEN_STORE_PREFIX: prefix,
      REDIS_URL: redis.url ?? '',
      DATABASE_URL: process.env.DATABASE_URL ?? '',
      DATABASE_EMBEDDED_DIR: 'memory://',
      LOG_LEVEL: 'warn',
      ...EXAMPLE_IDENTITIES_ENV,
    };
    gateway = await startGateway(loadConfig({ file: join(ROOT, 'config', 'default.yaml'), env, cwd: ROOT }), { logger: createLogger('silent') });
    const token = (await login(gateway.url, 'alice', 'alice-password')).accessToken;
    const promiseNsAfter = await promiseCost();
    const gatewayWork = await countWork(session, `${gateway.url}${BENCH_PATH}`, { authorization: `Bearer ${token}` }, count);
    session.disconnect();

    log(`work per proxied request (${count.toLocaleString('en-US')} sequential requests, counted in-process; client in a child process)\n`);
    const types = [...new Set([...Object.keys(gatewayWork.asyncResources), ...Object.keys(bareWork.asyncResources)])].sort(
      (a, b) => (gatewayWork.asyncResources[b] ?? 0) - (gatewayWork.asyncResources[a] ?? 0),
    );
    const works = [gatewayWork, contractWork, bareWork];
    const rows = types.map((type) => [type, ...works.map((work) => fmt(work.asyncResources[type] ?? 0, 2))]);
    const sum = (work) => Object.values(work.asyncResources).reduce((a, b) => a + b, 0);
    rows.push(['all async resources', ...works.map((work) => fmt(sum(work), 2))]);
    rows.push(['heap bytes allocated', ...works.map((work) => fmt(work.allocatedBytesPerRequest, 0))]);
    rows.push(['cpu µs (this process, sequential)', ...works.map((work) => fmt(work.cpuMicrosPerRequest, 1))]);
    log(table(['per request', 'gateway warm', 'forwarder + contract headers', 'forwarder only'], rows));
    log('\nheap bytes allocated per request by function, gateway warm (top 25; V8 sampling heap profiler):');
    log(table(['function', 'bytes/req'], gatewayWork.allocationsByFunction.slice(0, 25).map(([fn, bytes]) => [fn, fmt(bytes, 0)])));
    // Where the gateway allocates more than the forwarder sending the same headers: what deciding allocates.
    const contractBytes = new Map(contractWork.allocationsByFunction);
    const extra = gatewayWork.allocationsByFunction.map(([fn, bytes]) => [fn, bytes - (contractBytes.get(fn) ?? 0)]).sort((a, b) => b[1] - a[1]);
    log('\nheap bytes per request the gateway allocates beyond the forwarder sending the contract\'s headers, by function (top 25):');
    log(table(['function', 'bytes/req'], extra.slice(0, 25).map(([fn, bytes]) => [fn, fmt(bytes, 0)])));
    log(`\nawait new Promise(): ${fmt(promiseNsBefore, 0)} ns before the gateway started, ${fmt(promiseNsAfter, 0)} ns after` +
      (promiseNsAfter > 2 * promiseNsBefore ? ' → promise hooks are ON in the gateway process (an AsyncLocalStorage was enabled; every promise pays an init hook)' : ' → no promise hooks'));
    return 0;
  } finally {
    if (gateway) await gateway.close();
    if (bare) await bare.close();
    await stopAll();
    await cleanup();
  }
}

if (require.main === module) runMain('bench work', main);

module.exports = { main };
