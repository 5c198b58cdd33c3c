'use strict';
/**
 * Rewrites the generated block of a page in docs/ (between its BEGIN and END markers) from the built code, for the
 * `npm run docs:*` scripts. `--check` only reports whether the block is current (exit 1 when not). The scripts read
 * the build (dist/): their npm script builds first; run directly, a script builds only when dist/ is missing.
 */
const { execFileSync } = require('node:child_process');
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..', '..');

/**
 * @param {object} block
 * @param {string} block.command the npm script's name (`docs:config`), for messages
 * @param {string} block.page the page under the repository root (`docs/configuration.md`)
 * @param {string} block.module the built module under dist/ that renders the block
 * @param {(built: any) => {begin: string, end: string, render: () => string}} block.from what the module offers
 * @param {string} block.what what a rewrite rewrote (`the "Every key" table of docs/configuration.md`)
 */
function rewriteGeneratedBlock({ command, page, module, from, what }) {
  const built = join(root, 'dist', module);
  if (!existsSync(built)) {
    console.error(`${command}: dist/ is missing; building first (npm run build)`);
    execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
  }
  const { begin: beginMarker, end: endMarker, render } = from(require(built));
  const file = join(root, page);
  const text = readFileSync(file, 'utf8');
  const begin = text.indexOf(`${beginMarker}\n`);
  const end = text.indexOf(endMarker, begin);
  if (begin === -1 || end === -1) {
    console.error(`${command}: ${page} has no ${beginMarker} … ${endMarker} markers`);
    process.exit(1);
  }
  const updated = text.slice(0, begin + beginMarker.length + 1) + render() + text.slice(end);
  if (process.argv.includes('--check')) {
    if (updated !== text) {
      console.error(`${command}: ${page} is not current; run \`npm run ${command}\``);
      process.exit(1);
    }
    console.log(`${command}: ${page} is current`);
  } else if (updated === text) {
    console.log(`${command}: ${page} is current`);
  } else {
    writeFileSync(file, updated);
    console.log(`${command}: rewrote ${what}`);
  }
}

module.exports = { rewriteGeneratedBlock };
