/**
 * Jest global setup: when DATABASE_URL is not set, start one embedded PGlite over the wire protocol for the
 * whole run and hand its URL to the test files. With DATABASE_URL set (CI), the real
 * PostgreSQL is used. Tests learn which through IAM_TEST_DATABASE_KIND / IAM_TEST_REDIS_KIND.
 */
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../../src/adapters/pglite/embedded-database';

declare global {
  var __IAM_EMBEDDED_DB__: EmbeddedDatabase | undefined;
}

export default async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) {
    process.env.IAM_TEST_DATABASE_KIND = 'postgres';
  } else {
    const embedded = await startEmbeddedDatabase('memory://');
    globalThis.__IAM_EMBEDDED_DB__ = embedded;
    process.env.IAM_TEST_DATABASE_URL = embedded.url;
    process.env.IAM_TEST_DATABASE_KIND = 'pglite';
  }
  process.env.IAM_TEST_REDIS_KIND = process.env.REDIS_URL ? 'redis' : 'memory';
  const db = process.env.IAM_TEST_DATABASE_KIND === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : 'embedded PGlite';
  const store = process.env.REDIS_URL ? 'Redis (REDIS_URL)' : 'in-process token store';
  process.stdout.write(`\n[iam-gateway tests] database: ${db}; token store: ${store}\n`);
}
