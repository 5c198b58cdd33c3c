/**
 * One contract for every TokenStore: run against MemoryTokenStore always and against
 * RedisTokenStore when REDIS_URL is set (CI always sets it). Redis-only cases cover failing closed while
 * Redis is away (docs/http-contract.md) and the events channel surviving a dropped subscriber connection.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import { defineTokenStore } from '../../src/adapters/backend-registration';
import { MEMORY_TOKEN_STORE } from '../../src/adapters/memory/backend';
import { MemoryTokenStore } from '../../src/adapters/memory/memory-token-store';
import { RedisTokenStore, escapeGlob } from '../../src/adapters/redis/redis-token-store';
import { openTokenStore } from '../../src/adapters/registry';
import {
  TOKEN_LENGTH,
  TOKEN_PREFIX,
  generateToken,
  hashToken,
  isWellFormedToken,
} from '../../src/domain/token-hash';
import type { StoreEvent, TokenRecord } from '../../src/domain/token-record';
import { StoreUnavailableError, type TokenStore } from '../../src/domain/token-store';
import { testRedisUrl, uniquePrefix, notRun } from '../support/env';
import { startPrivateRedis } from '../support/private-redis';
import { FakeClock } from '../support/clock';
import { until } from '../support/wait';

/**
 * "Answered, not hung": a generous upper bound for a store call that must fail instead of waiting on a dead or silent
 * connection (which would wait until the test's own timeout). At least 5x every timeout configured below and far above
 * a loaded machine's latency; how fast the store gives up is the bench's business.
 */
const ANSWERED_NOT_HUNG_MS = 10_000;

const randomId = (label: string): string => `${label}-${randomBytes(6).toString('hex')}`;

/** The shared poller (test/support/wait.ts), with a generous bound whatever the call names. */
async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  await until(what, check, { within: Math.max(timeoutMs, 20_000) });
}

function makeRecord(options: { userId?: string; sessionId?: string; ttlMs?: number; idleMs?: number } = {}, now = Date.now()): TokenRecord {
  return {
    sessionId: options.sessionId ?? randomId('s'),
    principal: {
      userId: options.userId ?? randomId('u'),
      identityId: 'id-alice',
      identityDomain: 'example.com',
      activeProfileId: 'p-reader',
      displayName: 'Alice',
      authorizationVersion: 3,
    },
    clientType: 'WEB',
    createdAt: new Date(now).toISOString(),
    expiresAt: new Date(now + (options.ttlMs ?? 60_000)).toISOString(),
    idleTimeoutMs: options.idleMs ?? 0,
  };
}

const newHash = (): string => hashToken(generateToken());

interface ContractTarget {
  name: string;
  create(prefix: string): Promise<TokenStore>;
  /** The backing Redis, to assert on what the server holds (Redis only). */
  raw?: () => Redis;
  /** The store's time now (the instant a record's expiry counts from). */
  now(): number;
  /**
   * Lets `ms` of the store's time pass for `key` (a token's or a counter's key under `prefix`): the in-process store's
   * clock is moved; Redis keeps its own time, so the test waits until the server's TTL of the key is `ms` lower, or
   * the key is gone. Never a fixed sleep, and the key is only looked at, so an idle window is not slid by the wait.
   */
  passes(ms: number, prefix: string, key: string): Promise<void>;
}

const tokenKey = (hash: string): string => `token:${hash}`;
const counterKey = (prefix: string, key: string): string => `ratelimit:{${prefix}}:${key}`;

