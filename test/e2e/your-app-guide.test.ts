/**
 * docs/your-app.md, run as written, with the example host (examples/host) as "your app". Step 0 (install) is what
 * test/support/installed-package.ts does once per test run: `npm pack` of this checkout, the tarball installed into
 * an empty folder (offline); this test checks that the step's commands name that tarball. Every later `sh` block runs
 * in order in a fresh folder holding that install, so each `npx --no-install iam-gateway` runs the tarball's real
 * binary (no stub, no checkout's bin on the PATH). The gateway the guide starts is a real `iam-gateway serve` process
 * on the embedded database; the only changes to the text are the two addresses (the app's and the gateway's port,
 * free ports here instead of 3000 and 8080).
 */
import { existsSync, readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { ROOT } from '../support/gateway';
import { descendants, endGuideRun, type GuideRun, guideGatewayPid, runShBlock, guideSection, prepareGuideRun, shBlocks } from '../support/guide-workspace';
import { installedPackage, manifest } from '../support/installed-package';
import { hasExited } from '../support/processes';
import { until } from '../support/wait';

const GUIDE = readFileSync(join(ROOT, 'docs', 'your-app.md'), 'utf8');

let work: string;
let host: GuideRun['host'];
let port: number;

/** A block in a fresh shell: no DATABASE_URL or REDIS_URL (the guide runs on the embedded defaults), the gateway's ports free. */
const run = (script: string): ReturnType<typeof runShBlock> => runShBlock(work, script, { PORT: String(port), MANAGEMENT_PORT: '0' });

const gatewayPid = (): number | null => guideGatewayPid(work);

/** The script each of `pids` runs: the real path of its first argument that is a file (relative to its working directory). */
function programsOf(pids: number[]): string[] {
  return pids.flatMap((each) => {
    try {
      const argv = readFileSync(`/proc/${each}/cmdline`, 'utf8').split('\0');
      const cwd = readlinkSync(`/proc/${each}/cwd`);
      const script = argv.slice(1).map((arg) => resolve(cwd, arg)).find((path) => existsSync(path) && statSync(path).isFile());
      return script ? [realpathSync(script)] : [];
    } catch {
      return [];
    }
  });
}

beforeAll(async () => {
  ({ work, host, port } = await prepareGuideRun('your-app-'));
}, 600_000);

// Stopped by the guide's last block; by its PID here if a block failed before.
afterAll(() => endGuideRun({ work, host }));

describe('docs/your-app.md as written', () => {
  it('step 0 packs the repository and installs the tarball by its path: the tarball the tests install, by its name', async () => {
    const [pack, install, ...rest] = shBlocks(guideSection(GUIDE, '0. Install'));
    expect(rest).toEqual([]);
    expect(pack!.trim().split('\n').pop()).toBe('npm pack');
    const tarball = basename((await installedPackage()).tarball);
    expect(tarball).toBe(`${manifest.name}-${manifest.version}.tgz`);
    expect(install!.trim()).toBe(`npm install /path/to/${tarball}`);
    // The folder the later blocks run in: the tarball installed, its binary the one `npx --no-install` finds.
    const dependencies = (JSON.parse(readFileSync(join(work, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies;
    expect(dependencies[manifest.name]).toMatch(new RegExp(`^file:/.+/${tarball.replaceAll('.', '\\.')}$`));
    expect(realpathSync(join(work, 'node_modules', '.bin', 'iam-gateway'))).toBe(realpathSync(join(work, 'node_modules', manifest.name, manifest.bin['iam-gateway']!)));
  });

  it('each later sh block runs in order: a policy, a user, the gateway in front of the app, 401/200/403, a clean stop', async () => {
    const install = shBlocks(guideSection(GUIDE, '0. Install'));
    const blocks = shBlocks(GUIDE).slice(install.length).map((block) => block.replaceAll('http://127.0.0.1:3000', host.url).replaceAll('http://127.0.0.1:8080', `http://127.0.0.1:${port}`));
    expect(blocks).toHaveLength(5);
    const outcomes = [];
    let running: number[] = [];
    let servedBy: string[] = [];
    for (const block of blocks) {
      const outcome = await run(block);
      outcomes.push(outcome);
      if (outcome.code !== 0) break;
      // While it runs (after the walk, before the stop): the gateway's processes and the program they run.
      if (outcomes.length === 4) {
        running = [gatewayPid()!, ...descendants(gatewayPid()!)];
        servedBy = programsOf(running);
      }
    }
    const log = existsSync(join(work, 'gateway.log')) ? readFileSync(join(work, 'gateway.log'), 'utf8') : '';
    // Every block exits 0 (the walk stops at the first that does not, showing its output and the gateway's log).
    const failed = outcomes.find((outcome) => outcome.code !== 0);
    expect(failed === undefined ? null : { code: failed.code, output: failed.output.slice(-2000), log: log.slice(-2000) }).toBeNull();
    expect(outcomes).toHaveLength(5);
    // The policy check, then the statuses of the walk: no session, carol's list, the admin area she may not use.
    expect(outcomes[0]!.output).toContain('0 errors, 0 warnings');
    const statuses = [...outcomes[3]!.output.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
    expect(statuses).toEqual([401, 200, 403]);
    expect(outcomes[3]!.output).toContain('PERMISSION_DENIED');
    expect(outcomes[3]!.output).toContain('"userId":"u-carol"');
    // The gateway that answered (the PID the guide kept) ran the installed package's bin, not this checkout's.
    expect(servedBy[0]).toBe(realpathSync(join(work, 'node_modules', manifest.name, manifest.bin['iam-gateway']!)));
    expect(servedBy.filter((program) => program.startsWith(`${ROOT}/`))).toEqual([]);
    // The last block stopped the gateway: it and every process it started are gone (none left orphaned).
    await until('the gateway and its processes to exit after the guide stops it', () => running.every((pid) => hasExited(pid)));
    // It stopped cleanly, so it removed the pid file it wrote (serve --pid-file).
    expect(gatewayPid()).toBeNull();
  }, 240_000);
});
