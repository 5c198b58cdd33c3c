/**
 * The package as its users get it, made once per test run: `npm pack` of this checkout (after the build), and the
 * tarball installed into an empty folder. test/integration/package-install.test.ts checks what it holds and that it
 * works; the guide tests (test/support/guide-workspace.ts) run their `npx --no-install iam-gateway …` commands
 * against its binary.
 *
 * Once per run: the result lives in the run's temporary directory ({@link runTempDir}, removed by the global
 * teardown) under the hash of what the tarball is made of (package.json, the lockfile and every packed file), so
 * every test file of the run, in any jest worker, reuses it, and a changed build is packed again. Workers that ask
 * at the same time wait for the one that makes it (a lock directory, `mkdir` being atomic).
 *
 * The install is offline: `npm ci` (the repository's, or CI's) leaves every dependency's tarball in the npm cache,
 * but not the registry metadata a version range needs, so the folder gets a lockfile made of the repository's own
 * (its production entries: the versions the tests ran with) and installs with `npm ci --offline`, which needs the
 * cached tarballs only. What that leaves is what `npm install <tarball>` leaves: a package.json naming the tarball,
 * the lockfile, node_modules with `.bin/iam-gateway`.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { runTempDir } from './env';
import { ROOT } from './gateway';
import { ensureBuilt } from './gateway-process';
import { hasExited } from './processes';
import { until } from './wait';

const run = promisify(execFile);

export interface PackageManifest {
  name: string;
  version: string;
  main: string;
  types: string;
  bin: Record<string, string>;
  files: string[];
  license: string;
  engines: Record<string, string>;
  dependencies: Record<string, string>;
}
export const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageManifest;

export interface InstalledPackage {
  /** The tarball `npm pack` wrote (`iam-gateway-<version>.tgz`), absolute. */
  tarball: string;
  /** The paths the tarball holds, sorted. */
  files: string[];
  /**
   * The folder the tarball was installed into (package.json, package-lock.json, node_modules). Shared by every test
   * of the run: read it, run from it, but write into a folder of your own ({@link appFolder}).
   */
  project: string;
}