function describeTokenStoreContract(target: ContractTarget): void {
  describe(`TokenStore contract: ${target.name}`, () => {
    const prefix = uniquePrefix(`token-store-${target.name}`);
    const opened: TokenStore[] = [];
    let store: TokenStore;
    const open = async (storePrefix: string): Promise<TokenStore> => {
      const created = await target.create(storePrefix);
      opened.push(created);
      return created;
    };

    beforeAll(async () => {
      store = await open(prefix);
    });

    afterAll(async () => {
      for (const created of opened) {
        await created.purge().catch(() => 0);
        await created.close();
      }
    });

    it('round-trips a record and reports its prefix', async () => {
      const hash = newHash();
      const record = makeRecord();
      await store.putToken(hash, record);
      expect(await store.getToken(hash)).toEqual(record);
      expect(await store.getToken(newHash())).toBeNull();
      expect(store.prefix).toBe(prefix);
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('forgets a token at its absolute expiry', async () => {
      const hash = newHash();
      await store.putToken(hash, makeRecord({ ttlMs: 1000 }, target.now()));
      if (target.raw) {
        const pttl = await target.raw().pttl(`${prefix}:token:${hash}`);
        expect(pttl).toBeGreaterThan(0);
        expect(pttl).toBeLessThanOrEqual(1000);
      }
      expect(await store.getToken(hash)).not.toBeNull();
      await target.passes(1000, prefix, tokenKey(hash));
      expect(await store.getToken(hash)).toBeNull();
      if (target.raw) expect(await target.raw().exists(`${prefix}:token:${hash}`)).toBe(0);
    });

    it('never stores a record that has already expired', async () => {
      const hash = newHash();
      await store.putToken(hash, makeRecord({ ttlMs: -1000 }, target.now()));
      expect(await store.getToken(hash)).toBeNull();
    });

    it('slides the idle window on every read and expires an idle token', async () => {
      // On Redis, half a window between a wait's end and the read: a busy machine (a CI run) cannot end one there.
      const idleMs = 1200;
      const hash = newHash();
      const key = `${prefix}:token:${hash}`;
      await store.putToken(hash, makeRecord({ ttlMs: 60_000, idleMs }, target.now()));
      if (target.raw) expect(await target.raw().pttl(key)).toBeLessThanOrEqual(idleMs);
      await target.passes(600, prefix, tokenKey(hash));
      expect(await store.getToken(hash)).not.toBeNull(); // slides: idle until ~1800
      if (target.raw) expect(await target.raw().pttl(key)).toBeGreaterThan(idleMs - 300);
      await target.passes(600, prefix, tokenKey(hash));
      expect(await store.getToken(hash)).not.toBeNull(); // 1200 ms after put, 600 ms idle
      // The wait only looks at the key's TTL: a read would slide the window again.
      await target.passes(idleMs, prefix, tokenKey(hash));
      expect(await store.getToken(hash)).toBeNull();
    });

    it('does not extend the absolute expiry by sliding', async () => {
      const hash = newHash();
      const key = `${prefix}:token:${hash}`;
      await store.putToken(hash, makeRecord({ ttlMs: 2000, idleMs: 1600 }, target.now()));
      await target.passes(800, prefix, tokenKey(hash));
      expect(await store.getToken(hash)).not.toBeNull();
      // min(idle 1600, ~1200 left): the slide stops at the absolute expiry.
      if (target.raw) expect(await target.raw().pttl(key)).toBeLessThanOrEqual(1210);
      await target.passes(600, prefix, tokenKey(hash));
      expect(await store.getToken(hash)).not.toBeNull(); // ~600 ms before the absolute expiry
      await target.passes(600, prefix, tokenKey(hash)); // past the absolute expiry although read a moment ago
      expect(await store.getToken(hash)).toBeNull();
    });

    it("indexes a user's sessions, prunes expired entries and deletes with the index", async () => {
      const userId = randomId('u');
      const longHash = newHash();
      const shortHash = newHash();
      const longRecord = makeRecord({ userId, ttlMs: 60_000 }, target.now());
      const shortRecord = makeRecord({ userId, ttlMs: 1000 }, target.now());
      await store.putToken(longHash, longRecord);
      await store.putToken(shortHash, shortRecord);
      const indexKey = `${prefix}:user:${userId}:sessions`;
      if (target.raw) {
        // The index lives as long as its longest token, whatever the order of puts.
        expect(await target.raw().pttl(indexKey)).toBeGreaterThan(50_000);
      }
      expect(await store.listUserTokens(userId)).toEqual(
        new Map([
          [longRecord.sessionId, longHash],
          [shortRecord.sessionId, shortHash],
        ]),
      );
      await target.passes(1000, prefix, tokenKey(shortHash));
      expect(await store.listUserTokens(userId)).toEqual(new Map([[longRecord.sessionId, longHash]]));
      if (target.raw) expect(await target.raw().hkeys(indexKey)).toEqual([longRecord.sessionId]);

      expect(await store.deleteToken(longHash, userId, longRecord.sessionId)).toBe(true);
      expect(await store.getToken(longHash)).toBeNull();
      expect((await store.listUserTokens(userId)).size).toBe(0);
      expect(await store.deleteToken(longHash, userId, longRecord.sessionId)).toBe(false);
      if (target.raw) expect(await target.raw().exists(indexKey)).toBe(0);
      expect((await store.listUserTokens(randomId('nobody'))).size).toBe(0);
    });

    it('delivers published events asynchronously to subscribers until they close', async () => {
      const received: StoreEvent[] = [];
      const subscription = await store.subscribe((event) => received.push(event));
      expect(subscription.connected).toBe(true);
      const event: StoreEvent = { type: 'session-ended', sessionId: 's1', tokenHash: 'h1', userId: 'u1', reason: 'logout' };
      const publishing = store.publish(event);
      expect(received).toHaveLength(0); // never delivered inside the publisher's call
      await publishing;
      await waitFor('the event', () => received.length === 1);
      expect(received[0]).toEqual(event);
      expect(received[0]).not.toBe(event);

      await subscription.close();
      expect(subscription.connected).toBe(false);
      // A subscriber still open hears the next event: by then the closed one would have heard it too.
      const heardByOpen: StoreEvent[] = [];
      const open = await store.subscribe((later) => heardByOpen.push(later));
      await store.publish({ type: 'template-changed', versionId: 'v2' });
      await waitFor('the open subscriber to hear the event', () => heardByOpen.length === 1);
      await open.close();
      expect(received).toHaveLength(1);
    });

    it('counts hits in a fixed window that starts at the first hit', async () => {
      // A window long enough that a busy machine (a CI run) cannot end it between two steps. Its exact end, on
      // both sides, is checked on the in-process store's clock (test/unit/memory-token-store.test.ts).
      const windowMs = 2000;
      const key = randomId('login:alice');
      const first = await store.hit(key, windowMs);
      expect(first.count).toBe(1);
      expect(first.resetInMs).toBeGreaterThan(0);
      expect(first.resetInMs).toBeLessThanOrEqual(windowMs);
      await target.passes(300, prefix, counterKey(prefix, key));
      const second = await store.hit(key, windowMs);
      expect(second.count).toBe(2);
      expect(second.resetInMs).toBeLessThanOrEqual(windowMs - 280); // the window did not restart
      const peeked = await store.peek(key);
      expect(peeked.count).toBe(2);
      expect((await store.peek(key)).count).toBe(2); // peek does not count
      await target.passes(windowMs, prefix, counterKey(prefix, key));
      expect(await store.peek(key)).toEqual({ count: 0, resetInMs: 0 });
      expect((await store.hit(key, windowMs)).count).toBe(1); // a new window
      await store.resetCounter(key);
      expect(await store.peek(key)).toEqual({ count: 0, resetInMs: 0 });
      expect((await store.hit(key, windowMs)).count).toBe(1);
    });

    it('purges every key under its prefix and reports how many', async () => {
      const purgePrefix = uniquePrefix(`purge-${target.name}`);
      const purging = await open(purgePrefix);
      const hashes = [newHash(), newHash(), newHash()];
      const userId = randomId('u');
      for (const hash of hashes) await purging.putToken(hash, makeRecord({ userId }));
      await purging.hit('login:bob', 60_000);
      // 3 tokens + 1 user index + 1 counter
      expect(await purging.purge()).toBe(5);
      for (const hash of hashes) expect(await purging.getToken(hash)).toBeNull();
      expect((await purging.listUserTokens(userId)).size).toBe(0);
      expect((await purging.peek('login:bob')).count).toBe(0);
      expect(await purging.purge()).toBe(0);
    });

    it('rejects with StoreUnavailableError once closed', async () => {
      const closing = await target.create(uniquePrefix(`closed-${target.name}`));
      await closing.close();
      await expect(closing.getToken(newHash())).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(closing.putToken(newHash(), makeRecord())).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(closing.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  });
}

describe('token format (docs/http-contract.md)', () => {
  it('generates iamt_ + base64url of 256 random bits', () => {
    const token = generateToken();
    expect(token.startsWith(TOKEN_PREFIX)).toBe(true);
    expect(token).toHaveLength(TOKEN_LENGTH);
    expect(TOKEN_LENGTH).toBe(48);
    const bytes = Buffer.from(token.slice(TOKEN_PREFIX.length), 'base64url');
    expect(bytes).toHaveLength(32);
    expect(bytes.toString('base64url')).toBe(token.slice(TOKEN_PREFIX.length));
    expect(isWellFormedToken(token)).toBe(true);
  });

  it('never repeats over 10,000 tokens', () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 10_000; i++) tokens.add(generateToken());
    expect(tokens.size).toBe(10_000);
  });

  it('hashes with SHA-256 hex', () => {
    // FIPS 180-2 test vector for "abc"
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashToken(generateToken())).toHaveLength(64);
  });

  it.each([
    ['wrong prefix', `iamx_${'A'.repeat(43)}`],
    ['too short', `iamt_${'A'.repeat(42)}`],
    ['too long', `iamt_${'A'.repeat(44)}`],
    ['standard base64 +', `iamt_${'A'.repeat(42)}+`],
    ['standard base64 /', `iamt_/${'A'.repeat(42)}`],
    ['padding', `iamt_${'A'.repeat(42)}=`],
    ['space', `iamt_${'A'.repeat(21)} ${'A'.repeat(21)}`],
    ['non-ASCII', `iamt_${'A'.repeat(42)}é`],
    ['empty', ''],
  ])('refuses a malformed token without a store round trip: %s', (_label, token) => {
    expect(isWellFormedToken(token)).toBe(false);
  });

  it('refuses non-strings', () => {
    expect(isWellFormedToken(undefined)).toBe(false);
    expect(isWellFormedToken(42)).toBe(false);
  });
});

const memoryClock = new FakeClock();
/** The registry's in-process backend, declared as it is, opening its store on the clock the test moves. */
const MEMORY_ON_TEST_CLOCK = defineTokenStore({
  kind: MEMORY_TOKEN_STORE.kind,
  chosenBy: MEMORY_TOKEN_STORE.chosenBy,
  capabilities: { events: false, persistent: false },
  open: ({ prefix }) => Promise.resolve({ store: new MemoryTokenStore({ prefix, clock: memoryClock }) }),
});
describeTokenStoreContract({
  name: 'memory',
  // Through the registry: the in-process store with the in-process events channel it is given.
  create: async (prefix) => (await openTokenStore({ url: null, prefix }, [MEMORY_ON_TEST_CLOCK])).store,
  now: () => memoryClock.now(),
  passes: (ms) => Promise.resolve(memoryClock.advance(ms)),
});

describe('escapeGlob', () => {
  it('escapes every Redis glob metacharacter', () => {
    expect(escapeGlob('a*b?c[d]e\\f')).toBe('a\\*b\\?c\\[d\\]e\\\\f');
    expect(escapeGlob('iam')).toBe('iam');
  });
});

const redisUrl = testRedisUrl();
if (!redisUrl) {
  notRun('token-store: Redis contract suite (REDIS_URL unset)');
} else {
  const connect = (prefix: string, url = redisUrl, extra: Partial<Parameters<typeof RedisTokenStore.connect>[0]> = {}) =>
    RedisTokenStore.connect({ url, prefix, connectTimeoutMs: 2000, commandTimeoutMs: 1000, ...extra });
  let admin: Redis;
  /** Purges a prefix over a direct connection (a relayed store may be the one that is cut off). */
  const purgeDirect = async (prefix: string): Promise<void> => {
    const direct = await connect(prefix);
    await direct.purge();
    await direct.close();
  };

  beforeAll(() => {
    admin = new Redis(redisUrl);
  });
  afterAll(async () => {
    await admin.quit();
  });

  describeTokenStoreContract({
    name: 'redis',
    create: (prefix) => connect(prefix),
    raw: () => admin,
    now: () => Date.now(),
    passes: async (ms, prefix, key) => {
      const full = `${prefix}:${key}`;
      const left = (await admin.pttl(full)) - ms;
      // -2: the key is gone. A wait to the end of its life waits for that, not for a TTL of 0 still held.
      await until(`${full} to have ${left > 0 ? `at most ${left} ms left` : 'expired'}`, async () => {
        const pttl = await admin.pttl(full);
        return pttl === -2 || (left > 0 && pttl <= left);
      });
    },
  });

  describe('RedisTokenStore (Redis only)', () => {
    it('purges only its own prefix, glob characters included', async () => {
      const base = `${uniquePrefix('glob')}-g`;
      const prefix = `${base}*?[x]`;
      const store = await connect(prefix);
      const outsiders = [
        `other-${randomBytes(6).toString('hex')}:x`,
        `${prefix}p:x`, // starts with the prefix text, then more characters
        `${base}ZZx:k`, // what the unescaped pattern "…-g*?[x]:*" would match
      ];
      try {
        await store.putToken(newHash(), makeRecord());
        for (const key of outsiders) await admin.set(key, '1', 'PX', 60_000);
        expect(await store.purge()).toBe(2); // the token and its user index
        for (const key of outsiders) expect(await admin.exists(key)).toBe(1);
      } finally {
        await admin.del(...outsiders);
        await store.close();
      }
    });

    /** Calls of one command since `server` started (`INFO commandstats`), e.g. `mget`. */
    const commandCalls = async (server: Redis, command: string): Promise<number> => {
      const info = await server.info('commandstats');
      const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
      return match ? Number(match[1]) : 0;
    };

    it('sends the token reads of one event-loop turn as one MGET, each caller getting its own record', async () => {
      // Command counters are server-wide: a private redis-server, so no other test's traffic is counted.
      const server = await startPrivateRedis();
      const store = await connect(uniquePrefix('coalesced'), server.url(), { slidingExpiry: false });
      try {
        const entries = Array.from({ length: 20 }, () => ({ hash: newHash(), record: makeRecord() }));
        for (const entry of entries) await store.putToken(entry.hash, entry.record);
        const unknown = Array.from({ length: 5 }, newHash);
        const [mgetBefore, getBefore] = [await commandCalls(server.admin, 'mget'), await commandCalls(server.admin, 'get')];
        const answers = await Promise.all([...entries.map((entry) => store.getToken(entry.hash)), ...unknown.map((hash) => store.getToken(hash))]);
        const [mgetAfter, getAfter] = [await commandCalls(server.admin, 'mget'), await commandCalls(server.admin, 'get')];
        expect(answers.slice(0, 20)).toEqual(entries.map((entry) => entry.record));
        expect(answers.slice(20)).toEqual([null, null, null, null, null]);
        expect(mgetAfter - mgetBefore).toBe(1);
        expect(getAfter - getBefore).toBe(0);
        // Reads of a later turn are a new batch.
        expect(await store.getToken(entries[3]!.hash)).toEqual(entries[3]!.record);
        expect((await commandCalls(server.admin, 'mget')) - mgetAfter).toBe(1);
      } finally {
        await store.close();
        await server.stop();
      }
    });

    it('rejects every read of a coalesced batch with StoreUnavailableError while Redis is away', async () => {
      const relay = new TcpRelay(new URL(redisUrl));
      const port = await relay.start(0);
      const url = new URL(redisUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      const prefix = uniquePrefix('coalesced-down');
      const store = await connect(prefix, url.toString(), { slidingExpiry: false, commandTimeoutMs: 900, maxReconnectDelayMs: 200 });
      try {
        const hash = newHash();
        const record = makeRecord();
        await store.putToken(hash, record);
        expect(await store.getToken(hash)).toEqual(record);
        await relay.stop();
        const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => store.getToken(hash)));
        for (const outcome of outcomes) {
          expect(outcome.status).toBe('rejected');
          expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
        }
        await relay.start(port);
        await waitFor('the store to recover', () => store.getToken(hash).then((got) => got !== null, () => false), 10_000);
      } finally {
        await relay.stop().catch(() => undefined);
        await purgeDirect(prefix);
        await store.close();
      }
    });

    it('refuses to start when Redis cannot be reached', async () => {
      const port = await freePort();
      const started = Date.now();
      await expect(
        RedisTokenStore.connect({ url: `redis://127.0.0.1:${port}`, prefix: 'x', connectTimeoutMs: 500 }),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(Date.now() - started).toBeLessThan(ANSWERED_NOT_HUNG_MS);
    });

    it('fails closed fast while Redis is away and recovers by itself', async () => {
      const relay = new TcpRelay(new URL(redisUrl));
      const port = await relay.start(0);
      const url = new URL(redisUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      const prefix = uniquePrefix('fail-closed');
      // A command timeout far above ANSWERED_NOT_HUNG_MS: a refusal within that bound cannot be the timeout firing.
      const store = await connect(prefix, url.toString(), { commandTimeoutMs: 6 * ANSWERED_NOT_HUNG_MS, maxReconnectDelayMs: 200 });
      const changes: boolean[] = [];
      try {
        const subscription = await store.subscribe(() => undefined, (connected) => changes.push(connected));
        const hash = newHash();
        const record = makeRecord();
        await store.putToken(hash, record);
        expect(await store.getToken(hash)).toEqual(record);

        await relay.stop();
        const started = Date.now();
        await expect(store.getToken(hash)).rejects.toBeInstanceOf(StoreUnavailableError);
        // A known-dead connection refuses at once (no offline queue), not after the command timeout (60 s here).
        expect(Date.now() - started).toBeLessThan(ANSWERED_NOT_HUNG_MS);
        await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
        await waitFor('the subscription to report the drop', () => !subscription.connected, 2000);
        expect(changes).toEqual([false]);

        await relay.start(port);
        await waitFor(
          'the store to recover',
          () => store.getToken(hash).then((got) => got !== null, () => false),
          10_000,
        );
        expect(await store.getToken(hash)).toEqual(record);
        await waitFor('the subscription to come back', () => subscription.connected, 10_000);
        expect(changes).toEqual([false, true]);
      } finally {
        await store.close();
        await relay.stop();
        await purgeDirect(prefix);
      }
    }, 60_000);

    it('rejects instead of hanging when Redis stops answering, then replaces the dead socket', async () => {
      const relay = new TcpRelay(new URL(redisUrl));
      const url = new URL(redisUrl);
      url.hostname = '127.0.0.1';
      url.port = String(await relay.start(0));
      const prefix = uniquePrefix('frozen');
      const store = await connect(prefix, url.toString(), { commandTimeoutMs: 300, maxReconnectDelayMs: 200 });
      try {
        const hash = newHash();
        const record = makeRecord();
        await store.putToken(hash, record);
        relay.freeze();
        const started = Date.now();
        await expect(store.getToken(hash)).rejects.toBeInstanceOf(StoreUnavailableError);
        expect(Date.now() - started).toBeLessThan(ANSWERED_NOT_HUNG_MS);
        // socketTimeout destroys the silent socket; the reconnect goes through a fresh relay connection.
        await waitFor(
          'a fresh connection',
          () => store.getToken(hash).then((got) => got !== null, () => false),
          10_000,
        );
        expect(await store.getToken(hash)).toEqual(record);
      } finally {
        await store.close();
        await relay.stop();
        await purgeDirect(prefix);
      }
    });

    it('resubscribes after its subscriber connection is killed and reports the gap', async () => {
      const store = await connect(uniquePrefix('sub-drop'));
      const changes: boolean[] = [];
      const received: StoreEvent[] = [];
      try {
        const subscription = await store.subscribe((event) => received.push(event), (connected) => changes.push(connected));
        const clients = (await admin.client('LIST')) as string;
        const line = clients.split('\n').find((entry) => entry.includes(` name=${store.connectionNames.subscriber} `));
        expect(line).toBeDefined();
        const id = /^id=(\d+) /.exec(line ?? '')?.[1];
        expect(await admin.client('KILL', 'ID', id ?? '')).toBe(1);

        await waitFor('onConnectionChange(false)', () => changes.length >= 1, 2000);
        expect(changes[0]).toBe(false);
        await waitFor('onConnectionChange(true)', () => changes.length >= 2, 10_000);
        expect(changes).toEqual([false, true]);
        expect(subscription.connected).toBe(true);

        const event: StoreEvent = { type: 'user-sessions-ended', userId: 'u-bob', reason: 'disabled' };
        await store.publish(event);
        await waitFor('the event after recovery', () => received.length === 1);
        expect(received).toEqual([event]);
      } finally {
        await store.close();
      }
    });
  });
}

/** A TCP relay in front of Redis that the test can cut (destroying every socket), freeze, and restore. */
class TcpRelay {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  /** Replies from Redis on these client sockets are swallowed: a server that stopped answering. */
  private readonly frozen = new WeakSet<net.Socket>();

  constructor(private readonly target: URL) {}

  start(port: number): Promise<number> {
    const server = net.createServer((client) => {
      const upstream = net.connect(Number(this.target.port || 6379), this.target.hostname);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          this.sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.on('data', (chunk: Buffer) => {
        if (!this.frozen.has(client)) client.write(chunk);
      });
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
    });
  }

  /** Every open connection stops receiving replies (no FIN, no RST); new connections work normally. */
  freeze(): void {
    for (const socket of this.sockets) this.frozen.add(socket);
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    if (server?.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
