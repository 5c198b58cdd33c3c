#!/usr/bin/env node
'use strict';
/**
 * The plain upstream of the benchmark: node `http`, answers every request 200 with the same ~200-byte JSON
 * body, keep-alive. Run by bench/run.js as its own process: listens on 127.0.0.1 (port from argv, 0 = any),
 * reports `{ready, port}` over IPC and exits when the IPC channel closes (the runner is gone).
 */
const http = require('node:http');

const BODY = Buffer.from(
  JSON.stringify({
    id: '1',
    name: 'Benchmark project',
    owner: 'u-alice',
    status: 'active',
    tags: ['bench', 'iam-gateway', 'loopback'],
    createdAt: '2024-01-01T00:00:00.000Z',
    description: 'A fixed answer so that every target moves the same bytes.',
  }),
);
const HEADERS = { 'content-type': 'application/json', 'content-length': String(BODY.length) };

const server = http.createServer((req, res) => {
  // Drain any request body so the connection stays reusable.
  req.resume();
  res.writeHead(200, HEADERS);
  res.end(BODY);
});
// Longer than every client's idle timeout: the client side closes idle keep-alive connections, never us.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;

server.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
  const { port } = server.address();
  if (process.send) process.send({ ready: true, port, bodyBytes: BODY.length });
  else process.stdout.write(`upstream listening on http://127.0.0.1:${port} (${BODY.length}-byte body)\n`);
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));

module.exports = { BODY };
