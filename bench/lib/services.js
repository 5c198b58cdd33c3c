'use strict';
/** The non-gateway processes of a bench run: the plain upstream and the baseline proxy. */
const { join } = require('node:path');
const { spawnNode } = require('./children');

/** Starts bench/upstream.js; resolves the handle with `url` and `bodyBytes`. */
async function startUpstream() {
  const handle = spawnNode('upstream', join(__dirname, '..', 'upstream.js'), ['0'], { ipc: true, role: 'load' });
  const ready = await handle.ready;
  return Object.assign(handle, { url: `http://127.0.0.1:${ready.port}`, bodyBytes: ready.bodyBytes });
}

/** Starts bench/baseline-proxy.js in front of `upstreamUrl` (`nodeFlags`: e.g. --cpu-prof); resolves the handle with `url`. */
async function startBaselineProxy(upstreamUrl, nodeFlags = []) {
  const handle = spawnNode('baseline-proxy', join(__dirname, '..', 'baseline-proxy.js'), [upstreamUrl, '0'], { ipc: true, nodeFlags, role: 'proxy' });
  const ready = await handle.ready;
  return Object.assign(handle, { url: `http://127.0.0.1:${ready.port}` });
}

module.exports = { startUpstream, startBaselineProxy };

/** Starts lib/database-process.js (PGlite in memory behind a socket); resolves the handle with `url`. */
async function startDatabaseProcess() {
  const handle = spawnNode('database', join(__dirname, 'database-process.js'), [], { ipc: true, role: 'load' });
  const ready = await handle.ready;
  return Object.assign(handle, { url: ready.url });
}

module.exports.startDatabaseProcess = startDatabaseProcess;

/**
 * Starts lib/bare-forwarder.js (the gateway's forwarder alone) in front of `upstreamUrl`; with `contract`, the one that
 * also sends the headers the gateway's contract requires. Resolves the handle with `url`.
 */
async function startBareForwarder(upstreamUrl, nodeFlags = [], { contract = false } = {}) {
  const args = [upstreamUrl, '0', ...(contract ? ['--contract'] : [])];
  const handle = spawnNode(contract ? 'contract-forwarder' : 'bare-forwarder', join(__dirname, 'bare-forwarder.js'), args, { ipc: true, nodeFlags, role: 'proxy' });
  const ready = await handle.ready;
  return Object.assign(handle, { url: `http://127.0.0.1:${ready.port}` });
}

module.exports.startBareForwarder = startBareForwarder;
