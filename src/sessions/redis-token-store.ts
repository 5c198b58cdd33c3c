import { createHash, randomBytes } from 'node:crypto';
import { Redis, type ChainableCommander, type RedisOptions } from 'ioredis';
import type { StoreEvent, TokenRecord } from './token-record';
import { StoreUnavailableError, type EventSubscription, type TokenStore } from './token-store';

/** How `RedisTokenStore.connect` reaches Redis. */
export interface RedisTokenStoreOptions {
  url: string;
  /** Key prefix (`iam.token.store-prefix`); every key and the channel live under `{prefix}:`. */
  prefix: string;
  /** Time allowed for the first connection (and each reconnect attempt); default 5000 ms. */
  connectTimeoutMs?: number;
  /** A command without a reply after this long rejects (fail closed, design.md §7); default 1000 ms. */
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
   * plain GET instead of the sliding-expiry script (a tenth of the server time per call).
   */
  slidingExpiry?: boolean;
}

type Logger = NonNullable<RedisTokenStoreOptions['logger']>;

interface RedisListener {
  onEvent: (event: StoreEvent) => void;
  onConnectionChange?: (connected: boolean) => void;
  active: boolean;
  /** The state this listener last saw; undefined until its own subscribe() resolved (no initial call). */
  lastSeen?: boolean;
}

interface LuaScript {
  lua: string;
  sha: string;
}

const luaScript = (lua: string): LuaScript => ({ lua, sha: createHash('sha1').update(lua).digest('hex') });

/**
 * Reads a token and, in the same round trip, slides its idle window (design.md §10: one round trip).
 * Value layout: `<expiresAtMs>|<idleTimeoutMs>|<json>`. ARGV[1] = the caller's clock (the same clock that
 * computed the PX at put time). A malformed value is returned as is for the client to reject.
 */
const GET_TOKEN = luaScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local a = string.find(v, '|', 1, true)
local b = a and string.find(v, '|', a + 1, true)
if not b then return v end
local expiresAt = tonumber(string.sub(v, 1, a - 1))
local idle = tonumber(string.sub(v, a + 1, b - 1))
if not expiresAt or not idle then return v end
local left = expiresAt - tonumber(ARGV[1])
if left <= 0 then return false end
if idle > 0 then
  local ttl = idle
  if left < ttl then ttl = left end
  redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(ttl)))
