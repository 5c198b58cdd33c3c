#!/usr/bin/env node
'use strict';
// The CLI entry: runs the compiled gateway (npm install builds it through the `prepare` script).
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const entry = join(__dirname, '..', 'dist', 'src', 'app', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write('iam-gateway: not built yet; run `npm run build` (npm install does it for you)\n');
  process.exit(1);
}
// V8's allocation-site pretenuring can decide, under load, that a per-request allocation site is long-lived and
// allocate it in the old generation for the rest of the process's life; everything young it points to then
// survives each scavenge (measured: a third of what a request allocates promoted, scavenges 10x longer, +50% CPU
// per request; docs/performance.md "Garbage collection"). Off unless `node --allocation-site-pretenuring` asks for it.
if (!process.execArgv.includes('--allocation-site-pretenuring')) require('node:v8').setFlagsFromString('--no-allocation-site-pretenuring');
require(entry)
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
  });
