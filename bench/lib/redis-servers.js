'use strict';
/**
 * Redis servers the bench starts itself (bench/scale.js): one plain server, or a Redis Cluster of primaries
 * with one replica each, every node a `redis-server` child on 127.0.0.1 with nothing saved to disk. The
 * servers are registered children (lib/children.js): stopped at the end, on an error and on Ctrl-C, and
 * sent SIGTERM by the kernel if the runner dies (setpriv --pdeathsig).
 */
const { execFile } = require('node:child_process');
const { mkdirSync } = require('node:fs');
const { join } = require('node:path');
const { spawnProcess } = require('./children');
const { freePort } = require('./gateway');

const REDIS_SERVER = process.env.REDIS_SERVER_BIN || 'redis-server';
const REDIS_CLI = process.env.REDIS_CLI_BIN || 'redis-cli';
const START_TIMEOUT_MS = 15_000;
const CLUSTER_TIMEOUT_MS = 30_000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs redis-cli with `args`; resolves its stdout (rejects with its stderr on a non-zero exit). */
function redisCli(args, { timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    execFile(REDIS_CLI, args, { timeout: timeoutMs, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`redis-cli ${args.join(' ')}: ${(stderr || error.message).trim()}`));
      else resolve(stdout);
    });
  });
}

/** redis-cli against one node. */
function nodeCli(port, args, options) {
  return redisCli(['-h', '127.0.0.1', '-p', String(port), ...args], options);
}

/** `INFO <section>` of one node as a map of fields. */
async function info(port, section) {
  const text = await nodeCli(port, ['INFO', section]);
  const fields = {};
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/** Whether `redis-server` can be run at all (resolves its version line, or null). */
function redisServerVersion() {
  return new Promise((resolve) => {
    execFile(REDIS_SERVER, ['--version'], { timeout: 5000, encoding: 'utf8' }, (error, stdout) => resolve(error ? null : stdout.trim()));
  });
}

/** Starts one `redis-server` on a free port in `dir`; resolves its handle (`port`, `url`) once it answers PING. */
async function startRedisServer({ name, dir, extraArgs = [] }) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'no', '--loglevel', 'warning', ...extraArgs];
  const handle = spawnProcess(name, REDIS_SERVER, args, { parentDeathSignal: 'SIGTERM' });
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (handle.exitCode !== undefined) throw new Error(`${name} exited (${handle.exitCode}) during start:\n${handle.tail()}`);
    const pong = await nodeCli(port, ['PING'], { timeoutMs: 1000 }).catch(() => '');
    if (pong.trim() === 'PONG') break;
    if (Date.now() > deadline) {
      await handle.stop();
      throw new Error(`${name} did not answer PING within ${START_TIMEOUT_MS / 1000} s:\n${handle.tail()}`);
    }
    await sleep(50);
  }
  return Object.assign(handle, { port, url: `redis://127.0.0.1:${port}` });
}

/** One plain Redis server (no replicas): the "single Redis" topology. */
async function startSingleRedis(dir) {
  const server = await startRedisServer({ name: 'redis-single', dir: join(dir, 'single') });
  return { kind: 'single', url: server.url, nodes: [server], primaries: () => Promise.resolve([server]), describe: `one redis-server on 127.0.0.1:${server.port}` };
}

/**
 * A Redis Cluster of `primaries` primaries with `replicasPer` replicas each (`redis-cli --cluster create`),
 * resolved once every node reports `cluster_state:ok` and every primary has its replicas attached.
 * Its gateway URL is `redis+cluster://` followed by the primaries' addresses (the seed nodes).
 */
async function startRedisCluster(dir, { primaries = 3, replicasPer = 1, nodeTimeoutMs = 1000 } = {}) {
  const count = primaries * (1 + replicasPer);
  const nodes = [];
  for (let i = 0; i < count; i++) {
    const nodeDir = join(dir, `cluster-${i}`);
    nodes.push(
      await startRedisServer({
        name: `redis-cluster-${i}`,
        dir: nodeDir,
        extraArgs: ['--cluster-enabled', 'yes', '--cluster-config-file', join(nodeDir, 'nodes.conf'), '--cluster-node-timeout', String(nodeTimeoutMs)],
      }),
    );
  }
  await redisCli(['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', String(replicasPer), '--cluster-yes'], { timeoutMs: CLUSTER_TIMEOUT_MS });
  const deadline = Date.now() + CLUSTER_TIMEOUT_MS;
  for (;;) {
    const states = await Promise.all(nodes.map((node) => nodeCli(node.port, ['CLUSTER', 'INFO']).catch(() => '')));
    const ok = states.every((text) => /cluster_state:ok/.test(text));
    const roles = await Promise.all(nodes.map((node) => info(node.port, 'replication').catch(() => ({}))));
    const attached = roles.filter((role) => role.role === 'master').every((role) => Number(role.connected_slaves) >= replicasPer);
    const syncing = roles.filter((role) => role.role === 'slave').every((role) => role.master_link_status === 'up');
    if (ok && attached && syncing) break;
    if (Date.now() > deadline) throw new Error(`the Redis Cluster did not reach cluster_state:ok with its replicas in sync within ${CLUSTER_TIMEOUT_MS / 1000} s`);
    await sleep(200);
  }
  const seeds = (await clusterPrimaries(nodes)).map((node) => `127.0.0.1:${node.port}`);
  return {
    kind: 'cluster',
    url: `redis+cluster://${seeds.join(',')}`,
    nodes,
    primaries: () => clusterPrimaries(nodes),
    describe: `Redis Cluster, ${primaries} primaries + ${primaries * replicasPer} replicas (cluster-node-timeout ${nodeTimeoutMs} ms), 127.0.0.1:${nodes.map((node) => node.port).join(',')}`,
  };
}

/** The nodes that are primaries now (alive and `role:master`). */
async function clusterPrimaries(nodes) {
  const alive = nodes.filter((node) => node.exitCode === undefined);
  const roles = await Promise.all(alive.map((node) => info(node.port, 'replication').catch(() => ({}))));
  return alive.filter((_node, i) => roles[i].role === 'master');
}

/** The node (of `nodes`) that serves `key`'s slot now, from `CLUSTER KEYSLOT` and `CLUSTER SLOTS`. */
async function nodeOfKey(nodes, key) {
  const alive = nodes.find((node) => node.exitCode === undefined);
  const slot = Number((await nodeCli(alive.port, ['CLUSTER', 'KEYSLOT', key])).trim());
  const primaries = await clusterPrimaries(nodes);
  for (const node of primaries) {
    const own = await nodeCli(node.port, ['CLUSTER', 'MYID']);
    const text = await nodeCli(node.port, ['CLUSTER', 'NODES']);
    const mine = text.split('\n').find((line) => line.startsWith(own.trim()));
    if (!mine) continue;
    for (const range of mine.trim().split(' ').slice(8)) {
      if (range.startsWith('[')) continue;
      const [from, to = from] = range.split('-').map(Number);
      if (slot >= from && slot <= to) return node;
    }
  }
  return null;
}

/** Keys stored across `nodes` (DBSIZE of each primary, summed): tells that a gateway really writes there. */
async function keyCount(nodes) {
  const primaries = await clusterPrimaries(nodes);
  const sizes = await Promise.all(primaries.map((node) => nodeCli(node.port, ['DBSIZE']).then((text) => Number(text.trim()))));
  return sizes.reduce((sum, size) => sum + size, 0);
}

module.exports = { redisCli, nodeCli, info, redisServerVersion, startRedisServer, startSingleRedis, startRedisCluster, clusterPrimaries, nodeOfKey, keyCount };
