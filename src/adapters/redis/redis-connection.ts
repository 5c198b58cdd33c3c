import type { ChainableCommander, Cluster, Redis } from 'ioredis';
import { StoreUnavailableError } from '../../domain/token-store';

/** Where the Redis token store reports connection trouble (`RedisTokenStoreOptions.logger`). */
export interface StoreLogger {
  warn(obj: object, msg: string): void;
}

/** Redis >= 7.0: `PEXPIRE … NX|GT` keeps the user index alive as long as its longest token. */
const MIN_REDIS_MAJOR = 7;

/** Wraps any failure reaching Redis as `StoreUnavailableError` (fail closed, docs/http-contract.md). */
export function toUnavailable(error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(`token store unavailable: ${reason}`, { cause: error });
}

/** `toUnavailable` as a `.catch` handler. */
export function rethrowUnavailable(error: unknown): never {
  throw toUnavailable(error);
}

/** Runs a MULTI or pipeline and returns its replies, failing on any per-command error. */
export async function execTransaction(tx: ChainableCommander): Promise<unknown[]> {
  let results: [Error | null, unknown][] | null;
  try {
    results = await tx.exec();
  } catch (error) {
    throw toUnavailable(error);
  }
  if (!results) throw new StoreUnavailableError('token store unavailable: transaction aborted');
  return results.map(([error, reply]) => {
    if (error) throw toUnavailable(error);
    return reply;
  });
}

/** Resolves once the connection is ready; rejects after `timeoutMs`. */
export function waitUntilReady(redis: Redis | Cluster, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new Error(`Redis not ready after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}

/** Rejects when the server is older than the commands the store relies on need. */
export async function assertServerVersion(redis: Redis | Cluster): Promise<void> {
  const info = await redis.info('server');
  const line = info.split('\n').find((entry) => entry.startsWith('redis_version:'));
  const major = line ? Number.parseInt(line.slice('redis_version:'.length), 10) : Number.NaN;
  if (!(major >= MIN_REDIS_MAJOR)) {
    throw new Error(`Redis >= ${MIN_REDIS_MAJOR}.0 is required (server reports ${line?.trim() ?? 'no version'})`);
  }
}

/**
 * The server's `maxmemory-policy` (#11.29), or null when CONFIG is disabled or renamed (managed Redis often
 * does that; then the operator vouches for it). An `allkeys-*` policy may evict any key under memory
 * pressure — a user's session index, a login rate-limit counter — so the gateway refuses it; `volatile-*`
 * evicts only keys with a TTL (tokens: the session ends, fail closed; counters: the window restarts), which
 * is reported; `noeviction` makes writes fail instead (fail closed).
 */
export async function checkEvictionPolicy(redis: Redis | Cluster, logger: StoreLogger | undefined, refuseEvicting: boolean): Promise<string | null> {
  let policy: string | null = null;
  try {
    const reply = (await redis.call('CONFIG', 'GET', 'maxmemory-policy')) as unknown;
    if (Array.isArray(reply) && typeof reply[1] === 'string') policy = reply[1];
  } catch (error) {
    if (!(error instanceof Error) || !/unknown command|NOPERM|no permissions|disabled/i.test(error.message)) throw error;
  }
  if (policy === null) logger?.warn({}, 'token store: cannot read the Redis maxmemory-policy (CONFIG disabled); make sure it is noeviction');
  else if (policy.startsWith('allkeys-') && refuseEvicting) {
    throw new EvictionPolicyError(`Redis maxmemory-policy is "${policy}": it may evict session indexes and rate-limit counters; set it to noeviction (or a volatile-* policy)`);
  } else if (policy !== 'noeviction') {
    // Loud: under memory pressure Redis silently deletes live tokens, and each such user is logged out with no
    // record of why (it fails closed, but nobody is told). iam_token_store_evicted_keys counts it.
    logger?.warn(
      { policy },
      `token store: Redis maxmemory-policy is "${policy}": under memory pressure Redis EVICTS LIVE SESSION TOKENS (users are logged out silently) and rate-limit counters (their windows restart); set maxmemory-policy noeviction (writes then fail with 503 instead) and watch iam_token_store_evicted_keys`,
    );
  }
  return policy;
}

/** The Redis server is configured so that the token store cannot be trusted (refused at start). */
export class EvictionPolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EvictionPolicyError';
  }
}

/** Logs state changes only (lost, restored, first error of an outage), never one line per retry. */
export function watchConnection(redis: Redis | Cluster, role: string, logger: StoreLogger | undefined, closing: () => boolean = () => false): void {
  let up = false;
  let wasUp = false;
  let errorLogged = false;
  redis.on('ready', () => {
    if (wasUp && !up) logger?.warn({ role }, 'token store: Redis connection restored');
    up = true;
    wasUp = true;
    errorLogged = false;
  });
  redis.on('close', () => {
    // Our own close (shutdown) is no loss.
    if (up && !closing()) logger?.warn({ role }, 'token store: Redis connection lost; reconnecting');
    up = false;
  });
  // Without an 'error' listener ioredis prints every failed reconnect to stderr.
  redis.on('error', (error: Error) => {
    if (errorLogged) return;
    errorLogged = true;
    logger?.warn({ role, err: error }, 'token store: Redis connection error');
  });
}

/** QUIT when the connection is up, otherwise (or if QUIT fails) drop it. */
export async function quitConnection(redis: Redis | Cluster): Promise<void> {
  if (redis.status === 'end') return;
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  try {
    await redis.quit();
  } catch {
    // dropped below
  }
  // Also after a QUIT: a Sentinel connection's connector holds its own connections to the Sentinels
  // (the failover detector), which only disconnect() closes; they would keep the process alive.
  redis.disconnect();
}
