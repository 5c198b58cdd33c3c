import { defineDatabase } from '../backend-registration';
import { startEmbeddedDatabaseProcess } from './embedded-database-process';

/**
 * `database.url` unset: the embedded PGlite in `database.embedded-dir`, in a child process of its own, reached over a
 * private socket. One process at a time opens its directory (data-dir-lock.ts), so it is not shared.
 */
export const EMBEDDED_DATABASE = defineDatabase({
  kind: 'embedded',
  chosenBy: { withoutUrl: true },
  capabilities: { shared: false },
  async open({ embeddedDir }) {
    const embedded = await startEmbeddedDatabaseProcess(embeddedDir);
    return { url: embedded.url, singleConnection: true, explain: (error) => error, stop: () => embedded.stop() };
  },
});
