#!/usr/bin/env node
'use strict';
/**
 * What one password login costs the gateway's process, thread by thread: CPU milliseconds per login on the main
 * thread (Koa, the token store, the audit record), the database thread (the ORM and the driver; with the embedded
 * database, PGlite too), the password threads (argon2id verification) and V8's / libuv's helper threads (GC, …),
 * for N sequential logins after each login user logged in once. This is the budget the "proxied p99 with 20
 * logins/s" row spends: 20 × the total per login is the share of the machine the logins take from the proxy.
 *
 * Threads are told apart by their priority: the gateway lowers the database thread's (nice 5) and the password
 * threads' (nice 10) and leaves the main and helper threads at the process's own (src/threads/low-priority-worker.ts).
 *
 * Usage: node bench/lib/login-cost.js [--logins N]   (also: npm run bench -- --login-cost)
 * Uses REDIS_URL / DATABASE_URL like the other benchmarks (else Redis on 127.0.0.1 when it answers, and the
 * embedded database in memory).
 */
const { readdirSync, readFileSync } = require('node:fs');
const os = require('node:os');
const { runMain } = require('./children');
const { startGatewayProcess } = require('./gateway');
const { login } = require('./http');
const { loginEachOnce, writeLoginUsers } = require('./login-users');
const { benchWorkspace } = require('./workspace');
const { ticksPerSecond } = require('./proc');
const { resolveRedis } = require('./redis');
const { fmt, table } = require('./report');
const { startUpstream } = require('./services');

const log = (message) => process.stdout.write(`${message}\n`);

/** Every thread of `pid`: tid → { ticks (utime + stime), nice }. */
function threadTimes(pid) {
  const threads = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      threads.set(tid, { ticks: Number(fields[11]) + Number(fields[12]), nice: Number(fields[16]) });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return threads;
}

/** The thread's role in the gateway, from its id and priority. */
function roleOf(pid, tid, nice, baseNice) {
  if (String(pid) === tid) return 'main thread (HTTP, Koa, token store, audit)';
  if (nice === baseNice + 5) return 'database thread (ORM, driver, embedded database)';
  if (nice === baseNice + 10) return 'password threads (argon2id)';
  return 'V8 / libuv helper threads (GC, …)';
}

async function main(argv = []) {
  const countIndex = argv.indexOf('--logins');
  const count = countIndex >= 0 ? Number(argv[countIndex + 1]) : 100;
  if (!Number.isInteger(count) || count < 1) throw new Error('--logins needs a positive whole number');
  const redis = await resolveRedis();
  const workspace = benchWorkspace('login-cost', redis.url);
  const { dir, policyDir, prefix } = workspace;
  const users = writeLoginUsers(dir);
  try {
    const upstream = await startUpstream();
    const gateway = await startGatewayProcess({ name: 'gateway', upstreamUrl: upstream.url, policyDir, redisUrl: redis.url, prefix, extraEnv: users.env });
    await loginEachOnce(gateway.url, users);
    const baseNice = os.getPriority(gateway.pid);
    const before = threadTimes(gateway.pid);
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i++) await login(gateway.url, users.usernames[i % users.usernames.length], users.password);
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
    const after = threadTimes(gateway.pid);
    const msPerTick = 1000 / ticksPerSecond();
    const byRole = new Map();
    for (const [tid, now] of after) {
      const ticks = now.ticks - (before.get(tid)?.ticks ?? 0);
      const role = roleOf(gateway.pid, tid, now.nice, baseNice);
      byRole.set(role, (byRole.get(role) ?? 0) + ticks * msPerTick);
    }
    const total = [...byRole.values()].reduce((sum, ms) => sum + ms, 0);
    log(`${count} sequential logins (${users.usernames.length} users, each logged in once before), ${fmt(wallMs / count, 1)} ms each; ` +
      `token store ${redis.url ? 'Redis' : 'in-process'}, database ${process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded (in memory)'}; ${os.cpus().length} cpus\n`);
    const rows = [...byRole].sort((a, b) => b[1] - a[1]).map(([role, ms]) => [role, fmt(ms / count, 2), fmt((100 * ms) / total, 0)]);
    rows.push(['total', fmt(total / count, 2), '100']);
    log(table(['thread', 'cpu ms / login', '%'], rows));
    log(`\n20 logins/s take ${fmt((20 * total) / count / 10, 0)}% of one core (${fmt((20 * total) / count / 10 / os.cpus().length, 0)}% of this machine)` +
      `${process.env.DATABASE_URL ? ", PostgreSQL's own processes not counted" : ''}.`);
    return 0;
  } finally {
    await workspace.close();
  }
}

if (require.main === module) runMain('bench login-cost', main);

module.exports = { main };
