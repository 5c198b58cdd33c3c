#!/usr/bin/env node
'use strict';
// The CLI entry: runs the compiled gateway (npm install builds it through the `prepare` script).
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const entry = join(__dirname, '..', 'dist', 'src', 'cli', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write('iam-gateway: not built yet; run `npm run build` (npm install does it for you)\n');
  process.exit(1);
}
// First, before the gateway allocates anything: V8's allocation-site pretenuring off (dist/src/app/gc-tuning.js says why;
// `node --allocation-site-pretenuring` keeps it on).
require(join(__dirname, '..', 'dist', 'src', 'app', 'gc-tuning.js')).turnOffPretenuring();
require(entry)
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
  });
