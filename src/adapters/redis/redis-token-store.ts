import { randomBytes } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { CoalescedReads } from './coalesced-reads';
import type { StoreEvent, TokenRecord } from '../../domain/token-record';
import type { EventSubscription, TokenStore } from '../../domain/token-store';
import {
  assertServerVersion,
  checkEvictionPolicy,
  EvictionPolicyError,
  execTransaction,
  quitConnection,
  rethrowUnavailable,
  toUnavailable,
  waitUntilReady,
  watchConnection,
} from './redis-connection';
import { RedisEventsChannel } from './redis-events-channel';
import { GET_TOKEN, HIT_COUNTER, RELEASE_COUNTER, runScript, runScriptKeys, TAKE_COUNTERS } from './redis-lua-scripts';

/** How `RedisTokenStore.connect` reaches Redis. */
export interface RedisTokenStoreOptions {
  url: string;
  /** Key prefix (`iam.token.store-prefix`); every key and the channel live under `{prefix}:`. */
  prefix: string;
  /** Time allowed for the first connection (and each reconnect attempt); default 5000 ms. */
  connectTimeoutMs?: number;
  /** A command without a reply after this long rejects (fail closed, docs/http-contract.md); default 1000 ms. */
  commandTimeoutMs?: number;
  /**
   * How often the subscriber connection is pinged to detect a silently dead socket; default 1000 ms. While
   * the loss is undetected the local caches are still trusted and revocations published meanwhile are
   * missed, so this plus `commandTimeoutMs` bounds that window (test/integration/reliability-redis.test.ts).
   */
  subscriberPingMs?: number;
  /** Upper bound of the reconnect backoff; reconnection itself never gives up. Default 2000 ms. */
  maxReconnectDelayMs?: number;
  logger?: { warn(obj: object, msg: string): void };
  /**
   * Whether tokens may carry an idle timeout (`iam.token.idle-timeout` > 0). When false, `getToken` is a
   * plain read instead of the sliding-expiry script (a tenth of the server time per call), and the reads of
   * one event-loop turn go out together as one MGET.
   */
  slidingExpiry?: boolean;
  /**
   * Refuse to connect when the server's maxmemory-policy is `allkeys-*` (the gateway does; the `tokens purge`
   * and `provision` commands only warn, so an operator can still clean up).
   */
  refuseEvictingPolicy?: boolean;
}

type Logger = NonNullable<RedisTokenStoreOptions['logger']>;

const PURGE_BATCH = 500;

/**
 * The shared token store on Redis. Two connections: one for commands, one dedicated to
 * the events channel. Fail closed (docs/http-contract.md): no offline queue, a command timeout, in-flight commands
 * rejected when the socket drops, so a request while Redis is down rejects fast with
 * `StoreUnavailableError`; reconnection retries forever with a capped backoff.
 */
export class RedisTokenStore implements TokenStore {
  readonly kind = 'redis' as const;
  /** `CLIENT SETNAME` of both connections (unique per instance), for operators and `CLIENT LIST`. */
  readonly connectionNames: { readonly commands: string; readonly subscriber: string };
  private readonly events: RedisEventsChannel;
  private closed = false;
  private slidingExpiry = true;
  /** The server's `maxmemory-policy` at connect, null when CONFIG is disabled (see checkEvictionPolicy). */
  evictionPolicy: string | null = null;
  /** Token reads of one event-loop turn share one MGET (see coalesced-reads.ts). */
  private readonly tokenReads: CoalescedReads;

  private constructor(
    readonly prefix: string,
    private readonly commands: Redis,
    private readonly subscriber: Redis,
    private readonly logger: Logger | undefined,
    names: { commands: string; subscriber: string },
    maxReconnectDelayMs?: number,
  ) {
    this.connectionNames = names;
    this.events = new RedisEventsChannel(`${prefix}:events`, subscriber, logger, maxReconnectDelayMs);
    this.tokenReads = new CoalescedReads((keys) => this.commands.mget(keys));
  }

