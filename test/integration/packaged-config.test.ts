/**
 * docs/configuration.md "Which file": without IAM_CONFIG and without config/default.yaml in the working directory,
 * the CLI reads the config/default.yaml the package ships, so the installed command runs from any directory. A file
 * IAM_CONFIG names stays required: missing, it fails naming the variable. Real processes (`node bin/iam-gateway.js`
 * over the compiled dist), started in an empty temporary directory.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../support/gateway';
import { ensureBuilt } from '../support/gateway-process';
import { until } from '../support/wait';

const BIN = join(ROOT, 'bin', 'iam-gateway.js');
let empty: string;

function runIn(cwd: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // Only these variables: an IAM_CONFIG or DATABASE_URL of the test run must not leak in.
    execFile(process.execPath, [BIN, ...args], { cwd, timeout: 60_000, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });
}

beforeAll(() => {
  ensureBuilt();
  empty = mkdtempSync(join(tmpdir(), 'iam-packaged-config-'));
}, 180_000);
afterAll(() => rmSync(empty, { recursive: true, force: true }));

describe('no IAM_CONFIG, no config/default.yaml in the working directory: the package\'s own', () => {
  it('policy check (policy dir from the environment) reads the shipped configuration and passes', async () => {
    const answer = await runIn(empty, ['policy', 'check'], { IAM_POLICIES_DIR: join(ROOT, 'policies') });
    expect(answer).toMatchObject({ code: 0, stderr: '' });
    expect(answer.stdout).toContain('0 errors');
  });

  it('policy check without a policy dir: the shipped default (policies) is looked for under the working directory', async () => {
    const answer = await runIn(empty, ['policy', 'check'], {});
    expect(answer.code).toBe(1);
    expect(answer.stdout + answer.stderr).toContain(`policy directory ${join(empty, 'policies')} does not exist`);
    expect(answer.stdout + answer.stderr).not.toContain('cannot read the configuration file');
  });

  it('migrate status on an in-memory embedded database', async () => {
    const answer = await runIn(empty, ['migrate', 'status'], { DATABASE_URL: '', DATABASE_EMBEDDED_DIR: 'memory://' });
    expect(answer).toMatchObject({ code: 0, stderr: '' });
    expect(answer.stdout).toContain('history table: iam_mikro_orm_schema_history');
    expect(answer.stdout).toMatch(/pending {3}Migration\d+_initial/);
    expect(readdirSync(empty)).toEqual([]);
  });
});

it('a file IAM_CONFIG names that is missing: exit 1 naming the variable and the file, no fall back', async () => {
  for (const args of [['policy', 'check'], ['migrate', 'status']]) {
    const answer = await runIn(empty, args, { IAM_CONFIG: 'missing.yaml', IAM_POLICIES_DIR: join(ROOT, 'policies'), DATABASE_URL: '', DATABASE_EMBEDDED_DIR: 'memory://' });
    expect(answer.code).toBe(1);
    expect(answer.stderr).toContain('config: cannot read the configuration file missing.yaml (ENOENT) (environment variable IAM_CONFIG)');
    expect(answer.stdout).toBe('');
  }
});

describe('serve without a policies/ directory and without iam.policy.dir: the package\'s example policy', () => {
  /** `serve` in `cwd` until it logs that it listens (or exits), then SIGTERM; what it wrote. */
  async function serveIn(cwd: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [BIN, 'serve'], {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', MANAGEMENT_PORT: '0', SERVER_HOST: '127.0.0.1', UPSTREAM_URL: 'http://127.0.0.1:9', DATABASE_URL: '', DATABASE_EMBEDDED_DIR: 'memory://', REDIS_URL: '', IAM_AUDIT_SPOOL_DIR: join(cwd, 'spool'), ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await until('the gateway to listen or exit', () => stdout.includes('"msg":"iam-gateway listening"') || child.exitCode !== null, { within: 60_000 });
    } finally {
      child.kill('SIGTERM');
    }
    return { code: await exited, stdout, stderr };
  }

  it('starts with policies/example.yaml of the package, saying so on stderr', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-packaged-policy-'));
    try {
      const answer = await serveIn(dir, {});
      expect(answer.stdout).toContain('"msg":"iam-gateway listening"');
      expect(answer.code).toBe(0);
      expect(answer.stderr).toContain(
        `iam-gateway: no policies/ directory here and no iam.policy.dir (IAM_POLICIES_DIR) set: serving the example policy the package ships, ${join(ROOT, 'policies', 'example.yaml')}`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it('a policy directory named by the environment that is missing still fails the start (never the example instead)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-packaged-policy-'));
    try {
      const answer = await serveIn(dir, { IAM_POLICIES_DIR: 'my-policies' });
      expect(answer.code).toBe(1);
      expect(answer.stderr).toContain(`policy: ${join(dir, 'my-policies')} has errors`);
      expect(answer.stdout).toContain(`policy directory ${join(dir, 'my-policies')} does not exist`);
      expect(answer.stderr).not.toContain('example policy');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
