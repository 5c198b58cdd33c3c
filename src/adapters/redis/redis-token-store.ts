import { randomBytes } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';
import { Cluster, type Redis, type RedisOptions } from 'ioredis';
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
import { RecentRevocations } from './recent-revocations';
import { openCommands, openSubscriber, parseRedisUrl, type HostPort, type RedisCommands, type RedisTopology } from './redis-topology';

/** How `RedisTokenStore.connect` reaches Redis. */
export interface RedisTokenStoreOptions {
  /** `redis://`, `rediss://`, `redis+cluster://…` or `redis+sentinel://…` (redis-topology.ts). */
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
  /**
   * Revocations (token deletes) wait until this many replicas acknowledged them (`WAIT`), when the primary
   * has replicas: a failover right after the answer cannot bring the session back. 0 = do not wait. Default 1.
   */
  waitReplicas?: number;
  /** How long a revocation waits for the replicas (`redis.wait-timeout`); default 500 ms. */
  waitTimeoutMs?: number;
  /** How long this instance remembers its revocations to re-apply them after a failover; default 60 s. */
  replayWindowMs?: number;
}

type Logger = NonNullable<RedisTokenStoreOptions['logger']>;

const PURGE_BATCH = 500;

/**
 * The shared token store on Redis: one server, the primary the Sentinels name, or a Redis Cluster
 * (redis-topology.ts). Three connections (per node, on a Cluster): one for commands, one for revocations
 * (their `WAIT` for replicas never holds up a token read), and one dedicated to the events channel. Fail closed (docs/http-contract.md): no offline queue, a command timeout, in-flight commands
 * rejected when the socket drops, so a request while Redis is down rejects fast with
 * `StoreUnavailableError`; reconnection retries forever with a capped backoff.
 */
export class RedisTokenStore implements TokenStore {
  /** `CLIENT SETNAME` of the connections (unique per instance), for operators and `CLIENT LIST`. */
  readonly connectionNames: { readonly commands: string; readonly revocations: string; readonly subscriber: string };
  /** `single`, `sentinel` or `cluster`: which form of `REDIS_URL` this store was opened with. */
  readonly topology: RedisTopology['kind'];
  private readonly events: RedisEventsChannel;
  private closed = false;
  private slidingExpiry = true;
  /** The server's `maxmemory-policy` at connect, null when CONFIG is disabled (see checkEvictionPolicy). */
  evictionPolicy: string | null = null;
  /** Token reads of one event-loop turn share one MGET (see coalesced-reads.ts), one per node on a Cluster. */
  private readonly tokenReads: CoalescedReads;
  private readonly cluster: boolean;
  private waitReplicas = 1;
  private waitTimeoutMs = 500;
  /** Shared with the connection watchers: true once close() began. */
  private closingState = { closing: false };
  /** This instance's recent revocations, applied again when a failover is noticed. */
  private readonly recent: RecentRevocations;

  private constructor(
    readonly prefix: string,
    private readonly commands: RedisCommands,
    /** Token deletes and their WAIT: a slow replica delays a revocation, never a request. */
    private readonly revocations: RedisCommands,
    private readonly subscriber: Redis,
    private readonly logger: Logger | undefined,
    names: { commands: string; revocations: string; subscriber: string },
    topology: RedisTopology['kind'],
    maxReconnectDelayMs: number | undefined,
    replayWindowMs: number,
  ) {
    this.connectionNames = names;
    this.topology = topology;
    this.cluster = commands instanceof Cluster;
    this.events = new RedisEventsChannel(`${prefix}:events`, subscriber, logger, maxReconnectDelayMs);
    this.tokenReads = new CoalescedReads((keys) => (commands instanceof Cluster ? readPerNode(commands, keys) : commands.mget(keys)));
    this.recent = new RecentRevocations(replayWindowMs);
  }

