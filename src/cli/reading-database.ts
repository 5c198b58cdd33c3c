import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { GatewayConfig } from '../config';

/** What {@link openDatabaseForReading} opened: an ORM over the gateway's database, and how to close it again. */
export type ReadingDatabase = Awaited<ReturnType<typeof import('../adapters/postgres/database').openOrm>>;

/**
 * Opens the database a gateway wrote, for a command that reads it (`policy replay`, `policy check --database`; later
 * `policy unused`): PostgreSQL (`database.url`) at any time; the embedded one (`database.embedded-dir`) only while
 * no gateway has it open — its data lock (#11.23) refuses a running gateway's directory, named here with the
 * gateway's pid, instead of two processes writing one directory. Nothing is created and no migration is applied:
 * an embedded directory that holds no database yet is refused too.
 */
export async function openDatabaseForReading(config: GatewayConfig): Promise<ReadingDatabase> {
  // Loaded here, not at the top: the other commands (policy diff in CI above all) start without the ORM.
  const [{ databaseBackendFor }, { openOrm }, { databasePlace }, { MikroOrmIamRepository }] = await Promise.all([
    import('../adapters/registry'),
    import('../adapters/postgres/database'),
    import('../adapters/postgres/database-place'),
    import('../adapters/postgres/mikro-orm-iam-repository'),
  ]);
  const url = config.database.url;
  const dir = config.database.embeddedDir;
  const embedded = !databaseBackendFor(url).capabilities.shared;
  if (embedded && (dir.startsWith('memory://') || !existsSync(join(dir, 'PG_VERSION')))) {
    throw new Error(`no embedded database in ${dir} (database.embedded-dir): start the gateway on it once, or set DATABASE_URL to the database it uses`);
  }
  const place = url === null || embedded ? `the embedded database in ${dir}` : `the database at ${databasePlace(url)}`;
  let opened: ReadingDatabase | undefined;
  try {
    opened = await openOrm(config, { poolSize: 1, connectTimeoutMs: 5000 });
    await new MikroOrmIamRepository(opened.orm).ping();
    return opened;
  } catch (error) {
    await opened?.close().catch(() => undefined);
    if ((error as Error).name === 'DataDirectoryLockedError') {
      const holder = /\(pid (\d+)/.exec((error as Error).message)?.[1];
      throw new Error(`${place} is in use by a running gateway${holder ? ` (pid ${holder})` : ''}; stop it first (the embedded database has one process at a time), or use PostgreSQL (DATABASE_URL)`);
    }
    // Named by place, never by URL (it may carry a password).
    throw new Error(`cannot reach ${place} (${(error as Error).name}); nothing was read`);
  }
}
