/**
 * docs/threat-model.md #11.34: token deletions made outside the gateway reach the caches of every instance.
 * `iam-gateway tokens purge` tells every instance at once (a `tokens-flushed` event); a deletion nobody
 * announces (FLUSHALL, a failover that lost keys, a manual DEL) is seen within
 * `iam.token.cache.revalidate-interval` (default 2 s), because a cached session is read from the store again
 * after that long. Two gateway instances share a PRIVATE redis-server spawned here (FLUSHALL is never sent
 * to the shared one).
 */
import { join } from 'node:path';
import { main } from '../../src/cli/main';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { uniquePrefix, notRun } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { privateRedisAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { timed } from '../support/timed-fetch';
import { until } from '../support/wait';

const runnable = privateRedisAvailable() || Boolean(process.env.CI);
if (!runnable) notRun('external-token-deletion (/usr/bin/redis-server missing; CI always has it)');
const describeIfRedisServer = runnable ? describe : describe.skip;

/**
 * How long a deleted token may keep working: 5x the default `iam.token.cache.revalidate-interval` (2 s), room for a
 * loaded test machine. It still proves the revalidation: without it a cached session is served until it expires
 * (`iam.token.ttl`, 8 h) or until an event nobody sends here.
 */
const FLUSH_BOUND_MS = 5 * 2000;

/**
 * "Answered, not hung" for the purge event: nothing but the event drops cache entries nobody reads (the cache evicts
 * lazily, on a read), so any bound proves the event; this one only turns a lost event into a failure.
 */
const EVENT_NOT_HUNG_MS = 10_000;

describeIfRedisServer('#11.34 token deletions made outside the gateway reach every cache', () => {
  let redis: PrivateRedis;
  let upstream: RecordingUpstream;
  let a: RunningGateway;
  let b: RunningGateway;
  let db: TestDatabase;
  const prefix = uniquePrefix('flush');

  beforeAll(async () => {
    db = await createTestDatabase();
    redis = await startPrivateRedis();
    upstream = await startRecordingUpstream();
    const shared = { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), REDIS_URL: redis.url(), IAM_TOKEN_STORE_PREFIX: prefix };
    a = await startTestGateway(upstream.url, shared);
    b = await startTestGateway(upstream.url, shared);
  }, 30_000);

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
    await db?.close();
  });

  const projects = async (gateway: RunningGateway, token: string): Promise<number> => (await timed(`${gateway.url}/api/projects`, { headers: bearer(token) })).status;
  const cacheEntries = async (gateway: RunningGateway): Promise<number> => {
    const match = /^iam_session_cache_entries (\d+)$/m.exec((await timed(`${gateway.managementUrl}/metrics`)).body);
    return Number(match?.[1]);
  };

  async function warmSessions(): Promise<string[]> {
    const tokens = [(await login(a.url, 'alice')).accessToken, (await login(b.url, 'bob')).accessToken];
    for (const gateway of [a, b]) for (const token of tokens) expect(await projects(gateway, token)).toBe(200);
    return tokens;
  }

  /** Waits until every token is refused on every instance; until then a token is served (200), never failed another way. */
  async function refusedEverywhere(tokens: string[]): Promise<void> {
    const seen = new Set<number>();
    await until(
      'the deleted tokens refused on every instance',
      async () => {
        const statuses = await Promise.all([a, b].flatMap((gateway) => tokens.map((token) => projects(gateway, token))));
        for (const status of statuses) seen.add(status);
        return statuses.every((status) => status === 401) || null;
      },
      { within: FLUSH_BOUND_MS, every: 50 },
    );
    expect([...seen].filter((status) => status !== 200 && status !== 401)).toEqual([]);
  }

  it('#11.34: after a FLUSHALL, cached tokens stop working on every instance within the revalidation bound', async () => {
    const tokens = await warmSessions();
    await redis.admin.flushall();
    await refusedEverywhere(tokens);
  }, FLUSH_BOUND_MS + 30_000);

  it('#11.34: a token deleted by hand (DEL) stops working on every instance within the revalidation bound', async () => {
    const [alice] = await warmSessions();
    const keys = await redis.admin.keys(`${prefix}:token:*`);
    expect(keys.length).toBeGreaterThan(0);
    await redis.admin.del(...keys);
    await refusedEverywhere([alice!]);
  }, FLUSH_BOUND_MS + 30_000);

  it('#11.34: `iam-gateway tokens purge` empties the session cache of every instance at once', async () => {
    const tokens = await warmSessions();
    for (const gateway of [a, b]) expect(await cacheEntries(gateway)).toBeGreaterThanOrEqual(2);
    const saved = { ...process.env };
    Object.assign(process.env, { REDIS_URL: redis.url(), IAM_TOKEN_STORE_PREFIX: prefix, DATABASE_URL: process.env.DATABASE_URL ?? '' });
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await main(['tokens', 'purge'])).toBe(0);
    } finally {
      write.mockRestore();
      process.env = saved;
    }
    // Cached entries are dropped by the event, not lazily at their next use.
    for (const gateway of [a, b]) {
      await until(`an empty session cache on ${gateway.url}`, async () => (await cacheEntries(gateway)) === 0, { within: EVENT_NOT_HUNG_MS, every: 20 });
    }
    for (const gateway of [a, b]) for (const token of tokens) expect(await projects(gateway, token)).toBe(401);
  }, 2 * EVENT_NOT_HUNG_MS + 30_000);
});
