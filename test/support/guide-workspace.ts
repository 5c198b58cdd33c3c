/**
 * What the tests that run a guide as written share (docs/your-app.md, debugging-a-denial.md, policy-changes.md,
 * kubernetes.md): the guide's `sh` blocks, a directory whose `.bin/npx iam-gateway` is this checkout's CLI, and the
 * gateway a guide started in the background (its `gateway.pid`).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHost, type RunningHost } from '../../examples/host/server';
import { freePort } from './front-proxy';
import { ROOT } from './gateway';
import { ensureBuilt } from './gateway-process';

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

/** What a guide that starts the gateway in front of the example host runs in: its directory, the host, a free port. */
export interface GuideRun {
  work: string;
  host: RunningHost;
  port: number;
}

/** A fresh directory with the CLI shim, the example host (as "your app") and a free port for the guide's gateway. */
export async function prepareGuideRun(prefix: string): Promise<GuideRun> {
  ensureBuilt();
  const work = mkdtempSync(join(tmpdir(), prefix));
  installCliShim(work);
  return { work, host: await startHost(0), port: await freePort() };
}

/** Stops what a guide left running (its gateway by PID, if a block failed before the guide stopped it) and cleans up. */
export async function endGuideRun(run: Partial<GuideRun>): Promise<void> {
  const pid = run.work ? guideGatewayPid(run.work) : null;
  if (pid !== null && alive(pid)) process.kill(pid, 'SIGKILL');
  await run.host?.close();
  if (run.work) rmSync(run.work, { recursive: true, force: true });
}
