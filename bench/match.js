#!/usr/bin/env node
'use strict';
/**
 * Route-matching micro-benchmark (docs/policy-format.md: matching cost must not grow with the number of
 * routes). Compiles generated policies of 10, 100, 1,000 and 10,000 routes with the real compiler
 * (dist/src/policy/load-policy-directory: compilePolicyFiles) and reports nanoseconds per `policy.match()` for a fixed set of
 * requests (unit 0 exists in every size) and the number of tree nodes each lookup visits (RouteTree's
 * MatchCounter), which must not depend on the size at all; flat = both hold. Also shown: requests spread over
 * the whole tree (growth there is the memory hierarchy, not the algorithm). Writes results/match-latest.json.
 *
 * Usage: node bench/match.js [--quick]   (also: npm run bench -- --match)
 */
const { runMain } = require('./lib/children');
const { requireDist } = require('./lib/dist');
const { generatePolicy, samplePaths, spreadPaths } = require('./lib/policy');
const { fmt, table } = require('./lib/report');
const { round } = require('./lib/stats');
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const SIZES = [10, 100, 1000, 10000];
/** Largest ns(10,000 routes) ÷ ns(10 routes) still called flat (timer noise on a shared machine). */
const FLAT_RATIO = 1.5;

const log = (message) => process.stdout.write(`${message}\n`);

/** Runs `iterations` lookups of `requests[i & mask]` against `policy`; returns a value so nothing is optimized away. */
function lookups(policy, requests, mask, iterations) {
  let found = 0;
  for (let i = 0; i < iterations; i++) {
    const request = requests[i & mask];
    if (policy.match(request.method, request.path) !== null) found++;
  }
  return found;
}

/**
 * ns per lookup for each policy (policy p looks up `requestLists[p]`, a power-of-two long list): after a warm-up of every policy, `batches` timed batches in which the
 * policies take turns (so machine drift and JIT state hit every size alike); the fastest batch per policy.
 */
function timeInterleaved(policies, requestLists, iterations, batches) {
  for (const requests of requestLists) {
    if ((requests.length & (requests.length - 1)) !== 0) throw new Error('request list length must be a power of two');
  }
  let sink = 0;
  policies.forEach((policy, p) => {
    sink += lookups(policy, requestLists[p], requestLists[p].length - 1, iterations);
  });
  const samples = policies.map(() => []);
  for (let b = 0; b < batches; b++) {
    policies.forEach((policy, p) => {
      const t0 = process.hrtime.bigint();
      sink += lookups(policy, requestLists[p], requestLists[p].length - 1, iterations);
      samples[p].push(Number(process.hrtime.bigint() - t0) / iterations);
    });
  }
  if (sink < 0) log('unreachable');
  // The fastest batch: on a shared machine interference only ever adds time, so the minimum is the most
  // repeatable estimate of the lookup's own cost.
  return samples.map((values) => Math.min(...values));
}

function compile(size) {
  const { compilePolicyFiles } = requireDist('policy/load-policy-directory');
  const generated = generatePolicy(size);
  const t0 = process.hrtime.bigint();
  const result = compilePolicyFiles([{ file: `bench-${size}.yaml`, text: generated.text }]);
  const compileMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const errors = result.issues.filter((issue) => issue.severity === 'error');
  if (!result.policy || errors.length > 0) throw new Error(`policy of ${size} routes does not compile: ${errors.map((issue) => issue.message).join('; ')}`);
  if (result.policy.routes.length !== size) throw new Error(`policy of ${size} routes compiled to ${result.policy.routes.length}`);
  return { policy: result.policy, units: generated.units, compileMs };
}

/** Tree nodes visited per lookup, from a RouteTree built from the same compiled routes. */
function visitsPerLookup(policy, requests) {
  const { RouteTree } = requireDist('policy/load-policy-directory');
  const tree = RouteTree.fromRoutes(policy.routes);
  return requests.map(({ method, path }) => {
    const counter = { visits: 0 };
    const viaTree = tree.match(method, path, counter);
    const viaPolicy = policy.match(method, path);
    if ((viaTree?.route.id ?? null) !== (viaPolicy?.route.id ?? null)) throw new Error(`RouteTree and policy.match disagree on ${method} ${path}`);
    return counter.visits;
  });
}

