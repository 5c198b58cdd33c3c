/**
 * Jest: two projects.
 * - `unit` (test/unit): no database, no global setup; its files run in parallel workers.
 * - `integration` (test/integration, test/e2e, test/scale): the global setup gives every jest worker its own database
 *   (an embedded PGlite each, or `<DATABASE_URL's database>_w<N>`), so files run in parallel workers too.
 * `maxWorkers` is global in jest, not per project; it stays 1 here, so any plain `npx jest ...` runs one file
 * at a time. `npm test` runs the projects as two invocations with their own worker counts
 * (`npm run test:unit`, then `npm run test:integration`; the first failure stops it).
 */
const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }],
  // ESM-only dependencies (jose, openid-client and its oauth4webapi): Node loads them with require(esm), jest's own
  // module system does not, so they are compiled to CommonJS for the tests like our TypeScript. The OTLP exporter's
  // transport loads `http` with a dynamic import(), which jest's vm cannot run either: compiled the same way.
  '^.+/node_modules/(jose|openid-client|oauth4webapi|@opentelemetry/otlp-exporter-base)/.+\\.js$': ['ts-jest', { tsconfig: { allowJs: true, module: 'commonjs', target: 'ES2022' } }],
};
const transformIgnorePatterns = ['/node_modules/(?!(jose|openid-client|oauth4webapi|@opentelemetry/otlp-exporter-base)/)'];

module.exports = {
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform,
      transformIgnorePatterns,
      testMatch: ['<rootDir>/test/unit/**/*.test.ts'],
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      transform,
      transformIgnorePatterns,
      testMatch: ['<rootDir>/test/integration/**/*.test.ts', '<rootDir>/test/e2e/**/*.test.ts', '<rootDir>/test/scale/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      setupFiles: ['<rootDir>/test/support/worker-env.ts'],
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
  // A plain `npx jest FILE…` runs one file at a time; `npm run test:unit` (one worker per core) and
  // `npm run test:integration` (two workers, each with its own database) raise it.
  maxWorkers: 1,
  testTimeout: 30000,
};
