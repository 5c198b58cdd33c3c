import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { defineDatabase } from '../backend-registration';
import { startEmbeddedDatabaseProcess } from './embedded-database-process';

/** No database in `dir` yet (PGlite creates one there first, which takes seconds): it holds no PG_VERSION. */
const isNewDatabase = (dir: string): boolean => dir.startsWith('memory://') || !existsSync(join(dir, 'PG_VERSION'));

/**
 * `database.url` unset: the embedded PGlite in `database.embedded-dir`, in a child process of its own, reached over a
 * private socket. One process at a time opens its directory (data-dir-lock.ts), so it is not shared.
 */
export const EMBEDDED_DATABASE = defineDatabase({
  kind: 'embedded',
  chosenBy: { withoutUrl: true },
  capabilities: { shared: false },
  async open({ embeddedDir }, onProgress) {
    if (isNewDatabase(embeddedDir)) onProgress?.({ step: 'initializing', place: embeddedDir });
    const embedded = await startEmbeddedDatabaseProcess(embeddedDir);
    return { url: embedded.url, singleConnection: true, explain: (error) => error, stop: () => embedded.stop() };
  },
});
