import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { mkdirSync, rmSync } from 'node:fs';
import { privateSocket } from './embedded-socket';

/** A running embedded PostgreSQL-compatible database (PGlite) reachable over the wire protocol. */
export interface EmbeddedDatabase {
  /** A `postgresql://` URL the ordinary driver connects to. */
  url: string;
  /** The process serving it, when it runs in a child process. */
  pid?: number;
  stop(): Promise<void>;
}

/**
 * Starts PGlite behind a private Unix socket so that the same PostgreSQL driver (and MikroORM) serves both
 * the embedded default and a real server. `dataDir` `memory://` keeps nothing. PGlite serializes sessions,
 * so clients should use a pool of one connection against it.
 */
export async function startEmbeddedDatabase(dataDir: string): Promise<EmbeddedDatabase> {
  if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true });
  const db = await PGlite.create(dataDir.startsWith('memory://') ? undefined : dataDir);
  const socket = privateSocket();
  const server = new PGLiteSocketServer({ db, path: socket.path, maxConnections: 16 });
  await server.start();
  return {
    url: socket.url,
    async stop() {
      await server.stop();
      await db.close();
      rmSync(socket.dir, { recursive: true, force: true });
    },
  };
}
