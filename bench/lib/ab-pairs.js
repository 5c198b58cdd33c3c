#!/usr/bin/env node
'use strict';
/**
 * This build against another built checkout (`DIR`), judged on CPU per proxied request: for each of N pairs, a fresh
 * gateway of each build is started, both are loaded at the same time (25 connections each, same upstream, same
 * request), and the pair gives one ratio, this build's CPU µs per request ÷ the other's. The answer is the median
 * of the pairs' ratios and their range.
 *
 * Why this shape, on a small shared VM (measured on 2026-11-27, 2 vCPUs):
 * - Loaded one after the other (`--compare`), two gateways see different phases of the machine: identical builds
 *   differed by 10% in the median of four rounds. Loaded at the same time, both see the same phase.
 * - Two processes of the same build keep a difference of their own for their whole life (up to 7% of CPU per
 *   request between two fresh processes of one build, the same sign in every round of the pair). A fresh pair per
 *   measurement turns that into noise that the median of several pairs averages out, instead of a bias.
 * `--ab .` (this checkout against itself) shows the noise floor of the machine: the spread of ratios that means
 * nothing.
 *
 * Usage: node bench/lib/ab-pairs.js DIR [--pairs N] [--duration S] [--cold] [--candidate]   (also: npm run bench -- --ab DIR)
 * `--cold`: both gateways without the session cache (one Redis read per request; needs Redis).
 * `--candidate`: this build's gateway also decides every request by a candidate policy (`iam.policy.candidate-dir`, a
 * copy of the bench policy: it agrees, as a candidate does on most requests), the other not; with `.` as DIR, the
 * ratio is the candidate's cost (the issue's goal: ≤ 1.10).
 */
const { cpSync, existsSync } = require('node:fs');
const os = require('node:os');
const { join, resolve } = require('node:path');
const { numberFlag } = require('./args');
const { runMain, ROOT } = require('./children');
const { startGatewayProcess } = require('./gateway');
const { login } = require('./http');
const { measure } = require('./load');
const { BENCH_PATH } = require('./policy');
const { benchWorkspace } = require('./workspace');
const { resolveRedis } = require('./redis');
const { fmt, fmtInt } = require('./report');
const { startUpstream } = require('./services');
const { median } = require('./stats');

const log = (message) => process.stdout.write(`${message}\n`);

/** One pair: a fresh gateway of each build, loaded at the same time; started in `order`, stopped at the end. */
async function measurePair(builds, order, common, durationS) {
  const started = {};
  try {
    for (const build of order) {
      started[build.key] = await startGatewayProcess({ ...common, name: `gateway-ab-${build.key}`, root: build.root, extraEnv: { ...common.extraEnv, ...build.extraEnv } });
    }
    const loads = await Promise.all(
      builds.map(async (build) => {
        const gateway = started[build.key];
        const headers = { authorization: `Bearer ${(await login(gateway.url, 'alice', 'alice-password')).accessToken}` };
        return measure({ url: `${gateway.url}${BENCH_PATH}`, connections: 25, durationS, warmupS: 3, headers, watch: { gateway: gateway.pid } });
      }),
    );
    loads.forEach((load, index) => {
      if (load.non2xx > 0) throw new Error(`${builds[index].key}: ${load.non2xx} answers were not 2xx`);
    });
    return loads.map((load) => ({ rps: load.rps, cpu: load.cpuMicrosPerRequest.gateway }));
  } finally {
    for (const gateway of Object.values(started)) await gateway.stop();
  }
}

async function main(argv = []) {
  const dirArg = argv.find((arg, index) => !arg.startsWith('--') && !['--pairs', '--duration'].includes(argv[index - 1]));
  if (!dirArg || !existsSync(join(dirArg, 'dist', 'src'))) {
    log(`bench --ab: ${dirArg ? `${dirArg} is not a built checkout (no dist/src)` : 'no directory given'}; give another built checkout, or . for this one against itself`);
    return 2;
  }
  const other = resolve(dirArg);
  const pairs = numberFlag(argv, '--pairs', 6);
  const durationS = numberFlag(argv, '--duration', 8);
  const cold = argv.includes('--cold');
  const candidate = argv.includes('--candidate');
  const redis = cold || process.env.REDIS_URL ? await resolveRedis() : { url: null };
  if (cold && !redis.url) {
    log('bench --ab --cold: needs Redis (REDIS_URL, or one answering on 127.0.0.1:6379)');
    return 2;
  }
  const workspace = benchWorkspace('ab', redis.url);
  const { policyDir, prefix } = workspace;
  try {
    const upstream = await startUpstream();
    const common = { upstreamUrl: upstream.url, policyDir, redisUrl: redis.url, prefix, extraEnv: cold ? { IAM_TOKEN_CACHE_ENABLED: 'false' } : {} };
    const candidateDir = join(workspace.dir, 'candidate');
    if (candidate) cpSync(policyDir, candidateDir, { recursive: true });
    const builds = [
      { key: 'this', root: ROOT, extraEnv: candidate ? { IAM_POLICY_CANDIDATE_DIR: candidateDir } : {} },
      { key: 'other', root: other, extraEnv: {} },
    ];
    log(
      `this build${candidate ? ' with a candidate policy' : ''} ÷ ${other === ROOT ? (candidate ? 'itself without one' : 'itself (noise floor)') : other}: ${pairs} pairs of fresh gateways (${cold ? 'no session cache' : 'session cache'}, ` +
        `token store ${redis.url ? 'Redis' : 'in-process'}), both loaded at once on ${BENCH_PATH}, 25 connections each, ${durationS} s after 3 s of warm-up; ${os.cpus().length} cpus\n`,
    );
    const ratios = { cpu: [], rps: [] };
    for (let pair = 0; pair < pairs; pair++) {
      const [mine, theirs] = await measurePair(builds, pair % 2 === 0 ? builds : [...builds].reverse(), common, durationS);
      ratios.cpu.push(mine.cpu / theirs.cpu);
      ratios.rps.push(mine.rps / theirs.rps);
      log(
        `  pair ${pair + 1}/${pairs}  this ${fmtInt(mine.rps)} req/s, ${fmt(mine.cpu, 1)} µs/req  other ${fmtInt(theirs.rps)} req/s, ${fmt(theirs.cpu, 1)} µs/req` +
          `  cpu ratio ${fmt(mine.cpu / theirs.cpu, 3)}`,
      );
    }
    const range = (values) => `${fmt(Math.min(...values), 3)}–${fmt(Math.max(...values), 3)}`;
    const lower = ratios.cpu.filter((value) => value < 1).length;
    log(`\nthis ÷ other, median of ${pairs} pairs: CPU per request ${fmt(median(ratios.cpu), 3)} (pairs ${range(ratios.cpu)}; lower in ${lower} of ${pairs}), req/s ${fmt(median(ratios.rps), 3)} (pairs ${range(ratios.rps)})`);
    return 0;
  } finally {
    await workspace.close();
  }
}

if (require.main === module) runMain('bench ab', main);

module.exports = { main };
