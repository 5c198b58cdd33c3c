/**
 * The package as its users get it: `npm pack`, the tarball installed into an empty folder, then
 * `require('iam-gateway')`, the engine opened against the test database from the installed files,
 * `npx --no-install iam-gateway` run from the installed bin, and a TypeScript file importing the package compiled
 * with the repository's tsc against the installed declarations. The tarball holds the build, the runtime files and
 * the examples a deployment starts from; no tests, benchmarks or TypeScript sources.
 *
 * The pack and the (offline) install are test/support/installed-package.ts's, made once per test run and shared with
 * the guide tests; this file works in an app folder of its own holding that install.
 */
import { cpSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { testDatabaseUrl } from '../support/env';
import { ROOT } from '../support/gateway';
import { appFolder, childEnv, installedPackage, manifest, sh } from '../support/installed-package';

const TSC = join(ROOT, 'node_modules', '.bin', 'tsc');

/** Every file under `dir` (relative to ROOT). */
function filesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [relative(ROOT, join(ROOT, dir, entry.name))],
  );
}

let project: string;
let packed: string[];

beforeAll(async () => {
  packed = (await installedPackage()).files;
  project = await appFolder('package-install-');
  // What a deployment starts from: the shipped configuration and example policy, copied into the project.
  mkdirSync(join(project, 'config'));
  mkdirSync(join(project, 'policies'));
  cpSync(join(project, 'node_modules/iam-gateway/config/default.yaml'), join(project, 'config/default.yaml'));
  cpSync(join(project, 'node_modules/iam-gateway/policies/example.yaml'), join(project, 'policies/example.yaml'));
}, 600_000);

