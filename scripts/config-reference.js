#!/usr/bin/env node
'use strict';
/**
 * `npm run docs:config`: rewrites the generated table of docs/configuration.md ("Every key", between its BEGIN and END
 * markers) from the configuration schema (src/config/config-schema.ts: each key's default and description). It reads
 * the built schema (dist/): `npm run docs:config` builds first; run directly, this script builds only when dist/ is
 * missing. `--check` only reports whether the table is current (exit 1 when not).
 */
const { execFileSync } = require('node:child_process');
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const built = join(root, 'dist', 'src', 'config', 'index.js');
if (!existsSync(built)) {
  console.error('docs:config: dist/ is missing; building first (npm run build)');
  execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
}
const { renderConfigReference, CONFIG_REFERENCE_BEGIN, CONFIG_REFERENCE_END } = require(built);

const file = join(root, 'docs', 'configuration.md');
const text = readFileSync(file, 'utf8');
const begin = text.indexOf(`${CONFIG_REFERENCE_BEGIN}\n`);
const end = text.indexOf(CONFIG_REFERENCE_END, begin);
if (begin === -1 || end === -1) {
  console.error(`docs:config: docs/configuration.md has no ${CONFIG_REFERENCE_BEGIN} … ${CONFIG_REFERENCE_END} markers`);
  process.exit(1);
}
const from = begin + CONFIG_REFERENCE_BEGIN.length + 1;
const updated = text.slice(0, from) + renderConfigReference() + text.slice(end);
if (process.argv.includes('--check')) {
  if (updated !== text) {
    console.error('docs:config: docs/configuration.md is not current; run `npm run docs:config`');
    process.exit(1);
  }
  console.log('docs:config: docs/configuration.md is current');
} else if (updated === text) {
  console.log('docs:config: docs/configuration.md is current');
} else {
  writeFileSync(file, updated);
  console.log('docs:config: rewrote the "Every key" table of docs/configuration.md');
}