  /** Opens both connections; rejects with `StoreUnavailableError` when Redis cannot be reached in time. */
  static async connect(options: RedisTokenStoreOptions): Promise<RedisTokenStore> {
    if (!options.prefix) throw new TypeError('RedisTokenStore needs a non-empty prefix');
    const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    const commandTimeoutMs = options.commandTimeoutMs ?? 1000;
    const maxDelay = options.maxReconnectDelayMs ?? 2000;
    const instanceId = randomBytes(4).toString('hex');
    const names = { commands: `iam-gateway:commands:${instanceId}`, subscriber: `iam-gateway:events:${instanceId}` };
    const base: RedisOptions = {
      connectTimeout: connectTimeoutMs,
      commandTimeout: commandTimeoutMs,
      // A reply that never comes (half-open socket) destroys the socket, which triggers a reconnect.
      socketTimeout: Math.max(commandTimeoutMs * 3, 1000),
      enableOfflineQueue: false,
      // 0: every drop rejects the commands in flight at once instead of parking them for a resend.
      maxRetriesPerRequest: 0,
      // Never replay an INCR/SET the caller was already told had failed.
      autoResendUnfulfilledCommands: false,
      // ioredis waits this long for a socket that already died to emit 'close' again when disconnecting
      // while Redis is down (default 2 s), holding the process open during shutdown.
      disconnectTimeout: 500,
      retryStrategy: (attempt: number) =>
        Math.min(50 * 2 ** Math.min(attempt, 16), maxDelay) + Math.floor(Math.random() * 100),
    };
    const commands = new Redis(options.url, { ...base, connectionName: names.commands });
    // Resubscription is ours (RedisEventsChannel) so that `connected` follows the real confirmation.
    const subscriber = new Redis(options.url, { ...base, connectionName: names.subscriber, autoResubscribe: false });
    watchConnection(commands, 'commands', options.logger);
    watchConnection(subscriber, 'subscriber', options.logger);
    let evictionPolicy: string | null = null;
    try {
      await Promise.all([waitUntilReady(commands, connectTimeoutMs), waitUntilReady(subscriber, connectTimeoutMs)]);
      await assertServerVersion(commands);
      evictionPolicy = await checkEvictionPolicy(commands, options.logger, options.refuseEvictingPolicy ?? false);
    } catch (error) {
      commands.disconnect();
      subscriber.disconnect();
      throw error instanceof EvictionPolicyError ? error : toUnavailable(error);
    }
    const store = new RedisTokenStore(options.prefix, commands, subscriber, options.logger, names, maxDelay);
    store.evictionPolicy = evictionPolicy;
    store.events.startPing(options.subscriberPingMs ?? 1000);
    store.slidingExpiry = options.slidingExpiry ?? true;
    return store;
  }

  async getToken(tokenHash: string): Promise<TokenRecord | null> {
    // decodeRecord checks the absolute expiry either way; only sliding needs the script.
    const raw = this.slidingExpiry
      ? await runScript(this.commands, GET_TOKEN, this.tokenKey(tokenHash), Date.now()).catch(rethrowUnavailable)
      : await this.tokenReads.read(this.tokenKey(tokenHash)).catch(rethrowUnavailable);
    return typeof raw === 'string' ? this.decodeRecord(tokenHash, raw) : null;
  }

  async putToken(tokenHash: string, record: TokenRecord): Promise<void> {
    const expiresAtMs = Date.parse(record.expiresAt);
    if (!Number.isFinite(expiresAtMs)) {
      throw new TypeError(`TokenRecord.expiresAt is not an ISO 8601 date: ${JSON.stringify(record.expiresAt)}`);
    }
    const leftMs = Math.ceil(expiresAtMs - Date.now());
    // An already expired record is never stored (SET PX refuses a non-positive TTL).
    if (leftMs <= 0) return;
    const idleMs = record.idleTimeoutMs > 0 ? Math.ceil(record.idleTimeoutMs) : 0;
    const ttlMs = idleMs > 0 ? Math.min(idleMs, leftMs) : leftMs;
    const value = `${expiresAtMs}|${idleMs}|${JSON.stringify(record)}`;
    const indexKey = this.userIndexKey(record.principal.userId);
    const tx = this.commands
      .multi()
      .set(this.tokenKey(tokenHash), value, 'PX', ttlMs)
      .hset(indexKey, record.sessionId, tokenHash)
      // NX gives a new index its TTL; GT extends it when this token outlives the others.
      .pexpire(indexKey, leftMs, 'NX')
      .pexpire(indexKey, leftMs, 'GT');
    await execTransaction(tx);
  }

  async deleteToken(tokenHash: string, userId: string, sessionId: string): Promise<boolean> {
    const tx = this.commands.multi().del(this.tokenKey(tokenHash)).hdel(this.userIndexKey(userId), sessionId);
    const [deleted] = await execTransaction(tx);
    return deleted === 1;
  }

  async listUserTokens(userId: string): Promise<Map<string, string>> {
    const indexKey = this.userIndexKey(userId);
    const entries = await this.commands.hgetall(indexKey).catch(rethrowUnavailable);
    const sessions = Object.entries(entries);
    const live = new Map<string, string>();
    if (sessions.length === 0) return live;
    const check = this.commands.pipeline();
    for (const [, tokenHash] of sessions) check.exists(this.tokenKey(tokenHash));
    const exists = await execTransaction(check);
    const stale: string[] = [];
    sessions.forEach(([sessionId, tokenHash], i) => {
      if (exists[i] === 1) live.set(sessionId, tokenHash);
      else stale.push(sessionId);
    });
    if (stale.length > 0) await this.commands.hdel(indexKey, ...stale).catch(rethrowUnavailable);
    return live;
  }

