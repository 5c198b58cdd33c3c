#!/usr/bin/env node
'use strict';
/**
 * A PGlite database (in memory) behind its PostgreSQL socket, in its own process: the memory benchmark
 * points the gateway's DATABASE_URL here, so the gateway's RSS is its own (as in production, where the
 * database is a separate server) and not the several hundred MB of an in-process PGlite heap.
 * Reports `{ready, url}` over IPC; exits when the IPC channel closes.
 */
const { requireDist } = require('./dist');

async function run() {
  const { startEmbeddedDatabase } = requireDist('adapters/pglite/embedded-database');
  const database = await startEmbeddedDatabase('memory://');
  process.send({ ready: true, url: database.url });
  const stop = () => database.stop().finally(() => process.exit(0));
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
}

run().catch((error) => {
  process.stderr.write(`database process: ${error.stack || error.message}\n`);
  process.exit(1);
});
