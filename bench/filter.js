#!/usr/bin/env node
'use strict';
/**
 * Lists filtered by the gateway (docs/policy-format.md, `filter`): what a filtered list costs, three rows over the same
 * host answer, a JSON array of 10,000 items (about 1 MB):
 * - plain: a route with a permission and no `filter`, for an unscoped user (bob) — a plain proxied request;
 * - ALL: the same list on a route with `filter`, for the same unscoped user: the plan is `ALL`, the answer is streamed
 *   untouched (no buffering), so it should cost what the plain row costs;
 * - SOME: the filtered route for a user scoped to one project (alice): the gateway reads the whole answer (asking the
 *   host for `identity`), parses it, keeps 1 item of 10,000 and sends it with a new Content-Length.
 * For each: the p50 and p99 of the server time (inside the gateway's HTTP server, request to last byte handed to the
 * socket) and the process CPU per request (client included, the same client for every row). Then memory: the peak heap
 * and array buffers while `--concurrency` scoped requests run at once, beside `upstream.filter-max-bytes` (the
 * bound of one buffered answer), and an answer over that bound (502, never buffered past it).
 *
 * In process, on the embedded defaults. Usage: node bench/filter.js [--calls N] [--items N] [--concurrency N]
 * (needs `npm run build`); also `npm run bench -- --filter`
 */
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { numberFlag } = require('./lib/args');
const { requireDist } = require('./lib/dist');
const { inProcessEnv, percentile, recordServerTimes, ROOT } = require('./lib/in-process');

