import { startEmbeddedDatabaseProcess } from '../adapters/pglite/embedded-database-process';
import { namingTheDatabase } from '../adapters/postgres/connection-failure';
import { createOrm } from '../adapters/postgres/orm';
import type { GatewayConfig } from '../config';

/**
 * Runs `work` with a MikroORM of the configured database (an embedded one started for it when no URL is set). A
 * database that cannot be reached rejects with `cannot connect to the database at HOST:PORT/NAME (REASON)`.
 */
export async function withOrm(config: GatewayConfig, work: (orm: Awaited<ReturnType<typeof createOrm>>) => Promise<number>): Promise<number> {
  const embedded = config.database.url ? null : await startEmbeddedDatabaseProcess(config.database.embeddedDir);
  const orm = await createOrm({
    url: config.database.url ?? embedded!.url,
    poolSize: config.database.url ? config.database.poolSize : 1,
    historyTable: config.iam.schema.historyTable,
    embedded: embedded !== null,
  });
  try {
    return await work(orm);
  } catch (error) {
    // An unreachable server shows at the first statement: named by place (host:port/database), never by URL.
    throw config.database.url ? namingTheDatabase(error, config.database.url) : error;
  } finally {
    await orm.close(true);
    await embedded?.stop();
  }
}