async function main(argv = []) {
  const quick = argv.includes('--quick');
  // Many short batches: the fastest one is a batch without a GC pause or a preemption by another process.
  // Passes: every request is measured once per pass, passes spread over the run, so a burst of activity
  // from another process cannot inflate one request's result.
  const iterations = 20_000;
  const batches = quick ? 10 : 15;
  const passes = quick ? 2 : 3;
  const samples = samplePaths(0);
  log(`route matching: ns per policy.match() (fastest of ${passes} passes × ${batches} interleaved batches × ${iterations.toLocaleString('en-US')} calls), node ${process.version}\n`);
  const bySize = SIZES.map((size) => {
    const { policy, units, compileMs } = compile(size);
    return { size, policy, units, compileMs, expected: samples.map(({ method, path }) => policy.match(method, path)?.route.pattern ?? null), visits: visitsPerLookup(policy, samples) };
  });
  const policies = bySize.map((entry) => entry.policy);
  // One request at a time (a 1-element list), then 1,024 requests spread over each policy's whole tree.
  const fastest = (a, b) => (a === null ? b : a.map((value, i) => Math.min(value, b[i])));
  let nsPerPath = samples.map(() => null);
  let nsSpread = null;
  const spreadLists = bySize.map((entry) => spreadPaths(entry.units, 1024));
  for (let pass = 0; pass < passes; pass++) {
    nsPerPath = samples.map((sample, i) => fastest(nsPerPath[i], timeInterleaved(policies, policies.map(() => [sample]), iterations, batches)));
    nsSpread = fastest(nsSpread, timeInterleaved(policies, spreadLists, iterations, batches));
  }
  bySize.forEach((entry, s) => {
    entry.nsPerPath = nsPerPath.map((perSize) => perSize[s]);
    entry.nsSpread = nsSpread[s];
  });

  const header = ['request', 'matched route', ...SIZES.map((size) => `${size.toLocaleString('en-US')} routes`), 'visits', '10k÷10', 'flat'];
  const rows = [];
  const verdicts = [];
  const verdict = (values, visitsFlat) => {
    const ratio = values[values.length - 1] / values[0];
    const flat = ratio <= FLAT_RATIO && visitsFlat;
    verdicts.push(flat);
    return [fmt(ratio), flat ? 'yes' : 'NO'];
  };
  samples.forEach((sample, i) => {
    const values = bySize.map((entry) => entry.nsPerPath[i]);
    const visits = bySize.map((entry) => entry.visits[i]);
    const visitsFlat = visits.every((count) => count === visits[0]);
    const patterns = new Set(bySize.map((entry) => entry.expected[i]));
    if (patterns.size !== 1) throw new Error(`${sample.method} ${sample.path} matches differently across sizes: ${[...patterns].join(', ')}`);
    rows.push([`${sample.method} ${sample.path}`, bySize[0].expected[i] ?? '(none: default)', ...values.map((ns) => fmt(ns, 0)), visitsFlat ? String(visits[0]) : visits.join('/'), ...verdict(values, visitsFlat)]);
  });
  log(table(header, rows));
  const spreadValues = bySize.map((entry) => entry.nsSpread);
  log(`\n1,024 requests spread over the whole tree (round robin over every unit and route kind): ${bySize.map((entry) => `${entry.size.toLocaleString('en-US')} routes ${fmt(entry.nsSpread, 0)} ns`).join(', ')}`);
  log('  (not like-for-like: at 10 routes these requests reach 8 distinct routes, at 10,000 routes about 1,000, in a root Map of');
  log('   2,000+ keys; the nodes visited per lookup do not change, so the growth is memory traffic, not work per lookup)');
  log(`compile time: ${bySize.map((entry) => `${entry.size.toLocaleString('en-US')} routes ${fmt(entry.compileMs, 0)} ms`).join(', ')}`);
  const flat = verdicts.every(Boolean);
  log(`\nflat: ${flat ? 'YES' : 'NO'} — ${flat ? `no request costs more than ${FLAT_RATIO}× more at 10,000 routes than at 10, and each visits the same number of tree nodes at every size` : `some request costs more than ${FLAT_RATIO}× more at 10,000 routes than at 10, or visits more nodes`}`);
  const results = {
    generatedAt: new Date().toISOString(),
    node: process.version,
    flat,
    flatRatioThreshold: FLAT_RATIO,
    sizes: SIZES,
    requests: samples.map((sample, i) => ({
      method: sample.method,
      path: sample.path,
      matched: bySize[0].expected[i],
      nsPerMatch: bySize.map((entry) => round(entry.nsPerPath[i], 1)),
      visits: bySize.map((entry) => entry.visits[i]),
    })),
    spreadNsPerMatch: spreadValues.map((ns) => round(ns, 1)),
    compileMs: bySize.map((entry) => round(entry.compileMs, 1)),
  };
  mkdirSync(join(__dirname, 'results'), { recursive: true });
  writeFileSync(join(__dirname, 'results', 'match-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  log('wrote bench/results/match-latest.json');
  return flat ? 0 : 1;
}

if (require.main === module) runMain('bench match', main);

module.exports = { main };
