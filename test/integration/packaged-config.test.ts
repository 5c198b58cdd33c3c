/**
 * docs/configuration.md "Which file": without IAM_CONFIG and without config/default.yaml in the working directory,
 * the CLI reads the config/default.yaml the package ships, so the installed command runs from any directory. A file
 * IAM_CONFIG names stays required: missing, it fails naming the variable. Real processes (`node bin/iam-gateway.js`
 * over the compiled dist), started in an empty temporary directory.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../support/gateway';
import { ensureBuilt } from '../support/gateway-process';

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
