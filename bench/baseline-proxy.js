#!/usr/bin/env node
'use strict';
/**
 * The baseline the gateway is compared with: the smallest useful reverse proxy, `http-proxy` 1.18.1 with a
 * keep-alive `http.Agent` (no authentication, no authorization, no header rewriting). Bench only: the gateway
 * itself forwards with Node's `http` server and undici, not http-proxy. Usage: baseline-proxy.js UPSTREAM_URL [PORT].
 * Listens on 127.0.0.1, reports `{ready, port}` over IPC, exits when the IPC channel closes.
 */
const http = require('node:http');
const httpProxy = require('http-proxy');

const target = process.argv[2];
if (!target) {
  process.stderr.write('usage: baseline-proxy.js UPSTREAM_URL [PORT]\n');
  process.exit(2);
}
// The same pool size as the gateway's upstream pool (upstream.connections: 128).
const agent = new http.Agent({ keepAlive: true, maxSockets: 128, keepAliveMsecs: 1000 });
const proxy = httpProxy.createProxyServer({ target, agent });
proxy.on('error', (error, req, res) => {
  if (res && typeof res.writeHead === 'function' && !res.headersSent) {
    res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`baseline proxy: ${error.message}`);
  } else if (res && typeof res.destroy === 'function') {
    res.destroy();
  }
});

const server = http.createServer((req, res) => proxy.web(req, res));
server.listen(Number(process.argv[3] || 0), '127.0.0.1', () => {
  const { port } = server.address();
  if (process.send) process.send({ ready: true, port });
  else process.stdout.write(`baseline proxy on http://127.0.0.1:${port} -> ${target}\n`);
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
