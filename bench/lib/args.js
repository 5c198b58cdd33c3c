'use strict';
/** Command-line flags shared by the bench's tools. */

/** The positive number after `name` in `argv` (`--rounds 4`), `fallback` when absent; a usage error otherwise. */
function numberFlag(argv, name, fallback) {
  const at = argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0) throw Object.assign(new Error(`${name} needs a positive number`), { usage: true });
  return value;
}

module.exports = { numberFlag };
