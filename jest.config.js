/**
 * Jest: two projects.
 * - `unit` (test/unit): no database, no global setup; its files run in parallel workers.
 * - `integration` (test/integration, test/e2e): the global setup starts the embedded PGlite (or uses
 *   DATABASE_URL); these files share that one database and must run one at a time.
 * `maxWorkers` is global in jest, not per project, so it stays 1 here: any plain `npx jest ...` is safe.
 * `npm test` runs the projects as two invocations, the unit one with parallel workers
 * (`npm run test:unit`, then `npm run test:integration`; the first failure stops it).
 */
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] };

module.exports = {
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/unit/**/*.test.ts'],
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/integration/**/*.test.ts', '<rootDir>/test/e2e/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
  // Integration and e2e files share one database (real PostgreSQL in CI, PGlite otherwise): one at a time.
  // Only `npm run test:unit` raises it (`--maxWorkers=100%`: one per core), for the unit project alone.
  maxWorkers: 1,
  testTimeout: 30000,
};
