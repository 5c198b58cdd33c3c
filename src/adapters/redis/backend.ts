import { defineTokenStore } from '../backend-registration';
import { parseRedisUrl, REDIS_URL_SCHEMES } from './redis-url';

/**
 * `redis.url` set: the shared token store on Redis (one server, Sentinels, or a Cluster). Its events channel reaches
 * every instance. The client (ioredis) loads only when a store is opened: the configuration reads this file to check
 * a URL.
 */
export const REDIS_TOKEN_STORE = defineTokenStore({
  kind: 'redis',
  chosenBy: { schemes: REDIS_URL_SCHEMES },
  urlForms: 'a redis:// or rediss:// URL, redis+cluster://host:port,host:port,… or redis+sentinel://host:port,…/master-name',
  checkUrl: (url) => void parseRedisUrl(url),
  capabilities: { events: true, persistent: true },
  async open({ url, ...options }) {
    const { RedisTokenStore } = await import('./redis-token-store');
    const store = await RedisTokenStore.connect({ ...options, url: url! });
    return {
      store,
      readinessDetail: () => ({ topology: store.topology, evictionPolicy: store.evictionPolicy }),
      evictions: { policy: store.evictionPolicy, evictedKeys: () => store.evictedKeys() },
    };
  },
});
