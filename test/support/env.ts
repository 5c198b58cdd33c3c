import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** This jest worker's own database (global-setup.ts makes one per worker); '' outside the integration project. */
export const testDatabaseUrl = (): string => {
  const urls = JSON.parse(process.env.IAM_TEST_DATABASE_URLS ?? '[]') as string[];
  if (urls.length === 0) return process.env.DATABASE_URL ?? '';
  const worker = Number(process.env.JEST_WORKER_ID ?? '1');
  return urls[(worker - 1) % urls.length] ?? urls[0]!;
};
export const testDatabaseKind = (): 'postgres' | 'pglite' =>
  process.env.IAM_TEST_DATABASE_KIND === 'postgres' ? 'postgres' : 'pglite';
export const testRedisUrl = (): string | null => process.env.REDIS_URL ?? null;
/**
 * A key prefix no other test file uses, so test files never see each other's tokens. It starts with the test
 * run's id (global-setup.ts), so the global teardown removes every key the run wrote, and nothing of another run.
 */
export const uniquePrefix = (name: string): string => `${testRunPrefix()}${name}-${process.pid}-${Date.now().toString(36)}`;

/** What every store key of this test run starts with: `test-<run id>-`. */
export const testRunPrefix = (): string => `test-${process.env.IAM_TEST_RUN_ID ?? 'run'}-`;

/**
 * This test run's temporary directory (`<tmp>/iam-gateway-test-<run id>`): what is made once per run and shared by
 * its test files (installed-package.ts). The global teardown removes it.
 */
export function runTempDir(): string {
  const id = process.env.IAM_TEST_RUN_ID;
  if (!id) throw new Error("IAM_TEST_RUN_ID is not set: the integration project's global setup (test/support/global-setup.ts) sets it");
  return join(tmpdir(), `iam-gateway-test-${id}`);
}

/**
 * Says, in one line and without a stack frame (unlike console.log under jest), that some tests of a file do not
 * run here and why. CI runs them all.
 */
export function notRun(message: string): void {
  process.stdout.write(`[not run] ${message}\n`);
}

/**
 * `describe` for tests that need a real Redis (REDIS_URL): without it they are skipped, and the run says so
 * in one line. CI always sets REDIS_URL.
 */
export function describeWithRedis(title: string, body: () => void): void {
  if (testRedisUrl()) {
    describe(title, body);
    return;
  }
  notRun(`${title}: REDIS_URL unset (CI always sets it)`);
  describe.skip(title, body);
}