async function main(argv = process.argv.slice(2)) {
  const calls = numberFlag(argv, '--calls', 200);
  const itemCount = numberFlag(argv, '--items', 10_000);
  const concurrency = numberFlag(argv, '--concurrency', 8);
  const { loadConfig } = requireDist('config');
  const { startGateway } = requireDist('app/start-gateway');
  const dir = mkdtempSync(join(tmpdir(), 'iam-bench-filter-'));
  const items = Array.from({ length: itemCount }, (_, i) => ({ id: i + 1, name: `project ${String(i + 1).padStart(6, '0')}`, owner: 'someone@example.com', tags: ['alpha', 'beta'], open: i % 2 === 0 }));
  const list = Buffer.from(JSON.stringify(items));
  const huge = Buffer.from(JSON.stringify(Array.from({ length: itemCount * 10 }, (_, i) => ({ ...items[i % itemCount], id: i + 1 }))));
  const upstream = require('node:http')
    .createServer((req, res) => {
      const body = req.url.startsWith('/api/huge') ? huge : list;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    })
    .listen(0, '127.0.0.1');
  await new Promise((resolve) => upstream.once('listening', resolve));
  const env = inProcessEnv(
    dir,
    `http://127.0.0.1:${upstream.address().port}`,
    [
      'version: 1',
      'default: deny',
      'routes:',
      '  - { path: /api/plain, methods: [GET], permission: project:list }',
      '  - { path: /api/projects, methods: [GET], permission: project:list, filter: { type: PROJECT, id: /id } }',
      '  - { path: /api/huge, methods: [GET], permission: project:list, filter: { type: PROJECT, id: /id } }',
      '',
    ].join('\n'),
  );
  // Server time per row (the client names its row in a header), inside the gateway's HTTP server.
  // The upstream is an HTTP server of this process too: its own requests are left out.
  const upstreamPort = upstream.address().port;
  const serverTimes = recordServerTimes('/api/', (request) => (request.socket.localPort === upstreamPort ? null : `${request.url} ${request.headers['x-bench-row'] ?? ''}`));
  const config = loadConfig({ file: join(ROOT, 'config', 'default.yaml'), env, cwd: ROOT });
  const gateway = await startGateway(config);
  try {
    const tokenOf = async (username) => {
      const login = await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password: `${username}-password`, clientType: 'WEB' }) });
      if (login.status !== 200) throw new Error(`login of ${username}: ${login.status} ${await login.text()}`);
      return (await login.json()).accessToken;
    };
    const bob = await tokenOf('bob');
    const alice = await tokenOf('alice');
    const get = async (path, token, row) => {
      const answer = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}`, 'x-bench-row': row } });
      const body = Buffer.from(await answer.arrayBuffer());
      return { status: answer.status, body };
    };
    // What each row answers, checked before it is timed.
    const plain = await get('/api/plain', bob, 'check');
    const all = await get('/api/projects', bob, 'check');
    const some = await get('/api/projects', alice, 'check');
    if (plain.status !== 200 || !plain.body.equals(list)) throw new Error(`plain: expected the host's list, got ${plain.status}`);
    if (all.status !== 200 || !all.body.equals(list)) throw new Error(`ALL: expected the host's list untouched, got ${all.status}`);
    const kept = JSON.parse(some.body.toString());
    if (some.status !== 200 || kept.length !== 1 || kept[0].id !== 1) throw new Error(`SOME: expected project 1 only, got ${some.status} ${some.body.subarray(0, 200)}`);
    const rows = [
      { label: 'plain proxied list (no filter, unscoped user)', path: '/api/plain', token: bob },
      { label: 'filtered route, unscoped user (plan ALL: untouched)', path: '/api/projects', token: bob },
      { label: `filtered route, scoped user (plan SOME: keeps 1 of ${itemCount})`, path: '/api/projects', token: alice },
    ];
    for (let i = 0; i < 30; i++) for (const row of rows) await get(row.path, row.token, 'warm');
    const results = [];
    for (const [index, row] of rows.entries()) {
      const cpuBefore = process.cpuUsage();
      for (let i = 0; i < calls; i++) await get(row.path, row.token, `row${index}`);
      const cpu = process.cpuUsage(cpuBefore);
      const times = serverTimes.get(`${row.path} row${index}`);
      results.push({ ...row, p50: percentile(times, 50), p99: percentile(times, 99), cpuUs: (cpu.user + cpu.system) / calls });
    }
    console.log(`host answer: ${itemCount} items, ${(list.length / 1024 / 1024).toFixed(2)} MiB; ${calls} sequential requests per row`);
    for (const row of results) {
      console.log(`${row.label}: server time p50 ${row.p50.toFixed(2)} ms, p99 ${row.p99.toFixed(2)} ms; CPU ${Math.round(row.cpuUs)} µs per request (client included)`);
    }
    const [plainRow, allRow, someRow] = results;
    console.log(`ALL vs plain: CPU ${(allRow.cpuUs / plainRow.cpuUs).toFixed(3)}×, p50 ${(allRow.p50 / plainRow.p50).toFixed(3)}×`);
    console.log(`SOME vs plain: p50 ${(someRow.p50 - plainRow.p50 >= 0 ? '+' : '')}${(someRow.p50 - plainRow.p50).toFixed(2)} ms of server time to read, parse and filter ${(list.length / 1024 / 1024).toFixed(2)} MiB`);

    // Memory: scoped requests at once; each buffers at most filter-max-bytes.
    global.gc?.();
    const base = process.memoryUsage();
    let peakHeap = base.heapUsed;
    let peakBuffers = base.arrayBuffers;
    const sampler = setInterval(() => {
      const now = process.memoryUsage();
      peakHeap = Math.max(peakHeap, now.heapUsed);
      peakBuffers = Math.max(peakBuffers, now.arrayBuffers);
    }, 2);
    await Promise.all(Array.from({ length: concurrency }, async () => {
      for (let i = 0; i < 10; i++) await get('/api/projects', alice, 'memory');
    }));
    clearInterval(sampler);
    const maxBytes = config.upstream.filterMaxBytes;
    const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
    console.log(`memory, ${concurrency} scoped requests at once: peak heap +${mib(peakHeap - base.heapUsed)}, peak array buffers +${mib(peakBuffers - base.arrayBuffers)} (filter-max-bytes ${mib(maxBytes)} per request; ${concurrency} × the ${mib(list.length)} answer = ${mib(concurrency * list.length)})`);
    const over = await get('/api/huge', alice, 'huge');
    console.log(`an answer of ${mib(huge.length)} for a scoped user: ${over.status} ${over.status === 502 ? JSON.parse(over.body.toString()).code : ''} (over filter-max-bytes: refused, never sent unfiltered)`);
  } finally {
    await gateway.close();
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}

module.exports = { main };
