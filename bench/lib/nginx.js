'use strict';
/**
 * nginx in front of the upstream, asking the gateway's forward-auth endpoint before each request
 * (`auth_request`): the deployment of README "Forward-auth" with the shipped recipe
 * (examples/forward-auth/nginx.conf), measured beside the inline gateway. The recipe is used as shipped, with
 * the bench's addresses and keep-alive connections to both upstreams (the recipe's plain `proxy_pass` opens a
 * new connection per request and per auth subrequest, which would measure connection set-up, not the design):
 * `keepalive` in each `upstream {}` block and `proxy_http_version 1.1` + an empty `Connection` header beside
 * each `proxy_pass`. One worker process (the gateway is one event loop too), access log off, its own temp
 * prefix, configuration, pid and logs, run in the foreground as a child (`daemon off`), like the tests do
 * (test/support/front-proxy.ts).
 */
const { spawnSync } = require('node:child_process');
const { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const { join } = require('node:path');
const { ROOT, addCleanup, spawnProcess } = require('./children');
const { freePort } = require('./gateway');
const { childPids } = require('./pin');

const RECIPE = join(ROOT, 'examples', 'forward-auth', 'nginx.conf');
const START_TIMEOUT_MS = 10_000;
/** Pooled connections per upstream: more than the load's 50 connections, so none is opened per request. */
const KEEPALIVE = 128;

/** The nginx binary: NGINX_BIN, else /usr/sbin/nginx, else `nginx` on the PATH; null when none runs. */
function nginxBinary() {
  const candidates = [process.env.NGINX_BIN, '/usr/sbin/nginx', 'nginx'].filter(Boolean);
  for (const candidate of candidates) {
    if (candidate.includes('/') && !existsSync(candidate)) continue;
    const probe = spawnSync(candidate, ['-V'], { encoding: 'utf8' });
    if (probe.status === 0) return { path: candidate, configure: `${probe.stdout}${probe.stderr}` };
  }
  return null;
}

/** `{ ok: true, binary, version }` or `{ ok: false, reason }`: whether the nginx configuration can run here. */
function nginxAvailable() {
  const binary = nginxBinary();
  if (!binary) return { ok: false, reason: 'nginx not found (NGINX_BIN, /usr/sbin/nginx, PATH)' };
  if (!binary.configure.includes('http_auth_request_module')) return { ok: false, reason: `${binary.path} has no auth_request module (nginx -V)` };
  const version = /nginx version: (\S+)/.exec(binary.configure)?.[1] ?? 'nginx';
  return { ok: true, binary: binary.path, version };
}

/**
 * Replaces `pattern` in `text` (`replacement`: a string, used as is, or a function of the match), checking
 * that it matched exactly `count` times (the recipe changed otherwise).
 */
function replaceCounted(text, pattern, replacement, count, what) {
  let matches = 0;
  const out = text.replace(pattern, (...args) => {
    matches++;
    return typeof replacement === 'function' ? replacement(...args) : replacement;
  });
  if (matches !== count) throw new Error(`bench nginx: expected ${count} ${what} in ${RECIPE}, found ${matches}; update bench/lib/nginx.js`);
  return out;
}

/** The recipe's `http {}` content for the bench: its addresses, its port, keep-alive upstreams. */
function benchServerBlock(recipe, { gatewayPort, upstreamPort, port }) {
  let text = recipe.replace(/127\.0\.0\.1:8080/g, `127.0.0.1:${gatewayPort}`).replace(/127\.0\.0\.1:3000/g, `127.0.0.1:${upstreamPort}`);
  text = replaceCounted(text, /listen 80;/g, `listen 127.0.0.1:${port};`, 1, '`listen 80;`');
  // Shorter keep-alive than the gateway's (5 s): nginx must never reuse a connection the gateway is closing.
  text = replaceCounted(text, /(upstream \w+ \{ server [^;]+;)/g, (_match, block) => `${block} keepalive ${KEEPALIVE}; keepalive_requests 1000000; keepalive_timeout 4s;`, 2, 'one-line `upstream` blocks');
  text = replaceCounted(text, /^(\s*)(proxy_pass [^;]+;)/gm, (_match, indent, pass) => `${indent}${pass}\n${indent}proxy_http_version 1.1;\n${indent}proxy_set_header Connection "";`, 3, '`proxy_pass` lines');
  return text;
}

/**
 * Starts nginx with the forward-auth recipe: requests to its port go to `upstreamUrl` once the gateway at
 * `gatewayUrl` allows them. Resolves the handle with `url`, `pids()` (master and workers, for CPU time),
 * `config`, and `cleanup()` (removes its temp directory once it has stopped; also run on Ctrl-C).
 */
async function startNginxForwardAuth({ gatewayUrl, upstreamUrl, binary = nginxAvailable().binary }) {
  const dir = mkdtempSync(join(os.tmpdir(), 'iam-bench-nginx-'));
  const cleanup = addCleanup(async () => rmSync(dir, { recursive: true, force: true }));
  for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, sub));
  const port = await freePort();
  const server = benchServerBlock(readFileSync(RECIPE, 'utf8'), { gatewayPort: new URL(gatewayUrl).port, upstreamPort: new URL(upstreamUrl).port, port });
  const config = [
    `pid ${dir}/nginx.pid;`,
    `error_log ${dir}/error.log warn;`,
    'worker_processes 1;',
    'events { worker_connections 4096; }',
    'http {',
    '  access_log off;',
    // autocannon's connections stay open for the whole run (nginx closes a client connection after 1,000 requests by default).
    '  keepalive_requests 1000000;',
    `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;`,
    `  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
    server,
    '}',
    '',
  ].join('\n');
  const configFile = join(dir, 'nginx.conf');
  writeFileSync(configFile, config);
  // Run under a name of its own (a symlink in the temp directory): the process name is what `pkill -x nginx`
  // (as in .ci/run, which stops any system nginx) matches, and a bench running beside it must survive that.
  const ownBinary = join(dir, 'iam-bench-nginx');
  symlinkSync(binary.includes('/') ? realpathSync(binary) : binary, ownBinary);
  const handle = spawnProcess('nginx', ownBinary, ['-p', dir, '-c', configFile, '-e', join(dir, 'error.log'), '-g', 'daemon off;'], {
    role: 'proxy',
    parentDeathSignal: 'SIGTERM',
  });
  const tail = handle.tail;
  handle.tail = (lines = 20) => {
    let errorLog = '';
    try {
      errorLog = readFileSync(join(dir, 'error.log'), 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      // not written yet, or already removed
    }
    return `${tail(lines)}\n${errorLog}`;
  };
  try {
    await waitForPort(port, handle);
  } catch (error) {
    await handle.stop();
    await cleanup();
    throw error;
  }
  return Object.assign(handle, {
    url: `http://127.0.0.1:${port}`,
    config,
    cleanup,
    /** The master and its worker processes (their CPU time is nginx's). */
    pids: () => [handle.pid, ...childPids(handle.pid)],
  });
}

async function waitForPort(port, handle) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (handle.exitCode !== undefined) throw new Error(`nginx exited (${handle.exitCode}) during start:\n${handle.tail()}`);
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) {
      throw new Error(`nginx not listening on ${port} after ${START_TIMEOUT_MS} ms:\n${handle.tail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

module.exports = { nginxAvailable, startNginxForwardAuth, benchServerBlock };
