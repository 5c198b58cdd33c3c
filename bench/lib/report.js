'use strict';
/** Plain-text tables and the results files of bench/run.js. */
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

// `npm run bench | head` closes stdout early: drop the rest of the output instead of crashing on EPIPE,
// so the run still stops its children and purges its Redis keys.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error) => {
    if (error.code !== 'EPIPE') throw error;
  });
}

function fmt(value, digits = 2) {
  if (value === null || value === undefined || !Number.isFinite(value)) return 'n/a';
  return value.toFixed(digits);
}

function fmtInt(value) {
  return Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : 'n/a';
}

/** Renders rows (arrays of strings) under a header, columns padded; first column left-aligned. */
function table(header, rows) {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => String(row[i]).length)));
  const line = (cells) => cells.map((cell, i) => (i === 0 ? String(cell).padEnd(widths[i]) : String(cell).padStart(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/**
 * Writes `bench/results/latest.json` and `bench/results/<ISO date>.json` (colons made file-name safe); with `name`,
 * `<name>-latest.json` and `<name>-<ISO date>.json`.
 */
function writeResults(dir, results, name = null) {
  mkdirSync(dir, { recursive: true });
  const text = `${JSON.stringify(results, null, 2)}\n`;
  const prefix = name === null ? '' : `${name}-`;
  const latest = join(dir, `${prefix}latest.json`);
  const dated = join(dir, `${prefix}${results.generatedAt.replace(/:/g, '-')}.json`);
  writeFileSync(latest, text);
  writeFileSync(dated, text);
  return { latest, dated };
}

module.exports = { fmt, fmtInt, table, writeResults };