  /** Opens both connections; rejects with `StoreUnavailableError` when Redis cannot be reached in time. */
  static async connect(options: RedisTokenStoreOptions): Promise<RedisTokenStore> {
    if (!options.prefix) throw new TypeError('RedisTokenStore needs a non-empty prefix');
    const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    const commandTimeoutMs = options.commandTimeoutMs ?? 1000;
    const maxDelay = options.maxReconnectDelayMs ?? 2000;
    const topology = parseRedisUrl(options.url);
    const instanceId = randomBytes(4).toString('hex');
    const names = { commands: `iam-gateway:commands:${instanceId}`, revocations: `iam-gateway:revocations:${instanceId}`, subscriber: `iam-gateway:events:${instanceId}` };
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
    const commands = openCommands(topology, base, names.commands);
    const revocations = openCommands(topology, base, names.revocations);
    // Set by close(): the connections' own 'close' is then no loss to report.
    const state = { closing: false };
    const closing = (): boolean => state.closing;
    watchConnection(commands, 'commands', options.logger, closing);
    watchConnection(revocations, 'revocations', options.logger, closing);
    let subscriber: Redis | null = null;
    let evictionPolicy: string | null = null;
    try {
      await Promise.all([waitUntilReady(commands, connectTimeoutMs), waitUntilReady(revocations, connectTimeoutMs)]);
      // Opened once the commands know the cluster's slots: its first node is the one PUBLISH goes to.
      // Resubscription is ours (RedisEventsChannel) so that `connected` follows the real confirmation.
      const channel = `${options.prefix}:events`;
      subscriber = openSubscriber(topology, { ...base, autoResubscribe: false }, names.subscriber, () => (commands instanceof Cluster ? subscriberNodes(commands, channel) : []));
      watchConnection(subscriber, 'subscriber', options.logger, closing);
      await waitUntilReady(subscriber, connectTimeoutMs);
      await assertServerVersion(commands);
      evictionPolicy = await checkEvictionPolicy(commands, options.logger, options.refuseEvictingPolicy ?? false);
    } catch (error) {
      commands.disconnect();
      revocations.disconnect();
      subscriber?.disconnect();
      throw error instanceof EvictionPolicyError ? error : toUnavailable(error);
    }
    const store = new RedisTokenStore(options.prefix, commands, revocations, subscriber, options.logger, names, topology.kind, maxDelay, options.replayWindowMs ?? 60_000);
    store.closingState = state;
    store.evictionPolicy = evictionPolicy;
    store.events.startPing(options.subscriberPingMs ?? 1000);
    store.slidingExpiry = options.slidingExpiry ?? true;
    store.waitReplicas = Math.max(0, Math.floor(options.waitReplicas ?? 1));
    store.waitTimeoutMs = Math.max(1, Math.ceil(options.waitTimeoutMs ?? 500));
    store.watchFailovers();
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
    const tokenKey = this.tokenKey(tokenHash);
    if (this.cluster) {
      // Token and index live in different slots: two writes, sent together. Either failing fails the login
      // (503), so a token whose index entry is missing is never handed out.
      const index = this.commands.multi().hset(indexKey, record.sessionId, tokenHash).pexpire(indexKey, leftMs, 'NX').pexpire(indexKey, leftMs, 'GT');
      const settled = await Promise.allSettled([execTransaction(index), this.commands.set(tokenKey, value, 'PX', ttlMs)]);
      for (const outcome of settled) if (outcome.status === 'rejected') throw toUnavailable(outcome.reason);
      return;
    }
    const tx = this.commands
      .multi()
      .set(tokenKey, value, 'PX', ttlMs)
      .hset(indexKey, record.sessionId, tokenHash)
      // NX gives a new index its TTL; GT extends it when this token outlives the others.
      .pexpire(indexKey, leftMs, 'NX')
      .pexpire(indexKey, leftMs, 'GT');
    await execTransaction(tx);
  }

