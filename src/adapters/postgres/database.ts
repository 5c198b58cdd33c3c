import type { MikroORM } from '@mikro-orm/postgresql';
import type { DatabaseProgressListener, DatabaseSettings } from '../backend-registration';
import { openDatabaseServer, type DatabaseKind } from '../registry';
import type { IamRepository } from '../../domain/iam-repository';
import { migrateUp } from './migrator';
import { MikroOrmIamRepository } from './mikro-orm-iam-repository';
import { createOrm, type OrmOptions } from './orm';

export type { DatabaseProgress, DatabaseProgressListener, DatabaseSettings } from '../backend-registration';

/** A MikroORM over the database the configuration chooses (adapters/registry.ts), and what serves it. */
export interface OpenOrm {
  orm: MikroORM;
  /** The backend: `postgres` for `database.url`, `embedded` for PGlite. */
  kind: DatabaseKind;
  /** A failure of a statement as the operator should read it: `cannot connect to the database at HOST:PORT/NAME (REASON)`. */
  explain: (error: unknown) => unknown;
  /** Closes the pool, then stops the embedded database if one was started. */
  close: () => Promise<void>;
}

/** An open, migrated database and the repository over it. */
export interface OpenDatabase extends Omit<OpenOrm, 'explain'> {
  repository: IamRepository;
}

/**
 * Makes the configured database reachable through its backend (the embedded PGlite is started in a child process
 * when `database.url` is null) and opens a MikroORM over it; `options` overrides the pool and timeouts (a command
 * uses one connection and no statement timeout). Nothing is left open when it rejects.
 */
export async function openOrm(
  config: DatabaseSettings,
  options: Partial<Pick<OrmOptions, 'poolSize' | 'connectTimeoutMs' | 'queryTimeoutMs' | 'idleTimeoutMs'>> = {},
  onProgress?: DatabaseProgressListener,
): Promise<OpenOrm> {
  const server = await openDatabaseServer(config.database, undefined, onProgress);
  try {
    const orm = await createOrm({
      url: server.url,
      poolSize: config.database.poolSize,
      historyTable: config.iam.schema.historyTable,
      embedded: server.singleConnection,
      ...options,
    });
    const close = async (): Promise<void> => {
      try {
        await orm.close(true);
      } finally {
        await server.stop();
      }
    };
    return { orm, kind: server.kind as DatabaseKind, explain: server.explain, close };
  } catch (error) {
    await server.stop().catch(() => undefined);
    throw server.explain(error);
  }
}

/**
 * Opens the configured database (openOrm, with the configuration's pool and timeouts), then applies pending
 * migrations. On any failure everything opened so far is closed again before the error propagates; a server that
 * cannot be reached (or refuses the login) rejects with `cannot connect to the database at HOST:PORT/NAME (REASON)`.
 * `onProgress` is told each step (a new embedded database, each migration, ready).
 */
export async function openDatabase(config: DatabaseSettings, onProgress?: DatabaseProgressListener): Promise<OpenDatabase> {
  const { orm, kind, explain, close } = await openOrm(
    config,
    {
      connectTimeoutMs: config.database.connectTimeoutMs,
      queryTimeoutMs: config.database.queryTimeoutMs,
      idleTimeoutMs: config.database.idleTimeoutMs,
    },
    onProgress,
  );
  try {
    const applied = await migrateUp(orm, onProgress && ((step) => onProgress({ step: 'migrating', ...step })));
    onProgress?.({ step: 'ready', applied: applied.length });
    return { orm, repository: new MikroOrmIamRepository(orm), kind, close };
  } catch (error) {
    await close().catch(() => undefined);
    // The first statement (the migrations) is where an unreachable server shows: named by place, never by URL.
    throw explain(error);
  }
}