/** The environment of an npm or node child: the npm_* variables of an enclosing `npm test` or `npx jest` would configure it. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));
  return { ...env, NODE_OPTIONS: '', ...extra };
}

/** Runs `file` in `cwd`; its standard output, or an error carrying both outputs. */
export async function sh(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = childEnv()): Promise<string> {
  try {
    const { stdout } = await run(file, args, { cwd, env, timeout: 240_000, maxBuffer: 32 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${file} ${args.join(' ')} failed in ${cwd}: ${failure.message}\n${failure.stdout ?? ''}\n${failure.stderr ?? ''}`);
  }
}

/** Every file under `path` (a file: itself), relative to ROOT. */
function filesUnder(path: string): string[] {
  const absolute = join(ROOT, path);
  if (!existsSync(absolute)) return [];
  if (!statSync(absolute).isDirectory()) return [path];
  return readdirSync(absolute, { withFileTypes: true }).flatMap((entry) => filesUnder(relative(ROOT, join(absolute, entry.name))));
}

/** The hash of what the tarball is made of: the manifest, the lockfile, and every file its `files` names. */
function sourceHash(): string {
  const hash = createHash('sha256');
  const files = ['package.json', 'package-lock.json', 'README.md', 'LICENSE', ...manifest.files.flatMap((entry) => filesUnder(entry.replace(/\/$/, '')))].sort();
  for (const file of files) {
    if (!existsSync(join(ROOT, file))) continue;
    hash.update(`${file}\0`).update(readFileSync(join(ROOT, file))).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/** Packs the checkout into `dir` and installs the tarball into `dir/project`. */
async function packAndInstall(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  // --ignore-scripts: `prepare` would rebuild dist while other test files may be running processes from it;
  // ensureBuilt() made it current.
  const listing = JSON.parse(await sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], ROOT)) as Array<{ filename: string; files: Array<{ path: string }> }>;
  const tarball = listing[0]!.filename;
  writeFileSync(join(dir, 'files.json'), JSON.stringify(listing[0]!.files.map((file) => file.path).sort()));

  const project = join(dir, 'project');
  mkdirSync(project);
  // What `npm install ../iam-gateway-<version>.tgz` writes into an empty folder's package.json.
  const dependency = `file:../${tarball}`;
  writeFileSync(join(project, 'package.json'), JSON.stringify({ dependencies: { [manifest.name]: dependency } }, null, 2));
  const repositoryLock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean; link?: boolean }> };
  const packages: Record<string, unknown> = {
    '': { dependencies: { [manifest.name]: dependency } },
    [`node_modules/${manifest.name}`]: {
      version: manifest.version,
      resolved: dependency,
      license: manifest.license,
      dependencies: manifest.dependencies,
      bin: manifest.bin,
      engines: manifest.engines,
    },
  };
  for (const [path, entry] of Object.entries(repositoryLock.packages)) {
    if (path !== '' && path.startsWith('node_modules/') && !entry.dev && !entry.link) packages[path] = entry;
  }
  writeFileSync(join(project, 'package-lock.json'), JSON.stringify({ name: 'project', lockfileVersion: 3, requires: true, packages }, null, 2));
  await sh('npm', ['ci', '--offline', '--no-audit', '--no-fund'], project);
}

let once: Promise<InstalledPackage> | undefined;

/**
 * The tarball of this checkout and the folder it is installed into: made by the first caller of the run (in any
 * worker), reused by every other. Builds first when dist is stale.
 */
export function installedPackage(): Promise<InstalledPackage> {
  once ??= makeOrWait().catch((error: unknown) => {
    once = undefined;
    throw error;
  });
  return once;
}

async function makeOrWait(): Promise<InstalledPackage> {
  ensureBuilt();
  const base = runTempDir();
  mkdirSync(base, { recursive: true });
  const dir = join(base, `package-${sourceHash()}`);
  const lock = `${dir}.lock`;
  if (!existsSync(dir)) {
    let mine = false;
    try {
      mkdirSync(lock);
      mine = true;
    } catch {
      // Another worker makes it.
    }
    if (mine) {
      writeFileSync(join(lock, 'pid'), String(process.pid));
      const partial = `${dir}.partial`;
      try {
        rmSync(partial, { recursive: true, force: true });
        await packAndInstall(partial);
        renameSync(partial, dir);
        rmSync(lock, { recursive: true, force: true });
      } catch (error) {
        // The lock stays, with the reason: the workers waiting for it fail with it instead of waiting in vain.
        writeFileSync(join(lock, 'error'), (error as Error).message);
        throw error;
      }
    } else {
      const outcome = await until(
        'the packed and installed package another jest worker is making',
        () => {
          if (existsSync(dir)) return 'ready';
          if (existsSync(join(lock, 'error'))) return `failed: ${readFileSync(join(lock, 'error'), 'utf8')}`;
          const owner = existsSync(join(lock, 'pid')) ? Number(readFileSync(join(lock, 'pid'), 'utf8')) : null;
          if (owner !== null && hasExited(owner) && !existsSync(dir)) return `failed: the worker making it (pid ${owner}) exited`;
          return null;
        },
        { within: 600_000, every: 200 },
      );
      if (outcome !== 'ready') throw new Error(`npm pack and install: ${outcome}`);
    }
  }
  const files = JSON.parse(readFileSync(join(dir, 'files.json'), 'utf8')) as string[];
  const tarball = readdirSync(dir).find((name) => name.endsWith('.tgz'))!;
  return { tarball: join(dir, tarball), files, project: join(dir, 'project') };
}

/**
 * A fresh folder as `npm install <tarball>` leaves it: the installed folder's package.json and lockfile (naming the
 * tarball by its absolute path) and its node_modules (a link: the install is made once per run). Nothing else is in
 * it; `npx --no-install iam-gateway` run in it (or below it) finds `node_modules/.bin/iam-gateway`.
 */
export async function appFolder(prefix: string): Promise<string> {
  const installed = await installedPackage();
  const folder = mkdtempSync(join(runTempDir(), prefix));
  const absolute = (text: string): string => text.replaceAll(`file:../${installed.tarball.split('/').pop()!}`, `file:${installed.tarball}`);
  for (const file of ['package.json', 'package-lock.json']) writeFileSync(join(folder, file), absolute(readFileSync(join(installed.project, file), 'utf8')));
  symlinkSync(join(installed.project, 'node_modules'), join(folder, 'node_modules'), 'dir');
  return folder;
}

/** PATH without the `node_modules/.bin` directories `npm test` or `npx jest` put first (this checkout's tools). */
export function pathWithoutCheckoutBins(): string {
  return (process.env.PATH ?? '')
    .split(':')
    .filter((dir) => dir !== '' && !dir.endsWith('node_modules/.bin') && !dir.includes('node-gyp-bin'))
    .join(':');
}