  /**
   * Deletes the token (then its index entry) on the revocations connection and waits for the replicas
   * (`waitReplicas`); remembered for {@link replayRevocations}.
   */
  async deleteToken(tokenHash: string, userId: string, sessionId: string): Promise<boolean> {
    const tokenKey = this.tokenKey(tokenHash);
    const indexKey = this.userIndexKey(userId);
    this.recent.deleted(tokenKey, indexKey, sessionId);
    let deleted: unknown;
    if (this.cluster) {
      // Different slots: the token first, so an index entry never goes missing while its token lives.
      deleted = await this.revocations.del(tokenKey).catch(rethrowUnavailable);
      await this.revocations.hdel(indexKey, sessionId).catch(rethrowUnavailable);
    } else {
      [deleted] = await execTransaction(this.revocations.multi().del(tokenKey).hdel(indexKey, sessionId));
    }
    await this.awaitReplicas(tokenKey);
    return deleted === 1;
  }

  async listUserTokens(userId: string): Promise<Map<string, string>> {
    const indexKey = this.userIndexKey(userId);
    const entries = await this.commands.hgetall(indexKey).catch(rethrowUnavailable);
    const sessions = Object.entries(entries);
    const live = new Map<string, string>();
    if (sessions.length === 0) return live;
    let exists: unknown[];
    if (this.cluster) {
      exists = await Promise.all(sessions.map(([, tokenHash]) => this.commands.exists(this.tokenKey(tokenHash)))).catch(rethrowUnavailable);
    } else {
      const check = this.commands.pipeline();
      for (const [, tokenHash] of sessions) check.exists(this.tokenKey(tokenHash));
      exists = await execTransaction(check);
    }
    const stale: string[] = [];
    sessions.forEach(([sessionId, tokenHash], i) => {
      if (exists[i] === 1) live.set(sessionId, tokenHash);
      else stale.push(sessionId);
    });
    if (stale.length > 0) await this.commands.hdel(indexKey, ...stale).catch(rethrowUnavailable);
    return live;
  }

  async publish(event: StoreEvent): Promise<void> {
    const message = JSON.stringify(event);
    this.recent.published(event, message);
    await this.publishMessage(message);
  }

