import { openOrm, type OpenOrm } from '../adapters/postgres/database';
import type { GatewayConfig } from '../config';

/**
 * Runs `work` with a MikroORM of the configured database (its backend, adapters/registry.ts, starts the embedded one
 * when no URL is set), without the serving timeouts: a migration may take longer than a request. A database that
 * cannot be reached rejects with `cannot connect to the database at HOST:PORT/NAME (REASON)`.
 */
export async function withOrm(config: GatewayConfig, work: (orm: OpenOrm['orm']) => Promise<number>): Promise<number> {
  const { orm, explain, close } = await openOrm(config);
  try {
    return await work(orm);
  } catch (error) {
    // An unreachable server shows at the first statement: named by place (host:port/database), never by URL.
    throw explain(error);
  } finally {
    await close();
  }
}