end
return v`);

/** Fixed-window counter: INCR, and start the window on the first hit (or if a TTL was lost). */
const HIT_COUNTER = luaScript(`
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}`);

const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set([
  'session-ended',
  'user-sessions-ended',
  'authorization-changed',
  'profile-changed',
  'template-changed',
]);

/** Redis >= 7.0: `PEXPIRE … NX|GT` keeps the user index alive as long as its longest token. */
const MIN_REDIS_MAJOR = 7;
const PURGE_BATCH = 500;

/**
 * The shared token store on Redis (design.md §1, §6). Two connections: one for commands, one dedicated to
 * the events channel. Fail closed (design.md §7): no offline queue, a command timeout, in-flight commands
 * rejected when the socket drops, so a request while Redis is down rejects fast with
 * `StoreUnavailableError`; reconnection retries forever with a capped backoff.
 */
export class RedisTokenStore implements TokenStore {
  readonly kind = 'redis' as const;
  /** `CLIENT SETNAME` of both connections (unique per instance), for operators and `CLIENT LIST`. */
  readonly connectionNames: { readonly commands: string; readonly subscriber: string };
  private readonly channel: string;
  private readonly listeners = new Set<RedisListener>();
  private channelSubscribed = false;
  /** Incremented whenever the subscriber socket closes: a SUBSCRIBE confirmed on an older socket is stale. */
  private subscriberEpoch = 0;
  private pendingSubscribe: { epoch: number; promise: Promise<void> } | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private slidingExpiry = true;

  private constructor(
    readonly prefix: string,
    private readonly commands: Redis,
    private readonly subscriber: Redis,
    private readonly logger: Logger | undefined,
    names: { commands: string; subscriber: string },
  ) {
    this.connectionNames = names;
    this.channel = `${prefix}:events`;
    subscriber.on('message', (channel: string, message: string) => this.deliver(channel, message));
    subscriber.on('close', () => this.onSubscriberClosed());
    subscriber.on('ready', () => this.onSubscriberReady());
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
    // Resubscription is ours (onSubscriberReady) so that `connected` follows the real confirmation.
    const subscriber = new Redis(options.url, { ...base, connectionName: names.subscriber, autoResubscribe: false });
    watchConnection(commands, 'commands', options.logger);
    watchConnection(subscriber, 'subscriber', options.logger);
    try {
      await Promise.all([waitUntilReady(commands, connectTimeoutMs), waitUntilReady(subscriber, connectTimeoutMs)]);
      await assertServerVersion(commands);
    } catch (error) {
      commands.disconnect();
      subscriber.disconnect();
      throw toUnavailable(error);
    }
    const store = new RedisTokenStore(options.prefix, commands, subscriber, options.logger, names);
    store.startSubscriberPing(options.subscriberPingMs ?? 1000);
    store.slidingExpiry = options.slidingExpiry ?? true;
    return store;
  }

  async getToken(tokenHash: string): Promise<TokenRecord | null> {
    // decodeRecord checks the absolute expiry either way; only sliding needs the script.
    const raw = this.slidingExpiry
      ? await this.runScript(GET_TOKEN, this.tokenKey(tokenHash), Date.now()).catch(rethrowUnavailable)
      : await this.commands.get(this.tokenKey(tokenHash)).catch(rethrowUnavailable);
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
    await this.commands.publish(this.channel, JSON.stringify(event)).catch(rethrowUnavailable);
  }

  /**
   * Registers a listener and resolves once the channel subscription is confirmed. The channel stays
   * subscribed for the life of the store; closing a subscription only detaches its listener.
   */
  async subscribe(
    onEvent: (event: StoreEvent) => void,
    onConnectionChange?: (connected: boolean) => void,
  ): Promise<EventSubscription> {
    if (this.closed) throw new StoreUnavailableError('the Redis token store is closed');
    const listener: RedisListener = { onEvent, onConnectionChange, active: true };
    this.listeners.add(listener);
    try {
      await this.ensureChannelSubscribed();
    } catch (error) {
      this.listeners.delete(listener);
      throw toUnavailable(error);
    }
    listener.lastSeen = this.channelSubscribed;
    const store = this;
    return {
      get connected() {
        return listener.active && store.channelSubscribed;
      },
      async close() {
        listener.active = false;
        store.listeners.delete(listener);
      },
    };
  }

  async hit(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }> {
    const reply = await this.runScript(HIT_COUNTER, this.counterKey(key), Math.max(1, Math.ceil(windowMs))).catch(
      rethrowUnavailable,
    );
    const [count, ttl] = reply as [number, number];
    return { count: Number(count), resetInMs: Math.max(0, Number(ttl)) };
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
    clearInterval(this.pingTimer);
    this.channelSubscribed = false;
    for (const listener of this.listeners) listener.active = false;
    this.listeners.clear();
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

  /** EVALSHA, falling back to EVAL when the server lost its script cache (restart, SCRIPT FLUSH). */
  private async runScript(script: LuaScript, key: string, arg: number): Promise<unknown> {
    try {
      return await this.commands.evalsha(script.sha, 1, key, arg);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return this.commands.eval(script.lua, 1, key, arg);
    }
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

  private ensureChannelSubscribed(): Promise<void> {
    if (this.channelSubscribed) return Promise.resolve();
    const epoch = this.subscriberEpoch;
    if (this.pendingSubscribe?.epoch === epoch) return this.pendingSubscribe.promise;
    const promise = this.subscriber.subscribe(this.channel).then(() => {
      // Only a confirmation received on the current socket counts.
      if (epoch === this.subscriberEpoch && !this.closed) this.setChannelSubscribed(true);
    });
    const pending = { epoch, promise };
    this.pendingSubscribe = pending;
    const clear = (): void => {
      if (this.pendingSubscribe === pending) this.pendingSubscribe = undefined;
    };
    promise.then(clear, clear);
    return promise;
  }

  private onSubscriberClosed(): void {
    this.subscriberEpoch += 1;
    if (this.channelSubscribed) this.setChannelSubscribed(false);
  }

  private onSubscriberReady(): void {
    if (this.closed || this.listeners.size === 0 || this.channelSubscribed) return;
    this.ensureChannelSubscribed().catch((error: unknown) => {
      // The next 'ready' tries again; until then subscriptions report connected = false.
      this.logger?.warn({ err: error }, 'token store: resubscribing to the events channel failed');
    });
  }

  private setChannelSubscribed(connected: boolean): void {
    this.channelSubscribed = connected;
    for (const listener of this.listeners) {
      if (!listener.active || listener.lastSeen === undefined || listener.lastSeen === connected) continue;
      listener.lastSeen = connected;
      if (!listener.onConnectionChange) continue;
      try {
        listener.onConnectionChange(connected);
      } catch (error) {
        this.logger?.warn({ err: error }, 'token store: onConnectionChange listener threw');
      }
    }
  }

  private deliver(channel: string, message: string): void {
    if (channel !== this.channel) return;
    let event: StoreEvent;
    try {
      const parsed: unknown = JSON.parse(message);
      const type = (parsed as { type?: unknown } | null)?.type;
      if (typeof type !== 'string' || !KNOWN_EVENT_TYPES.has(type)) throw new Error('unknown event type');
      event = parsed as StoreEvent;
    } catch (error) {
      this.logger?.warn({ err: error, channel }, 'token store: malformed event ignored');
      return;
    }
    for (const listener of this.listeners) {
      if (!listener.active) continue;
      try {
        listener.onEvent(event);
      } catch (error) {
        this.logger?.warn({ err: error, type: event.type }, 'token store: event listener threw');
      }
    }
  }

  /**
   * A subscriber socket can die without a FIN (NAT timeout, failover); PING through it so `socketTimeout`
   * notices, the socket is replaced, and `connected` turns false meanwhile.
   */
  private startSubscriberPing(intervalMs: number): void {
    this.pingTimer = setInterval(() => {
      if (this.subscriber.status !== 'ready') return;
      this.subscriber.ping().catch(() => {
        if (!this.closed && this.subscriber.status === 'ready') this.subscriber.disconnect(true);
      });
    }, intervalMs);
    this.pingTimer.unref();
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

function toUnavailable(error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(`token store unavailable: ${reason}`, { cause: error });
}

function rethrowUnavailable(error: unknown): never {
  throw toUnavailable(error);
}

/** Runs a MULTI or pipeline and returns its replies, failing on any per-command error. */
async function execTransaction(tx: ChainableCommander): Promise<unknown[]> {
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

function waitUntilReady(redis: Redis, timeoutMs: number): Promise<void> {
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

async function assertServerVersion(redis: Redis): Promise<void> {
  const info = await redis.info('server');
  const line = info.split('\n').find((entry) => entry.startsWith('redis_version:'));
  const major = line ? Number.parseInt(line.slice('redis_version:'.length), 10) : Number.NaN;
  if (!(major >= MIN_REDIS_MAJOR)) {
    throw new Error(`Redis >= ${MIN_REDIS_MAJOR}.0 is required (server reports ${line?.trim() ?? 'no version'})`);
  }
}

/** Logs state changes only (lost, restored, first error of an outage), never one line per retry. */
function watchConnection(redis: Redis, role: string, logger: Logger | undefined): void {
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
    if (up) logger?.warn({ role }, 'token store: Redis connection lost; reconnecting');
    up = false;
  });
  // Without an 'error' listener ioredis prints every failed reconnect to stderr.
  redis.on('error', (error: Error) => {
    if (errorLogged) return;
    errorLogged = true;
    logger?.warn({ role, err: error }, 'token store: Redis connection error');
  });
}

async function quitConnection(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