  /**
   * PUBLISH answers once the node it was sent to has handed the message to its own subscribers; other nodes
   * of a Cluster get it over the cluster bus afterwards. So on a Cluster it goes to the primary of the
   * channel's slot, where every instance's subscriber connects first (subscriberNodes): an event is delivered
   * to every instance before `publish` resolves, and a logout answered is refused everywhere.
   */
  private async publishMessage(message: string): Promise<void> {
    const target = this.commands instanceof Cluster ? (nodeOf(this.commands, this.events.channel) ?? this.commands) : this.commands;
    await target.publish(this.events.channel, message).catch(rethrowUnavailable);
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

  /**
   * Keys the server evicted for memory since it started (`INFO stats` `evicted_keys`, summed over a Cluster's
   * primaries): under a `volatile-*` policy these are live tokens and counters, each an early logout. Null when the
   * server does not say. Read at a metrics scrape, never on a request.
   */
  async evictedKeys(): Promise<number | null> {
    const nodes = this.commands instanceof Cluster ? this.commands.nodes('master') : [this.commands];
    let total = 0;
    for (const node of nodes) {
      const stats = await node.info('stats').catch(() => '');
      const line = stats.split('\n').find((entry) => entry.startsWith('evicted_keys:'));
      if (line === undefined) return null;
      total += Number(line.slice('evicted_keys:'.length).trim());
    }
    return Number.isFinite(total) ? total : null;
  }

  /** Every key under the prefix, on every primary of a Cluster. */
  async purge(): Promise<number> {
    try {
      if (!(this.commands instanceof Cluster)) return await purgeNode(this.commands, this.prefix, false);
      let deleted = 0;
      for (const node of this.commands.nodes('master')) deleted += await purgeNode(node, this.prefix, true);
      return deleted;
    } catch (error) {
      throw toUnavailable(error);
    }
  }

  async ping(): Promise<void> {
    await this.commands.ping().catch(rethrowUnavailable);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closingState.closing = true;
    this.events.stop();
    this.recent.stop();
    await Promise.all([quitConnection(this.commands), quitConnection(this.revocations), quitConnection(this.subscriber)]);
  }

  /**
   * Redis replicates asynchronously: a primary that fails right after acknowledging a delete may leave the
   * token on the replica that takes over. So a delete waits (`WAIT`) until `waitReplicas` replicas have it,
   * when the primary has any connected (`ROLE`); if they do not answer within `waitTimeoutMs` it is logged
   * and left to the replay after a failover ({@link replayRevocations}) and to the durable revocation
   * record every instance follows. Never throws: the delete itself already succeeded.
   */
  private async awaitReplicas(key: string): Promise<void> {
    if (this.waitReplicas === 0) return;
    const node = this.revocations instanceof Cluster ? nodeOf(this.revocations, key) : this.revocations;
    if (!node) return;
    try {
      const role = (await node.call('ROLE')) as unknown[];
      if (role[0] !== 'master') return;
      const wanted = Math.min(this.waitReplicas, Array.isArray(role[2]) ? role[2].length : 0);
      if (wanted === 0) return;
      const acknowledged = Number(await node.call('WAIT', wanted, this.waitTimeoutMs));
      if (acknowledged < wanted) {
        this.logger?.warn({ acknowledged, wanted, timeoutMs: this.waitTimeoutMs }, 'token store: a revocation was not acknowledged by the replicas within redis.wait-timeout; it is applied again if a failover follows');
      }
    } catch (error) {
      this.logger?.warn({ err: error }, 'token store: waiting for the replicas to acknowledge a revocation failed; it is applied again if a failover follows');
    }
  }

  /**
   * Notices a failover: a command connection that comes back after a loss (a restarted server, the primary
   * the Sentinels promoted), or a Cluster whose set of primaries changed. Then {@link replayRevocations}.
   */
  private watchFailovers(): void {
    for (const connection of [this.commands, this.revocations]) {
      let lost = false;
      connection.on('close', () => {
        lost = true;
      });
      connection.on('ready', () => {
        if (!lost) return;
        lost = false;
        this.replaySoon('reconnected');
      });
    }
    const commands = this.commands;
    if (commands instanceof Cluster) {
      let primaries = primariesOf(commands);
      commands.on('refresh', () => {
        const now = primariesOf(commands);
        if (now === primaries) return;
        const before = primaries;
        primaries = now;
        if (before !== '') this.replaySoon('cluster primaries changed');
      });
    }
  }

  private replaySoon(reason: string): void {
    if (this.closed) return;
    this.recent.schedule(() => this.replayRevocations(reason));
  }

  /**
   * Applies this instance's revocations of the last `replayWindowMs` again (tokens deleted, ends published),
   * so that a token a failover brought back is gone again and an instance whose subscriber missed the event
   * during the failover hears it. Rejects (and is retried) while Redis still cannot take the writes.
   */
  async replayRevocations(reason = 'requested'): Promise<{ deletes: number; events: number }> {
    const { deletes, events } = this.recent.snapshot();
    if (deletes.length === 0 && events.length === 0) return { deletes: 0, events: 0 };
    for (const entry of deletes) {
      await this.revocations.del(entry.tokenKey).catch(rethrowUnavailable);
      await this.revocations.hdel(entry.indexKey, entry.sessionId).catch(rethrowUnavailable);
    }
    for (const message of events) await this.publishMessage(message);
    this.logger?.warn({ reason, deletes: deletes.length, events: events.length, windowMs: this.recent.windowMs }, 'token store: Redis failover or reconnect noticed; recent revocations applied and published again');
    return { deletes: deletes.length, events: events.length };
  }

  private tokenKey(tokenHash: string): string {
    return `${this.prefix}:token:${tokenHash}`;
  }

  private userIndexKey(userId: string): string {
    return `${this.prefix}:user:${userId}:sessions`;
  }

  /**
   * Every counter of a prefix shares one hash tag (`{prefix}`): `takeCounters` checks several in one script,
   * which a Cluster runs only when they are in one slot. Counters are touched by logins only, never by a
   * proxied request, so that one slot is not a hot spot.
   */
  private counterKey(key: string): string {
    return `${this.prefix}:ratelimit:{${this.prefix}}:${key}`;
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

/**
 * The values of `keys` read from a Cluster: grouped by the primary that serves their slot, one pipeline of
 * GETs per primary, all sent at once (one round trip per shard, no CROSSSLOT). A shard that fails (it is
 * failing over) fails only the reads of its keys.
 */
async function readPerNode(cluster: Cluster, keys: string[]): Promise<Array<string | null | Error>> {
  const groups = new Map<string, number[]>();
  keys.forEach((key, index) => {
    const owner = cluster.slots[calculateSlot(key)]?.[0] ?? '';
    const group = groups.get(owner);
    if (group) group.push(index);
    else groups.set(owner, [index]);
  });
  const values = new Array<string | null | Error>(keys.length).fill(null);
  await Promise.all(
    [...groups.values()].map(async (indexes) => {
      const pipeline = cluster.pipeline();
      for (const index of indexes) pipeline.get(keys[index]!);
      try {
        const replies = await execTransaction(pipeline);
        indexes.forEach((index, position) => {
          const reply = replies[position];
          values[index] = typeof reply === 'string' ? reply : null;
        });
      } catch (error) {
        const failure = toUnavailable(error);
        for (const index of indexes) values[index] = failure;
      }
    }),
  );
  return values;
}

/** The connection of the primary serving `key`'s slot, or null while the slot map does not know it. */
function nodeOf(cluster: Cluster, key: string): Redis | null {
  const owner = cluster.slots[calculateSlot(key)]?.[0];
  if (!owner) return null;
  return cluster.nodes('master').find((node) => `${node.options.host}:${node.options.port}` === owner) ?? null;
}

/** The cluster's nodes for the subscriber, the primary of the channel's slot (where PUBLISH goes) first. */
function subscriberNodes(cluster: Cluster, channel: string): HostPort[] {
  const owner = cluster.slots[calculateSlot(channel)]?.[0];
  const nodes = cluster.nodes('all').map((node) => ({ host: node.options.host ?? '127.0.0.1', port: node.options.port ?? 6379 }));
  const first = nodes.findIndex((node) => `${node.host}:${node.port}` === owner);
  return first > 0 ? [nodes[first]!, ...nodes.slice(0, first), ...nodes.slice(first + 1)] : nodes;
}

/** A signature of which primaries serve the slots (changes when a replica is promoted). */
function primariesOf(cluster: Cluster): string {
  return [...new Set(cluster.slots.map((owners) => owners?.[0] ?? ''))].filter(Boolean).sort().join(',');
}

/**
 * Deletes every key under `prefix` on one server (or one Cluster primary). SCAN's glob is escaped and every
 * key is checked again before it is unlinked; on a Cluster node the keys are unlinked one by one (one
 * pipeline per batch), as a multi-key UNLINK must stay in one slot.
 */
async function purgeNode(node: Redis, prefix: string, clusterNode: boolean): Promise<number> {
  const ownPrefix = `${prefix}:`;
  const pattern = `${escapeGlob(prefix)}:*`;
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', PURGE_BATCH);
    cursor = next;
    // Belt and braces: never unlink a key SCAN's glob matched but that is not ours.
    const own = keys.filter((key) => key.startsWith(ownPrefix));
    if (own.length === 0) continue;
    if (!clusterNode) {
      deleted += await node.unlink(...own);
      continue;
    }
    const pipeline = node.pipeline();
    for (const key of own) pipeline.unlink(key);
    for (const reply of await execTransaction(pipeline)) deleted += Number(reply);
  } while (cursor !== '0');
  return deleted;
}

/** Escapes Redis glob metacharacters (`* ? [ ] \`) so a prefix only ever matches itself literally. */
export function escapeGlob(text: string): string {
  let out = '';
  for (const char of text) {
    out += char === '*' || char === '?' || char === '[' || char === ']' || char === '\\' ? `\\${char}` : char;
  }
  return out;
}
