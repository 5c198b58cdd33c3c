/** Jest: ts-jest, one run for unit, integration and e2e tests. */
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // Test files share one database (real PostgreSQL in CI, PGlite otherwise): run them one at a time.
  maxWorkers: 1,
  testTimeout: 30000,
};
