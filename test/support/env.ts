/** Which real services this test run talks to (set by global-setup.ts). */
export const testDatabaseUrl = (): string => process.env.DATABASE_URL ?? process.env.IAM_TEST_DATABASE_URL ?? '';
export const testDatabaseKind = (): 'postgres' | 'pglite' =>
  process.env.IAM_TEST_DATABASE_KIND === 'postgres' ? 'postgres' : 'pglite';
export const testRedisUrl = (): string | null => process.env.REDIS_URL ?? null;
/** A key prefix no other test file uses, so test files never see each other's tokens. */
export const uniquePrefix = (name: string): string => `test-${name}-${process.pid}-${Date.now().toString(36)}`;
