import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { mkdirSync } from 'node:fs';

/** A running embedded PostgreSQL-compatible database (PGlite) reachable over the wire protocol. */
export interface EmbeddedDatabase {
  /** A `postgresql://` URL the ordinary driver connects to. */
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts PGlite behind a loopback socket so that the same PostgreSQL driver (and MikroORM) serves both the
 * embedded default and a real server. `dataDir` `memory://` keeps nothing. PGlite serializes sessions, so
 * clients should use a pool of one connection against it.
 */
export async function startEmbeddedDatabase(dataDir: string, port = 0): Promise<EmbeddedDatabase> {
  if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true });
  const db = await PGlite.create(dataDir.startsWith('memory://') ? undefined : dataDir);
  const server = new PGLiteSocketServer({ db, port, host: '127.0.0.1', maxConnections: 16 });
  await server.start();
  const address = server.getServerConn();
  const url = `postgresql://postgres@${address}/postgres?sslmode=disable`;
  return {
    url,
    async stop() {
      await server.stop();
      await db.close();
    },
  };
}
