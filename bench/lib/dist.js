'use strict';
/**
 * The compiled gateway (dist/) the bench runs against: the bench is plain JavaScript and never compiles
 * TypeScript. `npm run build` produces dist/.
 */
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const ROOT = join(__dirname, '..', '..');
const DIST = join(ROOT, 'dist', 'src');

function requireDist(relative) {
  const file = join(DIST, relative);
  if (!existsSync(`${file}.js`) && !existsSync(join(file, 'index.js'))) {
    throw new Error(`bench: ${join('dist', 'src', relative)} is missing; run \`npm run build\` first`);
  }
  return require(file);
}

module.exports = {
  ROOT,
  DIST,
  requireDist,
  get hashToken() {
    return requireDist('domain/token-hash').hashToken;
  },
};
