/**
 * docs/policy-changes.md, run as written: every `sh` block of the guide in order, in a directory holding the live
 * `policies/`, a change in `pr-policies/` that opens the admin area to project readers (wider), and `yesterday.log`,
 * an access log a real gateway wrote in this test, and the package as your-app.md's step 0 installs it (this
 * checkout's tarball, packed and installed once per test run: test/support/installed-package.ts), so
 * `npx --no-install iam-gateway` runs its real binary. Then the GitHub Actions
 * workflow's gate step as the workflow runs it (its env, the script copied to ci/), with and without the label.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import { parse as parseYaml } from 'yaml';
import { startHost, type RunningHost } from '../../examples/host/server';
import { listConfigKeys } from '../../src/config';
import { createTestDatabase } from '../support/database';
import { testDatabaseKind, testDatabaseUrl } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { runShBlock, installedAppFolder, shBlocks } from '../support/guide-workspace';

const GUIDE = readFileSync(join(ROOT, 'docs', 'policy-changes.md'), 'utf8');
const WORKFLOW = join(ROOT, 'examples', 'ci', 'github-actions-policy.yml');
/** What each `sh` block of the guide exits with, in order: the diff and the unlabelled gate see the wider change. */
const EXPECTED_EXITS = [1, 1, 0, 0, 1, 0];

let work: string;
let host: RunningHost;

/** A block where `npx --no-install iam-gateway` finds the installed package, on the test run's database. */
const run = (script: string, env: Record<string, string> = {}): ReturnType<typeof runShBlock> =>
  runShBlock(work, script, {
    DATABASE_URL: testDatabaseUrl(),
    // The embedded PGlite of the test run serializes sessions: one connection.
    DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '4',
    IAM_CONFIG: join(ROOT, 'config', 'default.yaml'),
    ...env,
  });

beforeAll(async () => {
  await (await createTestDatabase()).close();
  work = await installedAppFolder('policy-changes-');
  cpSync(join(ROOT, 'policies'), join(work, 'policies'), { recursive: true });
  cpSync(join(ROOT, 'policies'), join(work, 'pr-policies'), { recursive: true });
  const example = join(work, 'pr-policies', 'example.yaml');
  const text = readFileSync(example, 'utf8');
  const changed = text.replace('path: /api/admin/**\n    methods: ["*"]\n    permission: admin:write', 'path: /api/admin/**\n    methods: ["*"]\n    permission: project:read');
  expect(changed).not.toBe(text);
  writeFileSync(example, changed);
  cpSync(join(work, 'pr-policies'), join(work, 'candidate'), { recursive: true });
  mkdirSync(join(work, 'examples'));
  cpSync(join(ROOT, 'examples', 'ci'), join(work, 'examples', 'ci'), { recursive: true });

  // Yesterday's traffic: the example users through a gateway serving the live policy, its access log kept.
  let log = '';
  const destination: DestinationStream = { write: (chunk: string) => void (log += chunk) };
  host = await startHost(0);
  const gateway = await startTestGateway(host.url, { IAM_POLICIES_DIR: join(work, 'policies'), IAM_ACCESS_LOG: 'all' }, { accessLogDestination: destination });
  try {
    const alice = bearer((await login(gateway.url, 'alice', 'alice-password', 'API')).accessToken);
    const admin = bearer((await login(gateway.url, 'admin', 'admin-password', 'API')).accessToken);
    const statuses = [];
    for (const [path, headers] of [['/api/projects', alice], ['/api/admin/stats', alice], ['/api/admin/stats', admin], ['/api/projects/1', alice]] as const) {
      statuses.push((await fetch(`${gateway.url}${path}`, { headers })).status);
    }
    expect(statuses).toEqual([200, 403, 200, 200]);
  } finally {
    await gateway.close();
  }
  writeFileSync(join(work, 'yesterday.log'), log);
}, 600_000);

