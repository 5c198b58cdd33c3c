'use strict';
/**
 * Starts the real gateway as its own process, exactly as a user does: `node bin/iam-gateway.js serve` from
 * the built dist, configured only through environment variables (docs/configuration.md), with the shipped
 * config/default.yaml, users and provisioning file.
 */
const net = require('node:net');
const { join } = require('node:path');
const { moveChildrenToLoad, spawnNode, ROOT } = require('./children');
const { request } = require('./http');

const STARTUP_TIMEOUT_MS = 90_000;

/** A port that was free a moment ago (the gateway needs its ports up front: it logs nothing at warn level). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Spawns a gateway in front of `upstreamUrl` and resolves once `/health/ready` answers 200.
 * `redisUrl` null = in-process token store. `databaseUrl` overrides DATABASE_URL (default: the user's
 * DATABASE_URL, else the embedded PGlite in memory). `extraEnv` wins over everything (e.g. IAM_TOKEN_CACHE_ENABLED);
 * `nodeFlags` go to node itself (e.g. --cpu-prof, which NODE_OPTIONS refuses). `root`: the checkout whose
 * built gateway runs (another build for `--compare`; its example users file is the same). `role`: with
 * `--pin`, where it runs (lib/pin.js): a gateway is a proxy under test; its embedded database is moved to the
 * load CPUs once it is ready.
 */
/**
 * The example users and grants (config/default.yaml names none): alice logs in through the users-file
 * authenticator with her example profile, as in `npm run demo`.
 */
const EXAMPLE_IDENTITIES_ENV = {
  IAM_AUTHENTICATOR_TYPE: 'users-file',
  IAM_AUTHENTICATOR_PATH: join(ROOT, 'config', 'users.example.yaml'),
  IAM_PROVISION_FILE: join(ROOT, 'config', 'provision.example.yaml'),
};

async function startGatewayProcess({ name, upstreamUrl, policyDir, redisUrl, prefix, databaseUrl = null, extraEnv = {}, nodeFlags = [], root = ROOT, role = 'proxy' }) {
  const port = await freePort();
  const managementPort = await freePort();
  const env = {
    ...process.env,
    PORT: String(port),
    MANAGEMENT_PORT: String(managementPort),
    SERVER_HOST: '127.0.0.1',
    UPSTREAM_URL: upstreamUrl,
    IAM_POLICIES_DIR: policyDir,
    IAM_TOKEN_STORE_PREFIX: prefix,
    LOG_LEVEL: 'warn',
    // The login-load phase logs in 20 times a second from one address; only failures count, but the
    // bench must never be throttled by its own traffic.
    IAM_LOGIN_RATE_LIMIT_MAX_FAILURES: '1000000',
    IAM_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_ADDRESS: '1000000',
    ...EXAMPLE_IDENTITIES_ENV,
    REDIS_URL: redisUrl ?? '',
  };
  // No DATABASE_URL: the embedded PGlite, in memory, so two gateways never share (or leave behind) a data
  // directory. With DATABASE_URL set, the user's PostgreSQL is used as is.
  if (databaseUrl) {
    // A PGlite socket in another process (lib/database-process.js): it serializes sessions, one connection.
    env.DATABASE_URL = databaseUrl;
    env.DATABASE_POOL_SIZE = '1';
  } else if (!process.env.DATABASE_URL) {
    env.DATABASE_URL = '';
    env.DATABASE_EMBEDDED_DIR = 'memory://';
  }
  // Last, so that it wins over the defaults above (a DATABASE_URL of its own included).
  Object.assign(env, extraEnv);
  // Each build reads its own shipped defaults (another checkout may not know this one's configuration keys).
  env.IAM_CONFIG = join(root, 'config', 'default.yaml');
  const handle = spawnNode(name, join(root, 'bin', 'iam-gateway.js'), ['serve'], { env, preloadExitWithParent: true, nodeFlags, role });
  const url = `http://127.0.0.1:${port}`;
  const managementUrl = `http://127.0.0.1:${managementPort}`;
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (handle.exitCode !== undefined) throw new Error(`${name} exited (${handle.exitCode}) during start:\n${handle.tail()}`);
    if (Date.now() > deadline) {
      await handle.stop();
      throw new Error(`${name} not ready after ${STARTUP_TIMEOUT_MS / 1000} s:\n${handle.tail()}`);
    }
    const ready = await request(`${managementUrl}/health/ready`, { timeoutMs: 2000 }).catch(() => null);
    if (ready && ready.status === 200) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  moveChildrenToLoad(handle.pid);
  return Object.assign(handle, { url, managementUrl, port, managementPort, prefix });
}

/**
 * A few gauges from the gateway's Prometheus endpoint (prom-client's default process metrics, prefixed
 * `iam_`), in bytes: heap used/total, external (ArrayBuffers, WASM) and resident memory. Null when unreadable.
 */
async function gatewayMemoryMetrics(managementUrl) {
  const value = await scrapeMetrics(managementUrl);
  if (value === null) return null;
  return {
    heapUsed: value('iam_nodejs_heap_size_used_bytes'),
    heapTotal: value('iam_nodejs_heap_size_total_bytes'),
    external: value('iam_nodejs_external_memory_bytes'),
    resident: value('iam_process_resident_memory_bytes'),
    sessionCacheEntries: value('iam_session_cache_entries'),
  };
}

/**
 * One scrape of the gateway's Prometheus endpoint, as a reader of unlabelled metrics: `value(name)` is the metric's
 * number, or null when it is absent. Null when the endpoint cannot be read.
 */
async function scrapeMetrics(managementUrl) {
  const answer = await request(`${managementUrl}/metrics`).catch(() => null);
  if (!answer || answer.status !== 200) return null;
  const lines = answer.body.split('\n');
  return (name) => {
    const line = lines.find((entry) => entry.startsWith(`${name} `));
    return line ? Number(line.slice(name.length + 1)) : null;
  };
}

/** The value of an unlabelled metric on the gateway's Prometheus endpoint (e.g. a counter's total), or null when unreadable. */
async function gatewayMetricValue(managementUrl, name) {
  const value = await scrapeMetrics(managementUrl);
  return value === null ? null : value(name);
}

module.exports = { startGatewayProcess, freePort, gatewayMemoryMetrics, gatewayMetricValue, EXAMPLE_IDENTITIES_ENV };
