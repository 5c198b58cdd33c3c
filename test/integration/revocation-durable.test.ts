/**
 * #11.29: Redis is not the only authority on revocation. A private redis-server (never the shared one) is
 * rewritten the way a restore from an old snapshot, a failover to a replica that missed the deletes, or an
 * evicting maxmemory-policy would leave it; every instance still refuses what PostgreSQL says ended.
 */
import { join } from 'node:path';
import Redis from 'ioredis';
import type { RunningGateway } from '../../src/app/start-gateway';
import { RedisTokenStore } from '../../src/adapters/redis/redis-token-store';
import { hashToken } from '../../src/domain/token-hash';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { uniquePrefix, notRun } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { privateRedisAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

if (!privateRedisAvailable()) notRun('revocation-durable (no /usr/bin/redis-server; CI always has it)');
const describeWithRedisServer = privateRedisAvailable() ? describe : describe.skip;

const status = (url: string, token: string): Promise<number> => fetch(`${url}/api/projects`, { headers: bearer(token) }).then((r) => r.status);
const shared = {
  IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
  IAM_PROVISION_FILE: join(ROOT, 'config/provision.example.yaml'),
  IAM_AUTHENTICATOR_PATH: join(ROOT, 'config/users.example.yaml'),
};

describeWithRedisServer('#11.29 revocations survive the token store', () => {
  let db: TestDatabase;
  let upstream: RecordingUpstream;
  let redis: PrivateRedis;
  let direct: Redis;
  let a: RunningGateway;
  let b: RunningGateway;
  const prefix = uniquePrefix('durable');
  const env = (): Record<string, string> => ({ ...shared, REDIS_URL: redis.url(), IAM_TOKEN_STORE_PREFIX: prefix });

  beforeAll(async () => {
    db = await createTestDatabase();
    upstream = await startRecordingUpstream();
    redis = await startPrivateRedis();
    direct = new Redis(redis.url());
    a = await startTestGateway(upstream.url, env());
    b = await startTestGateway(upstream.url, env());
  }, 60_000);

  afterAll(async () => {
    await a?.close();
    await b?.close();
    direct?.disconnect();
    await redis?.stop();
    await upstream?.close();
    await db?.close();
  });

  it('#11.29: a logged-out token that an old snapshot brings back is refused by every instance, also one started afterwards', async () => {
    const session = await login(a.url, 'alice');
    expect(await status(b.url, session.accessToken)).toBe(200);
    const key = `${prefix}:token:${hashToken(session.accessToken)}`;
    const snapshot = await direct.dumpBuffer(key);
    const ttl = await direct.pttl(key);
    expect((await fetch(`${a.url}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) })).status).toBe(204);
    expect(await direct.exists(key)).toBe(0);
    // The restore: the token key is back as it was before the logout.
    await direct.restore(key, ttl, snapshot);
    expect(await status(a.url, session.accessToken)).toBe(401);
    expect(await status(b.url, session.accessToken)).toBe(401);
    const c = await startTestGateway(upstream.url, env());
    try {
      expect(await status(c.url, session.accessToken)).toBe(401);
    } finally {
      await c.close();
    }
  });

  it('#11.29: "revoke all" reaches sessions whose per-user index was evicted, and a replica that missed the deletes serves none of them', async () => {
    const adminToken = (await login(b.url, 'admin')).accessToken;
    const first = await login(a.url, 'bob');
    const second = await login(b.url, 'bob', 'bob-password', 'API');
    expect(await status(b.url, first.accessToken)).toBe(200);
    expect(await status(a.url, second.accessToken)).toBe(200);
    const keys = [first, second].map((session) => `${prefix}:token:${hashToken(session.accessToken)}`);
    const snapshots = await Promise.all(keys.map(async (key) => ({ key, dump: await direct.dumpBuffer(key), ttl: await direct.pttl(key) })));
    // Evicted: the index that "revoke all" reads is gone; the token keys are still there.
    await direct.del(`${prefix}:user:u-bob:sessions`);
    const revoke = await fetch(`${b.url}/iam/admin/users/u-bob/sessions/revoke`, { method: 'POST', headers: bearer(adminToken) });
    expect(revoke.status).toBe(200);
    for (const gateway of [a, b]) for (const session of [first, second]) expect(await status(gateway.url, session.accessToken)).toBe(401);
    // A failover to a replica that missed the deletes: every token key is back.
    for (const { key, dump, ttl } of snapshots) await direct.restore(key, ttl, dump, 'REPLACE');
    for (const gateway of [a, b]) for (const session of [first, second]) expect(await status(gateway.url, session.accessToken)).toBe(401);
    // New logins are not affected.
    expect(await status(a.url, (await login(b.url, 'bob')).accessToken)).toBe(200);
  });
});

describeWithRedisServer('#11.29 the Redis eviction policy is checked at start', () => {
  let upstream: RecordingUpstream;
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    upstream = await startRecordingUpstream();
  });
  afterAll(async () => {
    await upstream?.close();
    await db?.close();
  });

  async function withRedis(args: string[], work: (redis: PrivateRedis) => Promise<void>): Promise<void> {
    const redis = await startPrivateRedis(args);
    try {
      await work(redis);
    } finally {
      await redis.stop();
    }
  }

  /** Readiness tells an unauthenticated caller only `ok` per component (#11.16); the policy is on the store. */
  async function readiness(gateway: RunningGateway): Promise<{ status: number; tokenStore: unknown }> {
    const response = await fetch(`${gateway.managementUrl}/health/ready`);
    const body = (await response.json()) as { checks: { tokenStore: unknown } };
    return { status: response.status, tokenStore: body.checks.tokenStore };
  }

  it('#11.29: an allkeys-* policy (which may evict session indexes and rate-limit counters) is refused at start, naming it', async () => {
    await withRedis(['--maxmemory-policy', 'allkeys-lru'], async (redis) => {
      await expect(startTestGateway(upstream.url, { ...shared, REDIS_URL: redis.url() })).rejects.toThrow(/maxmemory-policy is "allkeys-lru"/);
    });
  });

  it('#11.29: noeviction and volatile-* start (readiness ok, the policy read at start); a server with CONFIG disabled is tolerated', async () => {
    for (const [args, expected] of [
      [['--maxmemory-policy', 'noeviction'], 'noeviction'],
      [['--maxmemory-policy', 'volatile-lru'], 'volatile-lru'],
      [['--rename-command', 'CONFIG', ''], null],
    ] as Array<[string[], string | null]>) {
      await withRedis(args, async (redis) => {
        const gateway = await startTestGateway(upstream.url, { ...shared, REDIS_URL: redis.url() });
        try {
          const ready = await readiness(gateway);
          expect(ready.status).toBe(200);
          expect(ready.tokenStore).toEqual({ ok: true });
          const store = await RedisTokenStore.connect({ url: redis.url(), prefix: uniquePrefix('eviction') });
          try {
            expect(store.evictionPolicy).toBe(expected);
          } finally {
            await store.close();
          }
        } finally {
          await gateway.close();
        }
      });
    }
  });

  it('round 3: a volatile-* policy is warned about loudly at start, and the evictions it makes are in the metrics', async () => {
    await withRedis(['--maxmemory', '4mb', '--maxmemory-policy', 'volatile-lru'], async (redis) => {
      const warnings: string[] = [];
      const logger = { warn: (_fields: object, message: string) => void warnings.push(message), error: () => undefined, info: () => undefined };
      const store = await RedisTokenStore.connect({ url: redis.url(), prefix: uniquePrefix('eviction'), logger });
      await store.close();
      expect(warnings.join('\n')).toMatch(/maxmemory-policy is "volatile-lru".*EVICTS LIVE SESSION TOKENS/);

      const gateway = await startTestGateway(upstream.url, { ...shared, REDIS_URL: redis.url() });
      const filler = new Redis(redis.url());
      try {
        const scrape = async (): Promise<string> => (await fetch(`${gateway.managementUrl}/metrics`)).text();
        expect(await scrape()).toMatch(/^iam_token_store_eviction_policy\{policy="volatile-lru"\} 1$/m);
        expect(await scrape()).toMatch(/^iam_token_store_evicted_keys 0$/m);
        // Memory pressure: keys with a TTL (as every token has) until Redis starts evicting them.
        const value = 'x'.repeat(4096);
        for (let i = 0; i < 4000; i++) await filler.set(`filler:${i}`, value, 'EX', 600);
        const evicted = Number(/^iam_token_store_evicted_keys (\d+)$/m.exec(await scrape())?.[1]);
        expect(evicted).toBeGreaterThan(0);
      } finally {
        filler.disconnect();
        await gateway.close();
      }
    });
  });
});
