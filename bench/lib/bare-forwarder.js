#!/usr/bin/env node
'use strict';
/**
 * A reference target, not a product: the gateway's own UpstreamForwarder (dist) behind a bare node `http`
 * server, with no normalization, authentication, authorization, identity headers or metrics. Its cost is the
 * floor of the gateway's forwarding stack, so "gateway − floor" is what the gateway's own pipeline costs.
 *
 * With `contract: true` (script flag `--contract`) it also sends the host what the gateway's contract makes the
 * gateway send on an authorized request, built by the gateway's own code (http/upstream-headers.ts): a fresh
 * request id, `X-Forwarded-For/-Proto/-Host`, the client's credential and gateway cookies removed, and the identity
 * headers of alice's session on the benchmarked route (fixed values of the same shape, decided by nobody). Still no
 * normalization, token lookup, decision or metrics: "gateway − contract floor" is what deciding costs, and
 * "contract floor − floor" what the headers the contract requires cost, the upstream's parsing of them included.
 *
 * As a script: bare-forwarder.js UPSTREAM_URL [PORT] [--contract]; reports `{ready, port}` over IPC, exits when it closes.
 */
const { randomUUID } = require('node:crypto');
const http = require('node:http');
const { requireDist } = require('./dist');

/** Alice's identity headers on the benchmarked route (GET /bench/projects/1: project:read, her editor profile). */
const BENCH_IDENTITY = [
  ['X-IAM-User-Id', 'u-alice'],
  ['X-IAM-Identity-Id', 'id-alice'],
  ['X-IAM-Identity-Domain', 'example.com'],
  ['X-IAM-Session-Id', randomUUID()],
  ['X-IAM-Profile-Id', 'p-alice-editor'],
  ['X-IAM-Permission', 'project:read'],
];

/** The floor's own header handling: hop-by-hop and the gateway's own credential dropped, as the gateway drops them. */
function bareHeaders(req) {
  const headers = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (name !== 'host' && name !== 'connection' && name !== 'keep-alive' && name !== 'authorization') headers.push(raw[i], raw[i + 1]);
  }
  return headers;
}

/** Starts the bare forwarder on 127.0.0.1:`port`; resolves `{url, port, close()}`. */
function startBareForwarderServer(upstreamUrl, port = 0, { contract = false } = {}) {
  const { UpstreamForwarder } = requireDist('gateway/upstream-forwarder');
  const forwarder = new UpstreamForwarder({ url: upstreamUrl, connections: 128, connectTimeoutMs: 5000, responseTimeoutMs: 30000, bodyTimeoutMs: 30000 });
  let headersOf = (req) => ({ headers: bareHeaders(req), requestId: 'bench' });
  if (contract) {
    const { buildUpstreamHeaders } = requireDist('http/upstream-headers');
    const { GATEWAY_COOKIE_NAMES } = requireDist('http/session-cookie');
    headersOf = (req) => {
      const requestId = randomUUID();
      const headers = buildUpstreamHeaders({
        rawHeaders: req.rawHeaders,
        remoteAddress: req.socket.remoteAddress ?? '',
        trustedProxy: false,
        protocol: 'http',
        host: req.headers.host,
        requestId,
        stripAuthorization: true,
        stripCookies: GATEWAY_COOKIE_NAMES,
        identity: BENCH_IDENTITY,
      });
      return { headers, requestId };
    };
  }
  const server = http.createServer((req, res) => {
    const { headers, requestId } = headersOf(req);
    forwarder.forward(req, res, {
      method: req.method,
      path: req.url,
      headers,
      requestId,
      onProblem: () => res.writeHead(502).end(),
    });
  });
  return new Promise((resolve) => {
    server.listen(port, '127.0.0.1', () => {
      const bound = server.address().port;
      resolve({
        url: `http://127.0.0.1:${bound}`,
        port: bound,
        close: () => Promise.all([new Promise((done) => server.close(done)), forwarder.close()]),
      });
    });
  });
}

if (require.main === module) {
  const args = process.argv.slice(2).filter((arg) => arg !== '--contract');
  startBareForwarderServer(args[0], Number(args[1] || 0), { contract: process.argv.includes('--contract') }).then(({ port }) => process.send?.({ ready: true, port }));
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

module.exports = { BENCH_IDENTITY, startBareForwarderServer };
