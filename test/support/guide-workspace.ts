/**
 * What the tests that run a guide as written share (docs/your-app.md, debugging-a-denial.md, policy-changes.md,
 * kubernetes.md): the guide's `sh` blocks, a folder holding the package as `npm install <tarball>` leaves it (the
 * tarball of this checkout, packed and installed once per test run: installed-package.ts), so the guides'
 * `npx --no-install iam-gateway …` runs the real installed binary, and the gateway a guide started in the
 * background (its `gateway.pid`).
 */
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { startHost, type RunningHost } from '../../examples/host/server';
import { freePort } from './front-proxy';
import { appFolder, pathWithoutCheckoutBins } from './installed-package';
import { join } from 'node:path';

/** The body of every ```sh block of a guide, in order. */
export const shBlocks = (guide: string): string[] => [...guide.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);

/** The text of a guide's section `## <heading>…`, up to the next `## `. */
export function guideSection(guide: string, heading: string): string {
  const start = guide.indexOf(`\n## ${heading}`);
  if (start < 0) throw new Error(`no section "## ${heading}"`);
  const end = guide.indexOf('\n## ', start + 1);
  return guide.slice(start, end < 0 ? undefined : end);
}

/**
 * The PATH a guide's shell gets: the machine's, without the `node_modules/.bin` directories of this checkout that
 * `npx jest` or `npm test` put first, so nothing but the app folder's install answers for `iam-gateway`.
 */
export const guidePath = (): string => pathWithoutCheckoutBins();

/**
 * A fresh folder with the package installed (installed-package.ts {@link appFolder}): `npx --no-install
 * iam-gateway` in it runs the tarball's binary.
 */
export const installedAppFolder = (prefix: string): Promise<string> => appFolder(prefix);

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

/** The processes below `pid` (children first, then theirs), from /proc. */
export function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(parent, [...(parents.get(parent) ?? []), Number(entry)]);
    } catch {
      // Gone meanwhile.
    }
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of parents.get(queue.shift()!) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** What a guide that starts the gateway in front of the example host runs in: its folder, the host, a free port. */
export interface GuideRun {
  work: string;
  host: RunningHost;
  port: number;
}

/** A fresh folder with the installed package, the example host (as "your app") and a free port for the guide's gateway. */
export async function prepareGuideRun(prefix: string): Promise<GuideRun> {
  const work = await installedAppFolder(prefix);
  return { work, host: await startHost(0), port: await freePort() };
}

/**
 * Stops what a guide left running (its gateway by PID, and what that process started: `npx` runs the gateway as
 * its child, if a block failed before the guide stopped it) and cleans up.
 */
export async function endGuideRun(run: Partial<GuideRun>): Promise<void> {
  const pid = run.work ? guideGatewayPid(run.work) : null;
  if (pid !== null) {
    for (const stray of [pid, ...descendants(pid)].filter(alive)) process.kill(stray, 'SIGKILL');
  }
  await run.host?.close();
  if (run.work) rmSync(run.work, { recursive: true, force: true });
}
