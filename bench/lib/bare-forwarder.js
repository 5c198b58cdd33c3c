#!/usr/bin/env node
'use strict';
/**
 * A reference target, not a product: the gateway's own UpstreamForwarder (dist) behind a bare node `http`
 * server, with no normalization, authentication, authorization, identity headers or metrics. Its cost is the
 * floor of the gateway's forwarding stack, so "gateway − floor" is what the gateway's own pipeline costs.
 * As a script: bare-forwarder.js UPSTREAM_URL [PORT]; reports `{ready, port}` over IPC, exits when it closes.
 */
const http = require('node:http');
const { requireDist } = require('./dist');

/** Starts the bare forwarder on 127.0.0.1:`port`; resolves `{url, port, close()}`. */
function startBareForwarderServer(upstreamUrl, port = 0) {
  const { UpstreamForwarder } = requireDist('gateway/upstream-forwarder');
  const forwarder = new UpstreamForwarder({ url: upstreamUrl, connections: 128, connectTimeoutMs: 5000, responseTimeoutMs: 30000, bodyTimeoutMs: 30000 });
  const server = http.createServer((req, res) => {
    const headers = [];
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      // Hop-by-hop and the gateway's own credential, as the gateway drops them.
      if (name !== 'host' && name !== 'connection' && name !== 'keep-alive' && name !== 'authorization') headers.push(raw[i], raw[i + 1]);
    }
    forwarder.forward(req, res, {
      method: req.method,
      path: req.url,
      headers,
      requestId: 'bench',
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
  startBareForwarderServer(process.argv[2], Number(process.argv[3] || 0)).then(({ port }) => process.send?.({ ready: true, port }));
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

module.exports = { startBareForwarderServer };
