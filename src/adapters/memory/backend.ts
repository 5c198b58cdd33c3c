import { defineTokenStore } from '../backend-registration';
import { MemoryTokenStore } from './memory-token-store';

/**
 * `redis.url` unset: the in-process token store of a single instance. No pub/sub: the registry gives it the
 * in-process events channel, complete here because no other process sees this store.
 */
export const MEMORY_TOKEN_STORE = defineTokenStore({
  kind: 'memory',
  chosenBy: { withoutUrl: true },
  capabilities: { events: false, persistent: false },
  open: ({ prefix }) => Promise.resolve({ store: new MemoryTokenStore({ prefix }) }),
});
