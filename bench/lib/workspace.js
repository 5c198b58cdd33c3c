'use strict';
/**
 * What a bench tool's gateways need around them, and its teardown: a temporary directory (`dir`, for other files
 * too) holding the 1,000-route benchmark policy in `policyDir`, and a random token-store prefix naming the tool
 * (`bench-<hex>-<label>`). `close(redisUrl, prefixes)` stops every child process, purges the prefixes from Redis
 * (default: `prefix`; nothing without Redis) and deletes the directory: call it from the tool's `finally`.
 */
const { randomBytes } = require('node:crypto');
const { mkdirSync, mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const { join } = require('node:path');
const { stopAll } = require('./children');
const { generatePolicy } = require('./policy');
const { purgePrefixes } = require('./redis');

function benchWorkspace(label) {
  const dir = mkdtempSync(join(os.tmpdir(), `iam-bench-${label}-`));
  const policyDir = join(dir, 'policy');
  mkdirSync(policyDir);
  writeFileSync(join(policyDir, 'bench.yaml'), generatePolicy(1000).text);
  const prefix = `bench-${randomBytes(4).toString('hex')}-${label}`;
  return {
    dir,
    policyDir,
    prefix,
    async close(redisUrl, prefixes = [prefix]) {
      await stopAll();
      if (redisUrl) await purgePrefixes(redisUrl, prefixes).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

module.exports = { benchWorkspace };
