import { Migrator } from '@mikro-orm/migrations';
import { MikroORM } from '@mikro-orm/postgresql';
import { QUERY_TIMEOUT_MESSAGE } from './connection-failure';
import { IAM_ENTITIES } from './entities';
import { IAM_MIGRATIONS } from './migration-list';
import { reportingMigrations } from './migration-progress';
import { scrubText } from '../../observability/redaction';

/** How to reach the database; built from `GatewayConfig.database` and `iam.schema.history-table`. */
export interface OrmOptions {
  /** A `postgresql://` URL (real PostgreSQL or the embedded PGlite socket). */
  url: string;
  /** Pool size against a real server; ignored for the embedded database. */
  poolSize: number;
  /** `iam.schema.history-table`: table MikroORM records applied migrations in. */
  historyTable: string;
  /** The embedded PGlite serializes sessions, so exactly one pooled connection is used against it. */
  embedded: boolean;
  /** Logs every query through MikroORM's logger. */
  debug?: boolean;
  /** Bound on opening a connection and on waiting for a pooled one (default 10 s). */
  connectTimeoutMs?: number;
  /**
   * A statement without an answer after this fails (pg `query_timeout`; default 0 = none) and its
   * connection is dropped, so a silent partition answers 503 instead of hanging (docs/threat-model.md #11.37).
   */
  queryTimeoutMs?: number;
  /** Pooled connections unused this long are closed (default 30 s). */
  idleTimeoutMs?: number;
}

/**
 * Creates a MikroORM instance for PostgreSQL. Entities and migrations are passed explicitly (no
 * file-system discovery) and the global entity manager is locked (`allowGlobalContext: false`): callers
 * fork an entity manager per unit of work. The database is not contacted here beyond MikroORM's
 * connection check, so an unreachable database surfaces on first use.
 */
export async function createOrm(options: OrmOptions): Promise<MikroORM> {
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const queryTimeoutMs = options.queryTimeoutMs ?? 0;
  return MikroORM.init({
    ...connectionOptions(options.url),
    entities: [...IAM_ENTITIES],
    discovery: { disableDynamicFileAccess: true, requireEntitiesArray: true, warnWhenNoEntities: false },
    metadataCache: { enabled: false },
    allowGlobalContext: false,
    // The database is the operator's to create; never connect to a management database to create one.
    ensureDatabase: false,
    debug: options.debug ?? false,
    pool: {
      min: 0,
      max: options.embedded ? 1 : Math.max(1, options.poolSize),
      idleTimeoutMillis: options.idleTimeoutMs ?? 30_000,
      afterCreate: dropConnectionOnQueryTimeout,
    },
    driverOptions: {
      // knex prints "Connection Error: …" for every pooled connection it discards; an outage is reported
      // once by the gateway's outage log instead (docs/threat-model.md #11.39). Other warnings still print,
      // through the log's redaction layer (a warning may quote the connection string).
      // eslint-disable-next-line no-console -- knex's own default for the warnings it passes here; no gateway logger at this level
      log: { warn: (message: unknown) => (String(message).startsWith('Connection Error') ? undefined : console.warn(scrubText(String(message)))) },
      acquireConnectionTimeout: connectTimeoutMs,
      connection: {
        connectionTimeoutMillis: connectTimeoutMs,
        ...(queryTimeoutMs > 0 ? { query_timeout: queryTimeoutMs } : {}),
        // The kernel notices a peer that vanished even while the connection sits idle in the pool.
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
      },
    },
    extensions: [Migrator],
    migrations: {
      tableName: options.historyTable,
      // Each tells migrateUp's progress listener when it starts (migration-progress.ts).
      migrationsList: reportingMigrations(IAM_MIGRATIONS),
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      silent: true,
    },
  });
}

/** The part of a `pg` client the pool hook touches. */
interface PgClient {
  query: (...args: unknown[]) => unknown;
  connection?: { stream?: { destroy(error?: Error): void } };
}

/**
 * pg answers a `query_timeout` with "Query read timeout" but keeps the connection, whose socket still
 * waits for that reply: every later statement on it would queue behind it and time out too. The
 * connection is destroyed instead, so the pool discards it (knex marks it disposed on 'end') and the next
 * call opens a fresh one.
 */
function dropConnectionOnQueryTimeout(connection: PgClient, done: (error: Error | null, connection: PgClient) => void): void {
  const query = connection.query.bind(connection);
  const onError = (error: unknown): void => {
    if (error instanceof Error && error.message === QUERY_TIMEOUT_MESSAGE) connection.connection?.stream?.destroy();
  };
  connection.query = (...args: unknown[]) => {
    // knex passes a callback; other callers may use the promise.
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (error: unknown, ...rest: unknown[]) => {
        if (error) onError(error);
        return (callback as (...values: unknown[]) => unknown)(error, ...rest);
      };
    }
    const result = query(...args);
    if (result && typeof (result as Promise<unknown>).then === 'function') (result as Promise<unknown>).catch(onError);
    return result;
  };
  done(null, connection);
}

/**
 * MikroORM reads host, port, user and database from `clientUrl` and ignores libpq's `?host=/directory`
 * (a Unix socket, as the embedded database uses: #11.14), so such a URL is passed as separate options;
 * with clientUrl it would silently connect to TCP localhost instead.
 */
export function connectionOptions(url: string): { clientUrl: string } | { host: string; port: number; user: string; password?: string; dbName: string } {
  const parsed = URL.canParse(url) ? new URL(url) : null;
  const socketDir = parsed?.searchParams.get('host');
  if (!parsed || !socketDir || !socketDir.startsWith('/')) return { clientUrl: url };
  return {
    host: socketDir,
    port: parsed.port ? Number(parsed.port) : 5432,
    user: decodeURIComponent(parsed.username) || 'postgres',
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    dbName: decodeURIComponent(parsed.pathname.slice(1)) || 'postgres',
  };
}
