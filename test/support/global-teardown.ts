import { rmSync } from 'node:fs';
import { createOrm } from '../../src/adapters/postgres/orm';
import { runTempDir, testRunPrefix } from './env';
import { removeKeysStartingWith } from './run-keys';

/**
 * Stops the embedded databases, drops the per-worker PostgreSQL databases global-setup.ts made, and removes
 * every Redis key this run wrote (they all start with test-<run id>-: env.ts uniquePrefix), and the run's temporary
 * directory (the packed and installed package: installed-package.ts).
 */
export default async function globalTeardown(): Promise<void> {
  if (process.env.IAM_TEST_RUN_ID) rmSync(runTempDir(), { recursive: true, force: true });
  await Promise.all((globalThis.__IAM_EMBEDDED_DBS__ ?? []).map((database) => database.stop()));
  if (process.env.REDIS_URL && process.env.IAM_TEST_RUN_ID) await removeKeysStartingWith(process.env.REDIS_URL, testRunPrefix());
  const extra = globalThis.__IAM_EXTRA_DATABASES__;
  if (!extra) return;
  const orm = await createOrm({ url: extra.adminUrl, poolSize: 1, historyTable: 'iam_mikro_orm_schema_history', embedded: false, connectTimeoutMs: 5000 });
  try {
    for (const name of extra.names) await orm.em.getConnection().execute(`drop database if exists "${name.replace(/"/g, '""')}" with (force)`);
  } finally {
    await orm.close(true);
  }
}

