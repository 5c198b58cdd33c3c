/**
 * What the tests that run a guide as written share (docs/your-app.md, debugging-a-denial.md, policy-changes.md,
 * kubernetes.md): the guide's `sh` blocks, a folder holding the package as `npm install <tarball>` leaves it (the
 * tarball of this checkout, packed and installed once per test run: installed-package.ts), so the guides'
 * `npx --no-install iam-gateway …` runs the real installed binary, and the gateway a guide started in the
 * background (its `gateway.pid`).
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startHost, type RunningHost } from '../../examples/host/server';
import { freePort } from './front-proxy';
import { appFolder, pathWithoutCheckoutBins } from './installed-package';

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

/**
 * Runs one `sh` block of a guide with `bash -e` in `work`, in a fresh shell: {@link guidePath}, `HOME`, and `env` —
 * nothing else of the test's environment. Asynchronously: with the embedded database, its server may live in this very
 * process (a run in band), which a blocking spawn would stall. Resolves with the exit code and both outputs, interleaved.
 */
export function runShBlock(work: string, script: string, env: Record<string, string> = {}): Promise<{ code: number; output: string }> {
  const child = spawn('bash', ['-e', '-c', script], { cwd: work, env: { PATH: guidePath(), HOME: process.env.HOME ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, output })));
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

/** The processes whose working directory is `dir` or below it (what a guide started there), from /proc. */
export function processesIn(dir: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .filter((entry) => {
      try {
        const cwd = readlinkSync(`/proc/${entry}/cwd`).replace(/ \(deleted\)$/, '');
        return cwd === dir || cwd.startsWith(`${dir}/`);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * Stops what a guide left running if a block failed before the guide stopped it (its gateway by PID, what that
 * process started, and any other process still working in the guide's folder), and cleans up.
 */
export async function endGuideRun(run: Partial<GuideRun>): Promise<void> {
  if (run.work) {
    const pid = guideGatewayPid(run.work);
    const strays = [...(pid === null ? [] : [pid, ...descendants(pid)]), ...processesIn(run.work)];
    for (const stray of new Set(strays)) if (alive(stray)) process.kill(stray, 'SIGKILL');
  }
  await run.host?.close();
  if (run.work) rmSync(run.work, { recursive: true, force: true });
}
