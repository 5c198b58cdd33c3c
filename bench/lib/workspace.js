'use strict';
/**
 * What a bench tool's gateways need around them, and its teardown: a temporary directory (`dir`, for other files
 * too) holding the 1,000-route benchmark policy in `policyDir`, and a random token-store prefix naming the tool
 * (`prefix` = `bench-<hex>-<label>`; `prefixes`: it with each of `suffixes`, for tools that run several gateways).
 * The prefixes are purged from Redis (when `redisUrl` is set) and the directory removed by `close()`, which the
 * tool calls from its `finally` after its work, or on Ctrl-C / SIGTERM once the children are stopped
 * (children.js addCleanup).
 */
const { randomBytes } = require('node:crypto');
const { mkdirSync, mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const { join } = require('node:path');
const { addCleanup, stopAll } = require('./children');
const { generatePolicy } = require('./policy');
const { purgePrefixes } = require('./redis');

function benchWorkspace(label, redisUrl, suffixes = ['']) {
  const dir = mkdtempSync(join(os.tmpdir(), `iam-bench-${label}-`));
  const policyDir = join(dir, 'policy');
  mkdirSync(policyDir);
  writeFileSync(join(policyDir, 'bench.yaml'), generatePolicy(1000).text);
  const prefix = `bench-${randomBytes(4).toString('hex')}-${label}`;
  const prefixes = suffixes.map((suffix) => `${prefix}${suffix}`);
  const cleanup = addCleanup(async () => {
    if (redisUrl) await purgePrefixes(redisUrl, prefixes).catch((error) => process.stderr.write(`bench: could not purge ${prefixes.join(', ')}: ${error.message}\n`));
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    policyDir,
    prefix,
    prefixes,
    async close() {
      await stopAll();
      await cleanup();
    },
  };
}

module.exports = { benchWorkspace };