afterAll(async () => {
  await host?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('docs/policy-changes.md as written', () => {
  it('each sh block runs, in order, with the exit status the guide gives', async () => {
    const blocks = shBlocks(GUIDE);
    expect(blocks).toHaveLength(EXPECTED_EXITS.length);
    const outcomes = [];
    for (const block of blocks) outcomes.push(await run(block));
    expect(outcomes.map((outcome, index) => ({ block: blocks[index]!.split('\n')[0], code: outcome.code }))).toEqual(
      blocks.map((block, index) => ({ block: block.split('\n')[0], code: EXPECTED_EXITS[index] })),
    );
    // The diff names the wider route; the replay finds alice's denial that would now be allowed.
    expect(outcomes[0]!.output).toMatch(/wider.*\/api\/admin\/\*\*/);
    expect(outcomes[1]!.output).toContain('add the label widens-access');
    expect(outcomes[2]!.output).toContain('approved by the label widens-access');
    expect(outcomes[3]!.output).toContain('1 deny→allow');
    // Promotion left the live directory as the candidate.
    for (const file of readdirSync(join(work, 'candidate')).filter((name) => name.endsWith('.yaml'))) expect(readFileSync(join(work, 'policies', file), 'utf8')).toBe(readFileSync(join(work, 'candidate', file), 'utf8'));
    expect(readdirSync(join(work, 'policies')).filter((file) => file.startsWith('.'))).toEqual([]);
  }, 240_000);

  it('its configuration example names real keys', () => {
    const yamlBlock = /```yaml\n([\s\S]*?)```/.exec(GUIDE)![1]!;
    const keys = listConfigKeys().map(({ key }) => key);
    const flat = (value: unknown, prefix: string): string[] =>
      typeof value === 'object' && value !== null ? Object.entries(value).flatMap(([name, inner]) => flat(inner, prefix ? `${prefix}.${name}` : name)) : [prefix];
    for (const key of flat(parseYaml(yamlBlock), '')) expect(keys).toContain(key);
  });
});

describe('the GitHub Actions workflow (examples/ci/github-actions-policy.yml)', () => {
  interface Step {
    name?: string;
    run?: string;
    env?: Record<string, string>;
  }
  const workflow = parseYaml(readFileSync(WORKFLOW, 'utf8')) as { on: { pull_request: { types: string[] } }; jobs: Record<string, { steps: Step[] }> };
  const gate = Object.values(workflow.jobs).flatMap((job) => job.steps).find((step) => step.name === 'Does this pull request widen access?')!;

  /** The gate step as the runner runs it: the script where the guide says to copy it, its env with the expressions filled in. */
  function runGate(base: string, labels: string): Promise<{ code: number; output: string }> {
    mkdirSync(join(work, 'ci'), { recursive: true });
    cpSync(join(ROOT, 'examples', 'ci', 'policy-gate.sh'), join(work, 'ci', 'policy-gate.sh'));
    const env = Object.fromEntries(
      Object.entries(gate.env!).map(([name, value]) => [
        name,
        value.replace('${{ runner.temp }}/base/policies', base).replace("${{ join(github.event.pull_request.labels.*.name, ',') }}", labels),
      ]),
    );
    expect(Object.values(env).join(' ')).not.toContain('${{');
    return run(gate.run!, env);
  }

  beforeAll(() => {
    // The pull request's head: the widened policy in policies/ (the workflow's HEAD_DIR); the base elsewhere.
    rmSync(join(work, 'base'), { recursive: true, force: true });
    cpSync(join(ROOT, 'policies'), join(work, 'base'), { recursive: true });
    rmSync(join(work, 'policies'), { recursive: true, force: true });
    cpSync(join(work, 'pr-policies'), join(work, 'policies'), { recursive: true });
  });

  it('runs again when labels change, and passes the labels through the environment only', () => {
    expect(workflow.on.pull_request.types).toEqual(expect.arrayContaining(['labeled', 'unlabeled', 'synchronize']));
    expect(gate.run).toBe('sh ci/policy-gate.sh');
    expect(gate.env).toMatchObject({ HEAD_DIR: 'policies' });
  });

  it('fails a widening pull request without the label, passes it with the label, and a broken policy is exit 2', async () => {
    expect((await runGate(join(work, 'base'), 'docs')).code).toBe(1);
    expect((await runGate(join(work, 'base'), 'docs,widens-access')).code).toBe(0);
    // A label that only contains the word is not the label.
    expect((await runGate(join(work, 'base'), 'not-widens-access')).code).toBe(1);
    // Nothing wider (the same policy on both sides): passes without any label.
    expect((await runGate(join(work, 'policies'), '')).code).toBe(0);
    writeFileSync(join(work, 'policies', 'broken.yaml'), 'version: 1\nroutes:\n  - path: /x\n    methods: [NOPE]\n');
    const broken = await runGate(join(work, 'base'), 'widens-access');
    expect(broken.code).toBe(2);
    expect(broken.output).toContain('broken.yaml');
    rmSync(join(work, 'policies', 'broken.yaml'));
    // The script is POSIX sh, not bash-only.
    expect(() => execFileSync('sh', ['-n', join(ROOT, 'examples', 'ci', 'policy-gate.sh')])).not.toThrow();
  }, 240_000);
});
