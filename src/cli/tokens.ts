import { openTokenStore } from '../adapters/registry';
import { loadConfig } from '../config';
import { parseCommandLine, UsageError, type CliCommand } from './command-line';

const USAGE = `usage: iam-gateway tokens purge

  purge  delete every token-store key under iam.token.store-prefix (every session ends); with Redis
         (REDIS_URL) it also publishes a flush, so every instance drops its cached sessions at once`;

/** `iam-gateway tokens purge`. */
export const tokensCommand: CliCommand = {
  usage: USAGE,
  async run(args, { stdout }) {
    const { positionals } = parseCommandLine(args, USAGE, {}, 1);
    const action = positionals[0];
    if (action !== 'purge') throw new UsageError(action === undefined ? 'missing the action (purge)' : `unknown tokens action "${action}"`, USAGE);
    const config = loadConfig();
    const { store, events, persistent } = await openTokenStore({ url: config.redis.url, prefix: config.iam.token.storePrefix });
    try {
      const deleted = await store.purge();
      // Every instance drops its cached sessions now instead of at its next revalidation; a store without a shared
      // channel has no other instance to tell.
      await events?.publish({ type: 'tokens-flushed', reason: 'tokens purge' });
      stdout.write(`tokens: deleted ${deleted} keys under "${config.iam.token.storePrefix}:"${persistent ? '' : ' (in-process store: nothing persists between runs)'}\n`);
      return 0;
    } finally {
      await store.close();
    }
  },
};
