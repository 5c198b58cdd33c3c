'use strict';
/**
 * What the in-process benches (host-decisions.js, filter.js) share: a gateway in this process on the embedded defaults
 * with one policy file and the example users, the server time of its requests, and a percentile.
 */
const { mkdirSync, writeFileSync } = require('node:fs');
const http = require('node:http');
const { join } = require('node:path');

const ROOT = join(__dirname, '..', '..');

/** The p-th percentile (0..100) of `values`: the value at rank floor(p/100 × n) of the sorted values. */
function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * The configuration environment of an in-process gateway in `dir` in front of `upstreamUrl`: ports from the OS, the
 * embedded database in memory, no log, no access log, `policy` as its one policy file, the example users and profiles.
 */
function inProcessEnv(dir, upstreamUrl, policy) {
  mkdirSync(join(dir, 'policies'));
  writeFileSync(join(dir, 'policies', 'routes.yaml'), policy);
  return {
    PORT: '0',
    MANAGEMENT_PORT: '0',
    UPSTREAM_URL: upstreamUrl,
    DATABASE_URL: '',
    REDIS_URL: '',
    DATABASE_EMBEDDED_DIR: 'memory://',
    LOG_LEVEL: 'silent',
    IAM_ACCESS_LOG: 'off',
    IAM_POLICIES_DIR: join(dir, 'policies'),
    IAM_AUTHENTICATOR_TYPE: 'users-file',
    IAM_AUTHENTICATOR_PATH: join(ROOT, 'config', 'users.example.yaml'),
    IAM_PROVISION_FILE: join(ROOT, 'config', 'provision.example.yaml'),
    IAM_AUDIT_SPOOL_DIR: join(dir, 'spool'),
  };
}

/**
 * Server time: from the request event to the response's last byte handed to the socket, measured inside the process
 * on every HTTP server of it (the client's work and the loopback round trip left out). Records the requests whose URL
 * starts with `prefix`, in lists by `keyOf(request)` (null: not recorded, e.g. the upstream's own server); returns the
 * map of those lists.
 */
function recordServerTimes(prefix, keyOf = (request) => request.url) {
  const serverTimes = new Map();
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (event, request, response) {
    const key = event === 'request' && request.url.startsWith(prefix) ? keyOf(request) : null;
    if (key !== null) {
      const started = performance.now();
      response.once('finish', () => {
        if (!serverTimes.has(key)) serverTimes.set(key, []);
        serverTimes.get(key).push(performance.now() - started);
      });
    }
    return emit.apply(this, arguments);
  };
  return serverTimes;
}

module.exports = { ROOT, percentile, inProcessEnv, recordServerTimes };