  async publish(event: StoreEvent): Promise<void> {
    await this.commands.publish(this.events.channel, JSON.stringify(event)).catch(rethrowUnavailable);
  }

  /**
   * Registers a listener and resolves once the channel subscription is confirmed. The channel stays
   * subscribed for the life of the store; closing a subscription only detaches its listener.
   */
  async subscribe(
    onEvent: (event: StoreEvent) => void,
    onConnectionChange?: (connected: boolean) => void,
  ): Promise<EventSubscription> {
    return this.events.subscribe(onEvent, onConnectionChange);
  }

  async hit(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }> {
    const windowArg = Math.max(1, Math.ceil(windowMs));
    const reply = await runScript(this.commands, HIT_COUNTER, this.counterKey(key), windowArg).catch(
      rethrowUnavailable,
    );
    const [count, ttl] = reply as [number, number];
    return { count: Number(count), resetInMs: Math.max(0, Number(ttl)) };
  }

  async takeCounters(keys: readonly string[], limits: readonly number[], windowMs: number): Promise<{ allowed: boolean; resetInMs: number }> {
    const windowArg = Math.max(1, Math.ceil(windowMs));
    const reply = await runScriptKeys(this.commands, TAKE_COUNTERS, keys.map((key) => this.counterKey(key)), [windowArg, ...limits]).catch(rethrowUnavailable);
    const [allowed, ttl] = reply as [number, number];
    return { allowed: Number(allowed) === 1, resetInMs: Math.max(0, Number(ttl)) };
  }

  async releaseCounter(key: string): Promise<void> {
    await runScriptKeys(this.commands, RELEASE_COUNTER, [this.counterKey(key)], []).catch(rethrowUnavailable);
  }

  async peek(key: string): Promise<{ count: number; resetInMs: number }> {
    const counterKey = this.counterKey(key);
    const [count, ttl] = await execTransaction(this.commands.multi().get(counterKey).pttl(counterKey));
    if (count === null) return { count: 0, resetInMs: 0 };
    return { count: Number(count), resetInMs: Math.max(0, Number(ttl)) };
  }

  async resetCounter(key: string): Promise<void> {
    await this.commands.del(this.counterKey(key)).catch(rethrowUnavailable);
  }

  async purge(): Promise<number> {
    const ownPrefix = `${this.prefix}:`;
    const pattern = `${escapeGlob(this.prefix)}:*`;
    let cursor = '0';
    let deleted = 0;
    try {
      do {
        const [next, keys] = await this.commands.scan(cursor, 'MATCH', pattern, 'COUNT', PURGE_BATCH);
        cursor = next;
        // Belt and braces: never unlink a key SCAN's glob matched but that is not ours.
        const own = keys.filter((key) => key.startsWith(ownPrefix));
        if (own.length > 0) deleted += await this.commands.unlink(...own);
      } while (cursor !== '0');
    } catch (error) {
      throw toUnavailable(error);
    }
    return deleted;
  }

  async ping(): Promise<void> {
    await this.commands.ping().catch(rethrowUnavailable);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.events.stop();
    await Promise.all([quitConnection(this.commands), quitConnection(this.subscriber)]);
  }

  private tokenKey(tokenHash: string): string {
    return `${this.prefix}:token:${tokenHash}`;
  }

  private userIndexKey(userId: string): string {
    return `${this.prefix}:user:${userId}:sessions`;
  }

  private counterKey(key: string): string {
    return `${this.prefix}:ratelimit:${key}`;
  }

  private decodeRecord(tokenHash: string, raw: string): TokenRecord | null {
    const first = raw.indexOf('|');
    const second = first < 0 ? -1 : raw.indexOf('|', first + 1);
    try {
      if (second < 0) throw new Error('missing header');
      const expiresAtMs = Number(raw.slice(0, first));
      if (!(expiresAtMs > Date.now())) return null;
      return JSON.parse(raw.slice(second + 1)) as TokenRecord;
    } catch (error) {
      // A value we cannot read is no session: deny (401), and say why.
      this.logger?.warn({ err: error, tokenHash }, 'token store: unreadable token record ignored');
      return null;
    }
  }
}

/** Escapes Redis glob metacharacters (`* ? [ ] \`) so a prefix only ever matches itself literally. */
export function escapeGlob(text: string): string {
  let out = '';
  for (const char of text) {
    out += char === '*' || char === '?' || char === '[' || char === ']' || char === '\\' ? `\\${char}` : char;
  }
  return out;
}
