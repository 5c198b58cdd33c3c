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
