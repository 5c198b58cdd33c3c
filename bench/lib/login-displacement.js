#!/usr/bin/env node
'use strict';
/**
 * Whether logins raise the proxied p99 through the gateway's own process (its event loop, its GC, its Koa work) or
 * through the machine (CPU the logins take from the proxy, the load generator and the upstream alike): gateway A
 * proxies the benchmarked request under load while 20 logins/s go either to A itself or to a second gateway B on the
 * same machine, alternating with runs without logins. If the p99 rises as much with the logins on B, the cause is
 * the machine's CPU, and no change inside the gateway's login path can remove it, only make a login cheaper.
 *
 * Usage: node bench/lib/login-displacement.js [--rounds N] [--duration S]   (also: npm run bench -- --login-displacement)
 */
const os = require('node:os');
const { numberFlag } = require('./args');
const { runMain } = require('./children');
const { startGatewayProcess } = require('./gateway');
const { login } = require('./http');
const { measure } = require('./load');
const { loginDriver } = require('./login-driver');
const { loginEachOnce, writeLoginUsers } = require('./login-users');
const { BENCH_PATH } = require('./policy');
const { benchWorkspace } = require('./workspace');
const { resolveRedis } = require('./redis');
const { fmt, fmtInt, table } = require('./report');
const { startUpstream } = require('./services');
const { median } = require('./stats');

const log = (message) => process.stdout.write(`${message}\n`);
const LOGINS_PER_SECOND = 20;

async function main(argv = []) {
  const rounds = numberFlag(argv, '--rounds', 3);
  const durationS = numberFlag(argv, '--duration', 8);
  const redis = await resolveRedis();
  const workspace = benchWorkspace('displacement', redis.url, ['-a', '-b']);
  const { policyDir, prefixes } = workspace;
  const users = writeLoginUsers(workspace.dir);
  try {
    const upstream = await startUpstream();
    const common = { upstreamUrl: upstream.url, policyDir, redisUrl: redis.url, extraEnv: users.env };
    const a = await startGatewayProcess({ ...common, name: 'gateway-a', prefix: prefixes[0] });
    const b = await startGatewayProcess({ ...common, name: 'gateway-b', prefix: prefixes[1] });
    await loginEachOnce(a.url, users);
    await loginEachOnce(b.url, users);
    const headers = { authorization: `Bearer ${(await login(a.url, 'alice', 'alice-password')).accessToken}` };
    log(`gateway A proxies ${BENCH_PATH} (50 connections, ${durationS} s runs); ${LOGINS_PER_SECOND} logins/s go to A itself or to gateway B; ${os.cpus().length} cpus\n`);
    const runs = { none: [], same: [], other: [] };
    const run = async (kind, target) => {
      const during = target ? loginDriver({ gatewayUrl: target.url, username: users.usernames, password: users.password, rate: LOGINS_PER_SECOND, maxSeconds: durationS }) : null;
      const result = await measure({ url: `${a.url}${BENCH_PATH}`, connections: 50, durationS, warmupS: 1, headers, during });
      runs[kind].push(result);
      const logins = result.background ? `, ${fmt(result.background.ratePerSecond, 1)} logins/s` : '';
      const label = kind === 'none' ? 'no logins' : kind === 'same' ? 'logins to A (same)' : 'logins to B (other)';
      log(`  ${label.padEnd(19)}  ${fmtInt(result.rps)} req/s  p99 ${fmt(result.p99, 2)} ms${logins}`);
    };
    for (let round = 0; round < rounds; round++) {
      await run('none', null);
      await run('same', a);
      await run('none', null);
      await run('other', b);
    }
    const p99None = median(runs.none.map((r) => r.p99));
    const rows = [
      ['no logins', fmtInt(median(runs.none.map((r) => r.rps))), fmt(p99None, 2), '1.00', '-'],
      ...['same', 'other'].map((kind) => [
        kind === 'same' ? 'logins to A itself' : 'logins to B (another process)',
        fmtInt(median(runs[kind].map((r) => r.rps))),
        fmt(median(runs[kind].map((r) => r.p99)), 2),
        fmt(median(runs[kind].map((r) => r.p99)) / p99None, 2),
        fmt(median(runs[kind].map((r) => r.background.ratePerSecond)), 1),
      ]),
    ];
    log(`\nmedians over ${rounds} rounds (gateway A's proxied load):\n`);
    log(table(['logins', 'req/s', 'p99 ms', 'p99 ÷ none', 'logins/s'], rows));
    return 0;
  } finally {
    await workspace.close();
  }
}

if (require.main === module) runMain('bench login-displacement', main);

module.exports = { main };
