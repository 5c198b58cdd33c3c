/** Which real services this test run talks to (set by global-setup.ts). */
export const testDatabaseUrl = (): string => process.env.DATABASE_URL ?? process.env.IAM_TEST_DATABASE_URL ?? '';
export const testDatabaseKind = (): 'postgres' | 'pglite' =>
  process.env.IAM_TEST_DATABASE_KIND === 'postgres' ? 'postgres' : 'pglite';
export const testRedisUrl = (): string | null => process.env.REDIS_URL ?? null;
/** A key prefix no other test file uses, so test files never see each other's tokens. */
export const uniquePrefix = (name: string): string => `test-${name}-${process.pid}-${Date.now().toString(36)}`;

/**
 * `describe` for tests that need a real Redis (REDIS_URL): without it they are skipped, and the run says so
 * in one line. CI always sets REDIS_URL.
 */
export function describeWithRedis(title: string, body: () => void): void {
  if (testRedisUrl()) {
    describe(title, body);
    return;
  }
  console.log(`${title}: tests NOT run (REDIS_URL unset; CI always sets it)`);
  describe.skip(title, body);
}
