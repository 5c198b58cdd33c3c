#!/usr/bin/env node
'use strict';
/**
 * Memory benchmark: the gateway's resident memory with 100,000 active sessions in Redis and 10,000
 * of them in its local session cache (target < 300 MB), then under a flood of 50,000 distinct well-formed
 * but unknown tokens (must not grow without bound).
 *
 * Sessions are real: one login as alice through the gateway, then its TokenRecord (read back through the
 * gateway's own RedisTokenStore from dist) cloned 100,000 times with a new session id under
 * hashToken(generateToken()). Every Redis key written lives under a random `bench-mem-*` prefix and is
 * purged at the end.
 *
 * Database: by default a PGlite in a separate process (the gateway's DATABASE_URL points at its socket), so
 * the RSS measured is the gateway's own, as with a real PostgreSQL server; `--embedded-db` keeps PGlite in
 * the gateway process (its WASM heap then dominates RSS); a DATABASE_URL in the environment is used as is.
 *
 * Usage: node bench/memory.js [--quick] [--embedded-db] [--flood N]   (also: npm run bench -- --memory)
 */
const { randomBytes, randomUUID } = require('node:crypto');
const { mkdirSync, mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const { join } = require('node:path');
const { addCleanup, stopAll, runMain } = require('./lib/children');
const { requireDist } = require('./lib/dist');
const { gatewayMemoryMetrics, startGatewayProcess } = require('./lib/gateway');
const { drive, login } = require('./lib/http');
const { BENCH_PATH, generatePolicy } = require('./lib/policy');
const { memoryKb } = require('./lib/proc');
const { commandCalls, connectStore, purgePrefixes, resolveRedis, TOKEN_READ_COMMANDS } = require('./lib/redis');
const { fmt, fmtInt, table } = require('./lib/report');
const { startDatabaseProcess, startUpstream } = require('./lib/services');

const FULL = { sessions: 100_000, cached: 10_000, flood: 50_000, writeConcurrency: 256, concurrency: 50 };
const QUICK = { sessions: 20_000, cached: 5_000, flood: 10_000, writeConcurrency: 256, concurrency: 50 };
const RSS_TARGET_MB = 300;

const log = (message) => process.stdout.write(`${message}\n`);
const mb = (kb) => (kb === null || kb === undefined ? Number.NaN : kb / 1024);

/** Runs `work(i)` for i in [0, count) with at most `concurrency` in flight. */
async function pool(count, concurrency, work) {
  let next = 0;
  const worker = async () => {
    while (next < count) await work(next++);
  };
  await Promise.all(Array.from({ length: Math.min(count, concurrency) }, worker));
}

async function main(argv = []) {
  const options = { ...(argv.includes('--quick') ? QUICK : FULL) };
  const floodIndex = argv.indexOf('--flood');
  if (floodIndex >= 0) options.flood = Number(argv[floodIndex + 1]);
  if (!(options.flood >= 5)) throw new Error('--flood needs a number of requests (≥ 5)');
  const embeddedDb = argv.includes('--embedded-db');
  const redis = await resolveRedis();
  if (!redis.url) throw new Error('the memory benchmark keeps its sessions in Redis: set REDIS_URL or run Redis on 127.0.0.1:6379');
  const { generateToken, hashToken } = requireDist('domain/token-hash');
  const prefix = `bench-mem-${randomBytes(4).toString('hex')}`;
  const policyDir = mkdtempSync(join(os.tmpdir(), 'iam-bench-policy-'));
  const samples = [];
  let store = null;
  const cleanup = addCleanup(async () => {
    const deleted = await purgePrefixes(redis.url, [prefix]).catch((error) => {
      log(`bench: could not purge ${prefix}: ${error.message}`);
      return 0;
    });
    log(`purged ${fmtInt(deleted)} Redis keys under ${prefix}:`);
    rmSync(policyDir, { recursive: true, force: true });
  });
  try {
    writeFileSync(join(policyDir, 'bench.yaml'), generatePolicy(1000).text);
    const upstream = await startUpstream();
    const database = embeddedDb || process.env.DATABASE_URL ? null : await startDatabaseProcess();
    const gateway = await startGatewayProcess({ name: 'gateway', upstreamUrl: upstream.url, policyDir, redisUrl: redis.url, prefix, databaseUrl: database?.url ?? null });
    const databaseLabel = database ? 'PGlite in a separate process' : process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded PGlite inside the gateway process';
    log(`memory benchmark: ${options.sessions.toLocaleString('en-US')} sessions in Redis ${redis.url.replace(/\/\/[^@/]*@/, '//***@')} (prefix ${prefix}), database: ${databaseLabel}`);
    const sample = async (phase) => {
      const memory = memoryKb(gateway.pid);
      const metrics = await gatewayMemoryMetrics(gateway.managementUrl);
      const entry = { phase, rssKb: memory?.rssKb ?? null, hwmKb: memory?.hwmKb ?? null, heapUsed: metrics?.heapUsed ?? null, external: metrics?.external ?? null };
      samples.push(entry);
      log(`  ${phase.padEnd(52)} RSS ${fmt(mb(entry.rssKb), 1).padStart(6)} MB  (JS heap used ${fmt(entry.heapUsed / 2 ** 20, 1)} MB, external ${fmt(entry.external / 2 ** 20, 1)} MB)`);
      return entry;
    };
    await sample('started (idle)');

    const session = await login(gateway.url, 'alice', 'alice-password');
    store = await connectStore(redis.url, prefix);
    const original = await store.getToken(hashToken(session.accessToken));
    if (!original) throw new Error('the login\'s token record is not in Redis under the expected prefix');
    await sample('after one login');

    const tokens = new Array(options.sessions);
    let t0 = Date.now();
    await pool(options.sessions, options.writeConcurrency, async (i) => {
      const token = generateToken();
      tokens[i] = token;
      await store.putToken(hashToken(token), { ...original, sessionId: randomUUID() });
    });
    log(`  wrote ${options.sessions.toLocaleString('en-US')} cloned sessions through RedisTokenStore.putToken in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await sample(`${options.sessions.toLocaleString('en-US')} sessions in Redis`);

    const url = `${gateway.url}${BENCH_PATH}`;
    const bearer = (token) => ({ authorization: `Bearer ${token}` });
    t0 = Date.now();
    const first = await drive({ url, count: options.cached, concurrency: options.concurrency, headersFor: (i) => bearer(tokens[i]) });
    log(`  drove ${options.cached.toLocaleString('en-US')} distinct sessions through the gateway in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(first.statuses)}`);
    if (first.statuses[200] !== options.cached) throw new Error(`expected ${options.cached} × 200, got ${JSON.stringify(first.statuses)}`);
    // Second pass over the same sessions: served from the local cache (no Redis read) if they all fit.
    const evalBefore = await commandCalls(redis.url, TOKEN_READ_COMMANDS);
    const second = await drive({ url, count: options.cached, concurrency: options.concurrency, headersFor: (i) => bearer(tokens[i]) });
    const evalAfter = await commandCalls(redis.url, TOKEN_READ_COMMANDS);
    const redisReadsPerRequest = evalBefore === null || evalAfter === null ? null : (evalAfter - evalBefore) / options.cached;
    log(`  second pass over the same sessions: ${JSON.stringify(second.statuses)}, Redis token reads per request ${fmt(redisReadsPerRequest, 3)} (server-wide counter; ~0 = all cached)`);
    const cachedSample = await sample(`${options.cached.toLocaleString('en-US')} sessions in the local cache`);

    const floodStep = Math.floor(options.flood / 5);
    const floodStart = await sample(`before the flood of ${options.flood.toLocaleString('en-US')} unknown tokens`);
    let floodStatuses = {};
    for (let step = 1; step <= 5; step++) {
      const result = await drive({ url, count: floodStep, concurrency: options.concurrency, headersFor: () => bearer(generateToken()) });
      for (const [status, count] of Object.entries(result.statuses)) floodStatuses[status] = (floodStatuses[status] ?? 0) + count;
      await sample(`  after ${(step * floodStep).toLocaleString('en-US')} unknown tokens`);
    }
    if (floodStatuses[401] !== floodStep * 5) throw new Error(`every unknown token should be 401, got ${JSON.stringify(floodStatuses)}`);
    const floodEnd = samples[samples.length - 1];
    const still = await drive({ url, count: 1000, concurrency: options.concurrency, headersFor: (i) => bearer(tokens[i]) });
    log(`  the cached sessions still answer after the flood: ${JSON.stringify(still.statuses)}`);

    const rssMb = mb(cachedSample.rssKb);
    const floodGrowthMb = mb(floodEnd.rssKb) - mb(floodStart.rssKb);
    const checks = [
      { name: `RSS with ${options.cached.toLocaleString('en-US')} cached sessions < ${RSS_TARGET_MB} MB`, measured: Math.round(rssMb), pass: rssMb < RSS_TARGET_MB },
      {
        name: `flood of ${options.flood.toLocaleString('en-US')} unknown tokens: RSS growth < 10% (bounded)`,
        measured: `${fmt(floodGrowthMb, 1)} MB`,
        pass: floodGrowthMb < 0.1 * mb(floodStart.rssKb),
      },
    ];
    log('\nsummary:');
    log(table(['phase', 'RSS MB', 'peak MB', 'JS heap MB', 'external MB'], samples.map((entry) => [entry.phase, fmt(mb(entry.rssKb), 1), fmt(mb(entry.hwmKb), 1), fmt(entry.heapUsed / 2 ** 20, 1), fmt(entry.external / 2 ** 20, 1)])));
    log('\ntargets:');
    for (const check of checks) log(`  ${check.pass ? 'PASS' : 'FAIL'}  ${check.name}: ${check.measured}`);
    const results = {
      generatedAt: new Date().toISOString(),
      mode: argv.includes('--quick') ? 'quick' : 'full',
      database: databaseLabel,
      rssMbWithCachedSessions: Math.round(rssMb * 10) / 10,
      floodRssGrowthMb: Math.round(floodGrowthMb * 10) / 10,
      redisReadsPerRequestSecondPass: redisReadsPerRequest,
      targets: checks,
      samples,
      options,
      node: process.version,
    };
    mkdirSync(join(__dirname, 'results'), { recursive: true });
    writeFileSync(join(__dirname, 'results', 'memory-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    log(`\nwrote bench/results/memory-latest.json (${fmtInt(samples.length)} samples)`);
    return checks.every((check) => check.pass) ? 0 : 1;
  } finally {
    if (store) await store.close().catch(() => undefined);
    await stopAll();
    await cleanup();
  }
}

if (require.main === module) runMain('bench memory', main);

module.exports = { main };
