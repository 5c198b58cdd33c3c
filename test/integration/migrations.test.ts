/**
 * Migrations (design.md §1, §2 `migrate up|down|status`) against the database of this run: embedded
 * PGlite, or real PostgreSQL when DATABASE_URL is set.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { GatewayConfig } from '../../src/config/gateway-config';
import { openDatabase } from '../../src/persistence/database';
import { IAM_MIGRATIONS } from '../../src/persistence/migration-list';
import { migrateDown, migrateUp, migrationStatus } from '../../src/persistence/migrator';
import { createTestOrm, DEFAULT_HISTORY_TABLE, dropPublicSchema } from '../support/database';
import { testDatabaseKind, testDatabaseUrl } from '../support/env';

/** Every migration, oldest first (the list grows; the assertions hold for any length). */
const ALL = IAM_MIGRATIONS.map((migration) => migration.name);
const NEWEST_FIRST = [...ALL].reverse();
const IAM_TABLES = [
  'iam_audit_events',
  'iam_changes',
  'iam_identities',
  'iam_permission_templates',
  'iam_profiles',
  'iam_resource_scopes',
  'iam_sessions',
  'iam_template_permissions',
  'iam_users',
];

async function publicTables(orm: MikroORM): Promise<string[]> {
  const rows = await orm.em
    .fork()
    .execute<Array<{ table_name: string }>>(
      "select table_name from information_schema.tables where table_schema = 'public' order by table_name",
    );
  return rows.map((row) => row.table_name);
}

async function historyNames(orm: MikroORM, table: string): Promise<string[]> {
  const rows = await orm.em.fork().execute<Array<{ name: string }>>(`select name from "${table}" order by id`);
  return rows.map((row) => row.name);
}

describe('migrations with a custom history table', () => {
  let orm: MikroORM;

  beforeAll(async () => {
    orm = await createTestOrm('my_history');
    await dropPublicSchema(orm);
  });
  afterAll(async () => {
    await orm.close(true);
  });

  it('lists the initial migration as pending on an empty database', async () => {
    await expect(migrationStatus(orm)).resolves.toEqual({ executed: [], pending: ALL });
  });

  it('up creates every iam_ table and records itself in the configured history table', async () => {
    await expect(migrateUp(orm)).resolves.toEqual(ALL);
    const tables = await publicTables(orm);
    expect(tables).toEqual([...IAM_TABLES, 'my_history'].sort());
    expect(tables).not.toContain(DEFAULT_HISTORY_TABLE);
    await expect(historyNames(orm, 'my_history')).resolves.toEqual(ALL);
  });

  it('a second up applies nothing', async () => {
    await expect(migrateUp(orm)).resolves.toEqual([]);
    await expect(historyNames(orm, 'my_history')).resolves.toEqual(ALL);
  });

  it('status lists what was executed and nothing pending', async () => {
    await expect(migrationStatus(orm)).resolves.toEqual({ executed: ALL, pending: [] });
  });

  it('the schema enforces scope uniqueness, access modes and unique token hashes', async () => {
    const em = orm.em.fork();
    await em.execute("insert into iam_users (user_id) values ('u-1')");
    await em.execute("insert into iam_permission_templates (version_id, name) values ('t-1', 't')");
    await em.execute(
      "insert into iam_profiles (profile_id, user_id, profile_name, template_version_id) values ('p-1', 'u-1', 'p', 't-1')",
    );
    await em.execute("insert into iam_resource_scopes values ('p-1', 'PROJECT', '1', 'READ')");
    await expect(em.execute("insert into iam_resource_scopes values ('p-1', 'PROJECT', '1', 'WRITE')")).rejects.toThrow();
    await expect(em.execute("insert into iam_resource_scopes values ('p-1', 'PROJECT', '2', 'ADMIN')")).rejects.toThrow();
    await expect(
      em.execute("insert into iam_profiles (profile_id, user_id, profile_name, template_version_id) values ('p-2', 'u-1', 'p', 'nope')"),
    ).rejects.toThrow();
    const session = (id: string) =>
      `insert into iam_sessions (session_id, user_id, identity_id, client_type, token_hash, created_at, expires_at)
       values ('${id}', 'u-1', 'i-1', 'WEB', 'same-hash', now(), now() + interval '1 hour')`;
    await em.execute(session('s-1'));
    await expect(em.execute(session('s-2'))).rejects.toThrow();
  });

  it('down to 0 removes every iam_ table and leaves an empty history', async () => {
    await expect(migrateDown(orm, { to: '0' })).resolves.toEqual(NEWEST_FIRST);
    await expect(publicTables(orm)).resolves.toEqual(['my_history']);
    await expect(historyNames(orm, 'my_history')).resolves.toEqual([]);
    await expect(migrationStatus(orm)).resolves.toEqual({ executed: [], pending: ALL });
  });

  it('down with nothing applied reverts nothing; step and to: 0 revert what was applied', async () => {
    await expect(migrateDown(orm)).resolves.toEqual([]);
    await migrateUp(orm);
    await expect(migrateDown(orm, { step: 1 })).resolves.toEqual([ALL[ALL.length - 1]]);
    await migrateUp(orm);
    await expect(migrateDown(orm, { to: '0' })).resolves.toEqual(NEWEST_FIRST);
    await expect(publicTables(orm)).resolves.toEqual(['my_history']);
  });
});

describe('migrations with the default history table', () => {
  it('records into iam_mikro_orm_schema_history', async () => {
    const orm = await createTestOrm();
    try {
      await dropPublicSchema(orm);
      await expect(migrateUp(orm)).resolves.toEqual(ALL);
      const tables = await publicTables(orm);
      expect(tables).toEqual([...IAM_TABLES, DEFAULT_HISTORY_TABLE].sort());
      await expect(historyNames(orm, DEFAULT_HISTORY_TABLE)).resolves.toEqual(ALL);
    } finally {
      await orm.close(true);
    }
  });
});

/**
 * openDatabase reads only `database` and `iam.schema` of the configuration. Its embedded branch cannot
 * run here: PGlite needs dynamic imports that jest's VM refuses outside globalSetup.
 */
function databaseConfig(database: Partial<GatewayConfig['database']>): GatewayConfig {
  const config = {
    database: { url: null, embeddedDir: 'memory://', poolSize: 2, ...database },
    iam: { schema: { historyTable: DEFAULT_HISTORY_TABLE } },
  };
  return config as unknown as GatewayConfig;
}

describe('openDatabase', () => {
  it('connects to database.url and applies pending migrations', async () => {
    const orm = await createTestOrm();
    await dropPublicSchema(orm);
    await orm.close(true);
    // Against the shared PGlite of this run a second pool must not overlap another: the one above is closed.
    const database = await openDatabase(databaseConfig({ url: testDatabaseUrl(), poolSize: testDatabaseKind() === 'pglite' ? 1 : 2 }));
    try {
      expect(database.kind).toBe('postgres');
      await expect(migrationStatus(database.orm)).resolves.toEqual({ executed: ALL, pending: [] });
      await expect(database.repository.ping()).resolves.toBeUndefined();
    } finally {
      await database.close();
    }
  });
});
