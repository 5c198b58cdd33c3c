import { Migrator } from '@mikro-orm/migrations';
import { MikroORM } from '@mikro-orm/postgresql';
import { IAM_ENTITIES } from './entities';
import { IAM_MIGRATIONS } from './migration-list';

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
}

/**
 * Creates a MikroORM instance for PostgreSQL. Entities and migrations are passed explicitly (no
 * file-system discovery) and the global entity manager is locked (`allowGlobalContext: false`): callers
 * fork an entity manager per unit of work. The database is not contacted here beyond MikroORM's
 * connection check, so an unreachable database surfaces on first use.
 */
export async function createOrm(options: OrmOptions): Promise<MikroORM> {
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  return MikroORM.init({
    ...connectionOptions(options.url),
    entities: [...IAM_ENTITIES],
    discovery: { disableDynamicFileAccess: true, requireEntitiesArray: true, warnWhenNoEntities: false },
    metadataCache: { enabled: false },
    allowGlobalContext: false,
    // The database is the operator's to create; never connect to a management database to create one.
    ensureDatabase: false,
    debug: options.debug ?? false,
    pool: { min: 0, max: options.embedded ? 1 : Math.max(1, options.poolSize) },
    driverOptions: {
      acquireConnectionTimeout: connectTimeoutMs,
      connection: { connectionTimeoutMillis: connectTimeoutMs },
    },
    extensions: [Migrator],
    migrations: {
      tableName: options.historyTable,
      migrationsList: IAM_MIGRATIONS,
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      silent: true,
    },
  });
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
