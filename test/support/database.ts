/**
 * A migrated, empty database for one test file: the PGlite started by global-setup.ts (pool of one, it
 * serializes sessions) or the real PostgreSQL of DATABASE_URL. Test files run one at a time
 * (jest.config.js maxWorkers 1), so each may drop and recreate the `public` schema.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { IamRepository } from '../../src/domain/iam-repository';
import { migrateUp } from '../../src/adapters/postgres/migrator';
import { MikroOrmIamRepository } from '../../src/adapters/postgres/mikro-orm-iam-repository';
import { createOrm } from '../../src/adapters/postgres/orm';
import { testDatabaseKind, testDatabaseUrl } from './env';

export interface TestDatabase {
  orm: MikroORM;
  repository: IamRepository;
  /** Empties every `iam_` table (the schema and its history stay). */
  reset(): Promise<void>;
  close(): Promise<void>;
}

/** The default history table name (config key `iam.schema.history-table`). */
export const DEFAULT_HISTORY_TABLE = 'iam_mikro_orm_schema_history';

/** An ORM on the test database, without touching its schema. */
export function createTestOrm(historyTable = DEFAULT_HISTORY_TABLE): Promise<MikroORM> {
  const url = testDatabaseUrl();
  if (!url) throw new Error('no test database: run the tests through jest (global-setup.ts sets one up)');
  return createOrm({ url, poolSize: 4, historyTable, embedded: testDatabaseKind() === 'pglite' });
}

/** Drops everything in `public`, so the next migration run starts from nothing. */
export async function dropPublicSchema(orm: MikroORM): Promise<void> {
  const em = orm.em.fork();
  await em.execute('drop schema if exists public cascade');
  await em.execute('create schema public');
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const orm = await createTestOrm();
  await dropPublicSchema(orm);
  await migrateUp(orm);
  return {
    orm,
    repository: new MikroOrmIamRepository(orm),
    async reset() {
      await orm.em
        .fork()
        .execute(
          'truncate table iam_audit_events, iam_sessions, iam_resource_scopes, iam_profiles, iam_template_permissions, ' +
            'iam_permission_templates, iam_identities, iam_users, iam_changes restart identity cascade',
        );
    },
    async close() {
      await orm.close(true);
    },
  };
}
