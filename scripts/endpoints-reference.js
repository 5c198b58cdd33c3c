#!/usr/bin/env node
'use strict';
/**
 * `npm run docs:endpoints`: rewrites the generated endpoint table of docs/endpoints.md (between its markers) from
 * the route declarations, through the OpenAPI document they generate (src/api/endpoints-reference.ts). It reads the
 * built code (dist/): `npm run docs:endpoints` builds first; run directly, this script builds only when dist/ is
 * missing. `--check` only reports whether the table is current (exit 1 when not).
 */
const { execFileSync } = require('node:child_process');
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const built = join(root, 'dist', 'src', 'api', 'endpoints-reference.js');
if (!existsSync(built)) {
  console.error('docs:endpoints: dist/ is missing; building first (npm run build)');
  execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
}
const { renderEndpointsReference, ENDPOINTS_REFERENCE_BEGIN, ENDPOINTS_REFERENCE_END } = require(built);

const file = join(root, 'docs', 'endpoints.md');
const text = readFileSync(file, 'utf8');
const begin = text.indexOf(`${ENDPOINTS_REFERENCE_BEGIN}\n`);
const end = text.indexOf(ENDPOINTS_REFERENCE_END, begin);
if (begin === -1 || end === -1) {
  console.error(`docs:endpoints: docs/endpoints.md has no ${ENDPOINTS_REFERENCE_BEGIN} … ${ENDPOINTS_REFERENCE_END} markers`);
  process.exit(1);
}
const from = begin + ENDPOINTS_REFERENCE_BEGIN.length + 1;
const updated = text.slice(0, from) + renderEndpointsReference() + text.slice(end);
if (process.argv.includes('--check')) {
  if (updated !== text) {
    console.error('docs:endpoints: docs/endpoints.md is not current; run `npm run docs:endpoints`');
    process.exit(1);
  }
  console.log('docs:endpoints: docs/endpoints.md is current');
} else if (updated === text) {
  console.log('docs:endpoints: docs/endpoints.md is current');
} else {
  writeFileSync(file, updated);
  console.log('docs:endpoints: rewrote docs/endpoints.md');
}
