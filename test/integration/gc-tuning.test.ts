/**
 * V8's allocation-site pretenuring is off in the gateway's process (src/app/gc-tuning.ts): `bin/iam-gateway.js`
 * turns it off before the gateway runs, and `node --allocation-site-pretenuring` keeps V8's default. A process's
 * V8 flags are read through `v8.cachedDataVersionTag()`, which V8 derives from its flag values: a preload prints it
 * as the process exits, and it must equal the tag of a node started with the expected flag on its command line.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt } from '../support/gateway-process';

const ROOT = join(__dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'iam-gateway.js');
let dir: string;
let preload: string;

/** The tag of a node started with `flags`, as V8 computes it from its flag values. */
function tagOf(flags: string[]): string {
  const run = spawnSync(process.execPath, [...flags, '-e', 'process.stdout.write(String(require("node:v8").cachedDataVersionTag()))'], { encoding: 'utf8', timeout: 20_000 });
  if (run.status !== 0) throw new Error(`node ${flags.join(' ')} failed: ${run.stderr}`);
  return run.stdout;
}

/** The tag the gateway's entry process had when it exited after `--version`, with `flags` given to node. */
function entryTag(flags: string[]): string {
  const run = spawnSync(process.execPath, [...flags, '-r', preload, BIN, '--version'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  if (run.status !== 0) throw new Error(`iam-gateway --version failed (${run.status}): ${run.stderr}`);
  const tag = /v8-tag=(\d+)/.exec(run.stderr);
  if (tag === null) throw new Error(`the preload printed no tag: ${run.stderr}`);
  return tag[1]!;
}

beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'iam-gc-tuning-'));
  preload = join(dir, 'print-tag.js');
  writeFileSync(preload, 'process.on("exit", () => process.stderr.write(`v8-tag=${require("node:v8").cachedDataVersionTag()}\\n`));\n');
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('V8 allocation-site pretenuring in the gateway process', () => {
  it('is told apart by the tag (the check below could fail)', () => {
    expect(tagOf(['--no-allocation-site-pretenuring'])).not.toBe(tagOf([]));
  });

  it('is off once bin/iam-gateway.js has started', () => {
    expect(entryTag([])).toBe(tagOf(['--no-allocation-site-pretenuring']));
  });

  it('stays on when node is started with --allocation-site-pretenuring', () => {
    expect(entryTag(['--allocation-site-pretenuring'])).toBe(tagOf(['--allocation-site-pretenuring']));
  });
});
