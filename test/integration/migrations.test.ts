/**
 * Migrations (`iam-gateway migrate up|down|status`) against the database of this run: embedded
 * PGlite, or real PostgreSQL when DATABASE_URL is set.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { GatewayConfig } from '../../src/config';
import { openDatabase } from '../../src/adapters/postgres/database';
import { IAM_MIGRATIONS } from '../../src/adapters/postgres/migration-list';
import { migrateDown, migrateUp, migrationStatus } from '../../src/adapters/postgres/migrator';
import { createTestOrm, DEFAULT_HISTORY_TABLE, dropPublicSchema } from '../support/database';
import { testDatabaseKind, testDatabaseUrl } from '../support/env';

const INITIAL = 'Migration20261122000001_initial';
/** Every migration, oldest first (each release may add one). */
const ALL = IAM_MIGRATIONS.map((migration) => migration.name);
const LATEST = ALL[ALL.length - 1]!;
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

  it('lists every migration as pending on an empty database, the initial one first', async () => {
    expect(ALL[0]).toBe(INITIAL);
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

  it('down reverts the latest; to: 0 removes every iam_ table and leaves an empty history', async () => {
    await orm.em.fork().execute('truncate table iam_resource_scopes, iam_profiles, iam_sessions, iam_users, iam_permission_templates cascade');
    await expect(migrateDown(orm)).resolves.toEqual([LATEST]);
    await migrateUp(orm);
    await expect(migrateDown(orm, { to: '0' })).resolves.toEqual([...ALL].reverse());
    await expect(publicTables(orm)).resolves.toEqual(['my_history']);
    await expect(historyNames(orm, 'my_history')).resolves.toEqual([]);
    await expect(migrationStatus(orm)).resolves.toEqual({ executed: [], pending: ALL });
  });

  it('down with nothing applied reverts nothing; step and to: 0 revert what was applied', async () => {
    await expect(migrateDown(orm)).resolves.toEqual([]);
    await migrateUp(orm);
    await expect(migrateDown(orm, { step: 1 })).resolves.toEqual([LATEST]);
    await migrateUp(orm);
    await expect(migrateDown(orm, { to: '0' })).resolves.toEqual([...ALL].reverse());
    await expect(publicTables(orm)).resolves.toEqual(['my_history']);
  });
});

describe('#11.31 the profile_unscoped migration', () => {
  const MIGRATION = 'Migration20261124000001_profile_unscoped';

  it('#11.31: keeps what existing profiles granted: without scopes → unscoped, with scopes → scoped; down refuses to widen', async () => {
    const orm = await createTestOrm();
    try {
      await dropPublicSchema(orm);
      await migrateUp(orm);
      // Back to just before this migration (later ones, if any, first).
      while ((await migrationStatus(orm)).executed.includes(MIGRATION)) await migrateDown(orm);
      await expect(migrationStatus(orm)).resolves.toMatchObject({ executed: [INITIAL] });
      const em = orm.em.fork();
      await em.execute("insert into iam_users (user_id) values ('u-1')");
      await em.execute("insert into iam_permission_templates (version_id, name) values ('t-1', 't')");
      await em.execute(
        "insert into iam_profiles (profile_id, user_id, profile_name, template_version_id) values ('p-none', 'u-1', 'p', 't-1'), ('p-some', 'u-1', 'p', 't-1')",
      );
      await em.execute("insert into iam_resource_scopes values ('p-some', 'PROJECT', '1', 'READ')");
      await migrateUp(orm);
      const rows = await em.execute<Array<{ profile_id: string; unscoped: boolean }>>('select profile_id, unscoped from iam_profiles order by profile_id');
      expect(rows).toEqual([
        { profile_id: 'p-none', unscoped: true },
        { profile_id: 'p-some', unscoped: false },
      ]);
      // A scoped profile that lost its last scope would become unscoped (every resource) without the column.
      await em.execute("delete from iam_resource_scopes where profile_id = 'p-some'");
      while ((await migrationStatus(orm)).executed.at(-1) !== MIGRATION) await migrateDown(orm);
      await expect(migrateDown(orm)).rejects.toThrow();
      // The refused down leaves the column in place: only the migrations after it are pending.
      await expect(migrationStatus(orm)).resolves.toMatchObject({ pending: ALL.slice(ALL.indexOf(MIGRATION) + 1) });
    } finally {
      await orm.close(true);
    }
  });
});

describe('the audit_event_id migration', () => {
  const MIGRATION = 'Migration20261128120001_audit_event_id';

  it('keeps existing audit rows (no id), gives rows written without one an id, refuses a second row with the same id; down drops the column', async () => {
    const orm = await createTestOrm();
    try {
      await dropPublicSchema(orm);
      await migrateUp(orm);
      while ((await migrationStatus(orm)).executed.includes(MIGRATION)) await migrateDown(orm);
      const em = orm.em.fork();
      const insert = (action: string, eventId = ''): Promise<unknown> =>
        em.execute(`insert into iam_audit_events (occurred_at, action, outcome${eventId ? ', event_id' : ''}) values (now(), '${action}', 'success'${eventId ? `, '${eventId}'` : ''})`);
      await insert('before');
      await migrateUp(orm);
      await insert('after');
      const rows = await em.execute<Array<{ action: string; event_id: string | null }>>('select action, event_id from iam_audit_events order by id');
      expect(rows).toEqual([
        { action: 'before', event_id: null },
        { action: 'after', event_id: expect.stringMatching(/^[0-9a-f-]{36}$/) },
      ]);
      await expect(insert('again', rows[1]!.event_id!)).rejects.toThrow();
      while ((await migrationStatus(orm)).executed.includes(MIGRATION)) await migrateDown(orm);
      const columns = await em.execute<Array<{ column_name: string }>>("select column_name from information_schema.columns where table_name = 'iam_audit_events' and column_name = 'event_id'");
      expect(columns).toEqual([]);
    } finally {
      await orm.close(true);
    }
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