it('#13: the tarball holds the build, the bin, the shipped configuration and examples; no tests, benchmarks or sources', () => {
  const fixed = ['LICENSE', 'README.md', 'package.json', 'bin/iam-gateway.js', 'host.mjs', 'config/default.yaml', 'config/provision.example.yaml', 'config/users.example.yaml', 'policies/example.yaml'];
  const built = [...filesUnder('dist/src'), ...filesUnder('dist/migrations')].filter((file) => file.endsWith('.js') || file.endsWith('.d.ts'));
  // The web console's static files (served at /iam/console).
  built.push(...filesUnder('console'));
  const expected = [...fixed.filter((file) => file !== 'LICENSE' || packed.includes('LICENSE')), ...built].sort();
  expect(packed).toEqual(expected);
  // About 600 files: the compiled src/ (.js and .d.ts) and migrations/, the console, and the nine above. The bound
  // catches a folder packed by mistake (node_modules, a data directory: thousands of files), not a new module.
  expect(packed.length).toBe(expected.length);
  expect(packed.length).toBeLessThan(800);
  expect(packed.filter((file) => /^(dist\/)?(test|bench|examples|scripts|docs)\//.test(file))).toEqual([]);
  expect(packed.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
  for (const entry of [manifest.main, manifest.types, ...Object.values(manifest.bin), 'dist/src/cli/main.js']) expect(packed).toContain(entry);
});

it('#13: require("iam-gateway") from the installed package exposes the API and runs the engine on the test database', async () => {
  const script = `
    const gateway = require('iam-gateway');
    const types = Object.fromEntries(['decide', 'require', 'openAuthorizationEngine', 'startGateway', 'loadConfig', 'compilePolicyFiles', 'ProblemError'].map((name) => [name, typeof gateway[name]]));
    (async () => {
      // The copied config/default.yaml and policies/, the database from the environment.
      const engine = await gateway.openAuthorizationEngine(gateway.loadConfig());
      try {
        const principal = { userId: 'u-package-nobody', identityId: 'id-package-nobody', identityDomain: 'example.com', activeProfileId: null, authorizationVersion: 1 };
        const input = { subject: { principal, clientType: 'WEB' }, permissionCode: 'project:list', resource: null, resources: {} };
        const decision = await gateway.decide(engine.engine, input);
        const refused = await gateway.require(engine.engine, input).then(() => null, (error) => ({ problem: error instanceof gateway.ProblemError, code: error.code, status: error.status }));
        const route = await engine.engine.decideRequest({ method: 'GET', path: '/api/projects', policy: engine.policy, subject: null });
        console.log(JSON.stringify({ from: require.resolve('iam-gateway'), types, allowed: decision.allowed, step: decision.failedStep, refused, route: route.status }));
      } finally {
        await engine.close();
      }
    })().catch((error) => { console.error(error); process.exitCode = 1; });`;
  const output = await sh(process.execPath, ['-e', script], project, childEnv({ DATABASE_URL: testDatabaseUrl(), DATABASE_POOL_SIZE: '1', REDIS_URL: '' }));
  const result = JSON.parse(output.trim().split('\n').pop()!) as Record<string, unknown>;
  expect(result).toEqual({
    from: realpathSync(join(project, 'node_modules', 'iam-gateway', 'dist', 'src', 'index.js')),
    types: { decide: 'function', require: 'function', openAuthorizationEngine: 'function', startGateway: 'function', loadConfig: 'function', compilePolicyFiles: 'function', ProblemError: 'function' },
    allowed: false,
    step: 'NO_ACTIVE_PROFILE',
    refused: { problem: true, code: 'IAM_ACCESS_DENIED', status: 403 },
    route: 401,
  });
}, 60_000);

it('#30: iam-gateway/host from the installed package: CommonJS, ESM and types, nothing of the gateway loaded', async () => {
  const common = await sh(
    process.execPath,
    ['-e', `const host = require('iam-gateway/host'); const iam = host.createHostAuthorization({ gatewayUrl: 'http://127.0.0.1:1', issuer: 'iam-gateway' });
      console.log(JSON.stringify({ exports: Object.keys(host).sort(), forRequest: typeof iam.forRequest, gatewayLoaded: Object.keys(require.cache).some((file) => file.includes('start-gateway')) }));`],
    project,
  );
  expect(JSON.parse(common.trim().split('\n').pop()!)).toEqual({ exports: ['HostAuthorizationError', 'createHostAuthorization', 'expressMiddleware', 'koaMiddleware'], forRequest: 'function', gatewayLoaded: false });
  writeFileSync(join(project, 'host-esm.mjs'), `import { createHostAuthorization, koaMiddleware } from 'iam-gateway/host';\nconsole.log(typeof createHostAuthorization, typeof koaMiddleware);\n`);
  expect((await sh(process.execPath, ['host-esm.mjs'], project)).trim()).toBe('function function');
  writeFileSync(
    join(project, 'host-typed.ts'),
    `import { createHostAuthorization, type HostPlan, type RequestAuthorization } from 'iam-gateway/host';
export async function visible(iam: RequestAuthorization): Promise<HostPlan> {
  return iam.plan('project:read', 'PROJECT', 'READ');
}
export const client = createHostAuthorization({ gatewayUrl: 'http://gateway', issuer: 'iam-gateway', audience: 'host' });
`,
  );
  await sh(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--typeRoots', join(ROOT, 'node_modules', '@types'), 'host-typed.ts'], project);
}, 120_000);

it('#13: `npx --no-install iam-gateway` runs the installed bin: --version, --help, migrate status on the test database, policy check', async () => {
  expect(await sh('npx', ['--no-install', 'iam-gateway', '--version'], project)).toBe(`${manifest.version}\n`);
  expect(await sh('npx', ['--no-install', 'iam-gateway', '--help'], project)).toMatch(/^usage: iam-gateway <command>/);
  const status = await sh('npx', ['--no-install', 'iam-gateway', 'migrate', 'status'], project, childEnv({ DATABASE_URL: testDatabaseUrl(), DATABASE_POOL_SIZE: '1', REDIS_URL: '' }));
  // The migrations compiled into dist/migrations ship and are the ones the database ran.
  const shipped = packed.filter((file) => /^dist\/migrations\/.*\.js$/.test(file)).map((file) => file.replace(/^dist\/migrations\/|\.js$/g, ''));
  expect(shipped.length).toBeGreaterThan(0);
  for (const name of shipped) expect(status).toMatch(new RegExp(`executed\\s+${name}`));
  expect(status).not.toMatch(/pending/);
  // The copied example policy, found through the copied config/default.yaml (iam.policy.dir: policies).
  expect(await sh('npx', ['--no-install', 'iam-gateway', 'policy', 'check'], project)).toMatch(/^0 errors/m);
  expect(await sh('npx', ['--no-install', 'iam-gateway', 'policy', 'explain', 'GET', '/api/projects'], project)).toMatch(/project:list/);
}, 120_000);

it('#13: a TypeScript file importing decide, require and openAuthorizationEngine, and the README examples, compile against the installed types', async () => {
  writeFileSync(
    join(project, 'host.ts'),
    `import { decide, loadConfig, openAuthorizationEngine, ProblemError, require as requireAllowed, type AuthorizationDecision, type DecideInput } from 'iam-gateway';

export async function canList(input: DecideInput): Promise<AuthorizationDecision> {
  const embedded = await openAuthorizationEngine(loadConfig());
  try {
    await requireAllowed(embedded.engine, input).catch((error: unknown) => {
      if (!(error instanceof ProblemError)) throw error;
    });
    const decision = await decide(embedded.engine, input);
    const allowed: boolean = decision.allowed;
    return allowed ? decision : { ...decision };
  } finally {
    await embedded.close();
  }
}
`,
  );
  // The examples of docs/library.md compile as they are shown.
  const section = readFileSync(join(ROOT, 'docs', 'library.md'), 'utf8');
  const examples = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!);
  expect(examples.length).toBe(2);
  examples.forEach((example, index) => writeFileSync(join(project, `readme-${index}.ts`), example));
  // A misuse must not compile: proof that the declarations are read (an untyped import would accept it).
  writeFileSync(join(project, 'misuse.ts'), `import { decide } from 'iam-gateway';\nexport const wrong: string = decide;\n`);
  // skipLibCheck off: the package's declarations are checked too, and must resolve every import they name.
  // esModuleInterop: pino's own declarations need it.
  const compilerOptions = { strict: true, noEmit: true, skipLibCheck: false, esModuleInterop: true, target: 'ES2022', types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')] };
  for (const resolution of [{ module: 'commonjs', moduleResolution: 'node10' }, { module: 'node16', moduleResolution: 'node16' }]) {
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...compilerOptions, ...resolution }, files: ['host.ts', ...examples.map((_, index) => `readme-${index}.ts`)] }));
    await sh(TSC, ['-p', 'tsconfig.json'], project);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...compilerOptions, ...resolution }, files: ['misuse.ts'] }));
    await expect(sh(TSC, ['-p', 'tsconfig.json'], project)).rejects.toThrow(/misuse\.ts.*TS2322/);
  }
}, 120_000);
