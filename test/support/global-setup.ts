/**
 * Jest global setup for the integration project: one database per jest worker, so test files can run in
 * parallel while each may drop and recreate its database's `public` schema.
 * - With DATABASE_URL (CI): worker 1 uses that database; worker N uses `<name>_w<N>`, dropped and created
 *   here (so the role needs CREATEDB; run `npm run test:integration -- --maxWorkers=1` otherwise).
 * - Without it: one embedded PGlite per worker.
 * The URLs reach the workers as IAM_TEST_DATABASE_URLS (JSON); test/support/env.ts picks the worker's own,
 * and test/support/worker-env.ts points DATABASE_URL at it, so nothing in a test can reach another worker's.
 * Tests learn which kind through IAM_TEST_DATABASE_KIND / IAM_TEST_REDIS_KIND.
 */
import type { Config } from '@jest/types';
import { randomBytes } from 'node:crypto';
import { createOrm } from '../../src/adapters/postgres/orm';
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../../src/adapters/pglite/embedded-database';

declare global {
  // The teardown runs in the same process and reads what the setup started.
  var __IAM_EMBEDDED_DBS__: EmbeddedDatabase[] | undefined;
  var __IAM_EXTRA_DATABASES__: { adminUrl: string; names: string[] } | undefined;
}

export default async function globalSetup(globalConfig: Config.GlobalConfig): Promise<void> {
  // Every store key of this run starts with test-<run id>- (env.ts uniquePrefix); the teardown removes them.
  process.env.IAM_TEST_RUN_ID = randomBytes(4).toString('hex');
  const workers = Math.max(1, globalConfig.maxWorkers);
  let urls: string[];
  if (process.env.DATABASE_URL) {
    process.env.IAM_TEST_DATABASE_KIND = 'postgres';
    urls = [process.env.DATABASE_URL, ...(await createWorkerDatabases(process.env.DATABASE_URL, workers - 1))];
  } else {
    const embedded = await Promise.all(Array.from({ length: workers }, () => startEmbeddedDatabase('memory://')));
    globalThis.__IAM_EMBEDDED_DBS__ = embedded;
    urls = embedded.map((database) => database.url);
    process.env.IAM_TEST_DATABASE_KIND = 'pglite';
  }
  process.env.IAM_TEST_DATABASE_URLS = JSON.stringify(urls);
  process.env.IAM_TEST_REDIS_KIND = process.env.REDIS_URL ? 'redis' : 'memory';
  const db = process.env.IAM_TEST_DATABASE_KIND === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : 'embedded PGlite';
  const store = process.env.REDIS_URL ? 'Redis (REDIS_URL)' : 'in-process token store';
  process.stdout.write(`\n[iam-gateway tests] database: ${db}, one per worker (${workers}); token store: ${store}\n`);
}

/** `<database>_w2` … for workers 2..n+1, each dropped (with its connections) and created empty. */
async function createWorkerDatabases(baseUrl: string, count: number): Promise<string[]> {
  if (count === 0) return [];
  const base = new URL(baseUrl);
  const name = decodeURIComponent(base.pathname.slice(1)) || 'postgres';
  const names = Array.from({ length: count }, (_, i) => `${name}_w${i + 2}`);
  const orm = await createOrm({ url: baseUrl, poolSize: 1, historyTable: 'iam_mikro_orm_schema_history', embedded: false, connectTimeoutMs: 5000 });
  try {
    const connection = orm.em.getConnection();
    for (const worker of names) {
      await connection.execute(`drop database if exists "${worker.replace(/"/g, '""')}" with (force)`);
      await connection.execute(`create database "${worker.replace(/"/g, '""')}"`);
    }
  } catch (error) {
    throw new Error(`test setup: cannot create the per-worker databases (${(error as Error).message}); run with --maxWorkers=1`);
  } finally {
    await orm.close(true);
  }
  globalThis.__IAM_EXTRA_DATABASES__ = { adminUrl: baseUrl, names };
  return names.map((worker) => {
    const url = new URL(baseUrl);
    url.pathname = `/${encodeURIComponent(worker)}`;
    return url.toString();
  });
}
