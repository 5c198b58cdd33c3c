'use strict';
/** The non-gateway processes of a bench run: the plain upstream and the baseline proxy. */
const { join } = require('node:path');
const { spawnNode } = require('./children');

/** Starts bench/upstream.js; resolves the handle with `url` and `bodyBytes`. */
async function startUpstream() {
  const handle = spawnNode('upstream', join(__dirname, '..', 'upstream.js'), ['0'], { ipc: true });
  const ready = await handle.ready;
  return Object.assign(handle, { url: `http://127.0.0.1:${ready.port}`, bodyBytes: ready.bodyBytes });
}

/** Starts bench/baseline-proxy.js in front of `upstreamUrl`; resolves the handle with `url`. */
async function startBaselineProxy(upstreamUrl) {
  const handle = spawnNode('baseline-proxy', join(__dirname, '..', 'baseline-proxy.js'), [upstreamUrl, '0'], { ipc: true });
  const ready = await handle.ready;
  return Object.assign(handle, { url: `http://127.0.0.1:${ready.port}` });
}

module.exports = { startUpstream, startBaselineProxy };
