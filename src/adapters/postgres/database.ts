import type { MikroORM } from '@mikro-orm/postgresql';
import type { EmbeddedDatabase } from '../pglite/embedded-database';
import { startEmbeddedDatabaseProcess } from '../pglite/embedded-database-process';
import type { IamRepository } from '../../domain/iam-repository';
import { namingTheDatabase } from './connection-failure';
import { migrateUp } from './migrator';
import { MikroOrmIamRepository } from './mikro-orm-iam-repository';
import { createOrm } from './orm';

/** What opening the database reads from the configuration (`database.*`, `iam.schema`; docs/configuration.md). */
export interface DatabaseSettings {
  database: {
    /** `database.url` / `DATABASE_URL`; null → embedded PGlite. */
    url: string | null;
    /** `database.embedded-dir`: PGlite data directory; `memory://` keeps nothing. */
    embeddedDir: string;
    /** `database.pool-size`. */
    poolSize: number;
    /** `database.connect-timeout`: opening a connection, and waiting for a pooled one. */
    connectTimeoutMs: number;
    /** `database.query-timeout`: a statement without an answer after this fails as unavailable (503). */
    queryTimeoutMs: number;
    /** `database.idle-timeout`: pooled connections unused this long are closed. */
    idleTimeoutMs: number;
  };
  iam: { schema: { historyTable: string } };
}

/** An open, migrated database and the repository over it. */
export interface OpenDatabase {
  orm: MikroORM;
  repository: IamRepository;
  /** `postgres` for `database.url`, `embedded` for PGlite. */
  kind: 'postgres' | 'embedded';
  /** Closes the pool, then stops the embedded database if one was started. */
  close(): Promise<void>;
}

/**
 * Connects to `database.url` or, when it is null, starts the embedded PGlite in `database.embedded-dir`
 * (in a child process) and connects to it over its socket; then applies pending migrations. On any failure
 * everything opened so far is closed again before the error propagates; a server that cannot be reached (or
 * refuses the login) rejects with `cannot connect to the database at HOST:PORT/NAME (REASON)`.
 */
export async function openDatabase(config: DatabaseSettings): Promise<OpenDatabase> {
  const embedded: EmbeddedDatabase | null =
    config.database.url === null ? await startEmbeddedDatabaseProcess(config.database.embeddedDir) : null;
  let orm: MikroORM | null = null;
  const close = async (): Promise<void> => {
    try {
      await orm?.close(true);
    } finally {
      await embedded?.stop();
    }
  };
  try {
    orm = await createOrm({
      url: config.database.url ?? embedded!.url,
      poolSize: config.database.poolSize,
      connectTimeoutMs: config.database.connectTimeoutMs,
      queryTimeoutMs: config.database.queryTimeoutMs,
      idleTimeoutMs: config.database.idleTimeoutMs,
      historyTable: config.iam.schema.historyTable,
      embedded: embedded !== null,
    });
    await migrateUp(orm);
    return { orm, repository: new MikroOrmIamRepository(orm), kind: embedded ? 'embedded' : 'postgres', close };
  } catch (error) {
    await close().catch(() => undefined);
    // The first statement (the migrations) is where an unreachable server shows: named by place, never by URL.
    throw config.database.url === null ? error : namingTheDatabase(error, config.database.url);
  }
}
