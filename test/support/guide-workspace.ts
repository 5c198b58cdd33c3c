/**
 * What the tests that run a guide as written share (docs/your-app.md, debugging-a-denial.md, policy-changes.md,
 * kubernetes.md): the guide's `sh` blocks, a directory whose `.bin/npx iam-gateway` is this checkout's CLI, and the
 * gateway a guide started in the background (its `gateway.pid`).
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './gateway';

/** The body of every ```sh block of a guide, in order. */
export const shBlocks = (guide: string): string[] => [...guide.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);

/**
 * Puts `<work>/.bin/npx`, which runs this checkout's CLI for `npx iam-gateway …` (and refuses anything else), and
 * returns the PATH that finds it first.
 */
export function installCliShim(work: string): string {
  mkdirSync(join(work, '.bin'), { recursive: true });
  const npx = join(work, '.bin', 'npx');
  writeFileSync(npx, `#!/bin/sh\nif [ "$1" = iam-gateway ]; then shift; exec "${process.execPath}" "${join(ROOT, 'bin', 'iam-gateway.js')}" "$@"; fi\necho "npx $1: not in this test" >&2; exit 127\n`);
  chmodSync(npx, 0o755);
  return `${join(work, '.bin')}:${process.env.PATH ?? ''}`;
}

/** The PID a guide's background gateway wrote to `<work>/gateway.pid`, if it did. */
export const guideGatewayPid = (work: string): number | null =>
  existsSync(join(work, 'gateway.pid')) ? Number(readFileSync(join(work, 'gateway.pid'), 'utf8').trim()) : null;

/** True while the process runs. */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
