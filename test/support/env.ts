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
