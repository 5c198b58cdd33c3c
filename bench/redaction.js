#!/usr/bin/env node
'use strict';
/**
 * Redaction-layer micro-benchmark (src/observability/redaction.ts): ns per access-log line written by the gateway's
 * AccessLog (the layer's text rule on the path only), by a bare pino logger with the same options (no redaction),
 * and by a pino logger with the application log's options (every field walked), all to a sink that drops the bytes.
 * The access log runs per request: its line must cost about what pino alone does. Also shown: a line whose path
 * holds a token shape (scrubbed and copied).
 *
 * Usage: node bench/redaction.js   (needs `npm run build`)
 */
const pino = require('pino');
const { requireDist } = require('./lib/dist');

const { redactingLoggerOptions } = requireDist('observability/redaction');
const { AccessLog } = requireDist('observability/access-log');

const sink = { write: () => true };
const base = { timestamp: pino.stdTimeFunctions.isoTime, messageKey: 'msg' };
const plain = pino(base, sink);
const walking = pino({ ...base, ...redactingLoggerOptions }, sink);
const accessLog = new AccessLog('all', 1, sink);

const line = (path, clientAddress) => ({
  requestId: '3f1c2b0e-7a4d-4a8e-9c55-0a1b2c3d4e5f',
  traceId: null,
  clientAddress,
  method: 'GET',
  path,
  route: '/api/projects/:projectId',
  status: 200,
  decision: 'allow',
  step: null,
  userId: 'u-alice',
  decisionId: 'bf08c1d2-1111-4a8e-9c55-0a1b2c3d4e5f',
  durationMs: 0.349,
  upstreamMs: 0.2,
  bytes: 228,
});

const cases = [
  ['ordinary line, IPv4 client', line('/api/projects/42', '203.0.113.7')],
  ['ordinary line, IPv6 client', line('/api/projects/42', '2001:db8::7')],
  ['a token shape in the path', line(`/files/iamt_${'A'.repeat(43)}`, '203.0.113.7')],
];

function nsPer(fn, iterations) {
  for (let i = 0; i < iterations / 10; i++) fn();
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) fn();
    best = Math.min(best, Number(process.hrtime.bigint() - started) / iterations);
  }
  return best;
}

const N = 200_000;
process.stdout.write('ns per line                   pino alone   AccessLog   every field walked\n');
for (const [name, entry] of cases) {
  const without = nsPer(() => plain.info(entry, 'access'), N);
  const access = nsPer(() => accessLog.write(entry), N);
  const walked = nsPer(() => walking.info(entry, 'access'), N);
  process.stdout.write(`${name.padEnd(30)}${without.toFixed(0).padStart(10)}${access.toFixed(0).padStart(12)}${walked.toFixed(0).padStart(21)}\n`);
}
