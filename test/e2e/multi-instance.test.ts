/**
 * Several gateway instances sharing one Redis and one PostgreSQL behave as one. A session revoked
 * or logged out through instance A is refused by instance B on its very next request — also when B's
 * pub/sub connection was cut and restored in between. Needs a real Redis (the in-process store is single
 * instance by design).
 */
import { join } from 'node:path';
import Redis from 'ioredis';
import type { RunningGateway } from '../../src/app/start-gateway';
import type { RedisTokenStore } from '../../src/adapters/redis/redis-token-store';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { describeWithRedis, testRedisUrl, uniquePrefix } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { until } from '../support/wait';

const redisUrl = testRedisUrl();

/**
 * "Done, not hung": for what an instance does by itself about its events connection (notice the loss, reconnect and
 * resubscribe). Far above a loaded machine's latency; it only turns "never" into a failure.
 */
const NOT_HUNG_MS = 10_000;

describeWithRedis('two gateway instances sharing Redis', () => {
  let upstream: RecordingUpstream;
  let a: RunningGateway;
  let b: RunningGateway;
  let db: TestDatabase;
  let admin: Redis;

  beforeAll(async () => {
    db = await createTestDatabase();
    upstream = await startRecordingUpstream();
    const shared = { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), IAM_TOKEN_STORE_PREFIX: uniquePrefix('multi'), REDIS_URL: redisUrl! };
    a = await startTestGateway(upstream.url, shared);
    b = await startTestGateway(upstream.url, shared);
    admin = new Redis(redisUrl!);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await db?.close();
    admin?.disconnect();
  });

  const projects = (base: string, token: string): Promise<number> => fetch(`${base}/api/projects`, { headers: bearer(token) }).then((r) => r.status);

  it('a token issued by A works on B', async () => {
    const session = await login(a.url, 'alice');
    expect(await projects(b.url, session.accessToken)).toBe(200);
  });

  it('revocation through A is refused by B on its very next request (B had the session cached)', async () => {
    const keeper = await login(a.url, 'alice');
    const victim = await login(a.url, 'alice', 'alice-password', 'API');
    expect(await projects(b.url, victim.accessToken)).toBe(200);
    expect(await projects(b.url, victim.accessToken)).toBe(200);
    const revoke = await fetch(`${a.url}/iam/sessions/${victim.sessionId}/revoke`, { method: 'POST', headers: bearer(keeper.accessToken) });
    expect(revoke.status).toBe(204);
    expect(await projects(b.url, victim.accessToken)).toBe(401);
  });

  it('logout through B is refused by A on its next request', async () => {
    const session = await login(a.url, 'bob');
    expect(await projects(a.url, session.accessToken)).toBe(200);
    expect((await fetch(`${b.url}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) })).status).toBe(204);
    expect(await projects(a.url, session.accessToken)).toBe(401);
  });

  it('after B lost its events connection, B still refuses a session revoked meanwhile, and recovers', async () => {
    const keeper = await login(a.url, 'bob');
    const victim = await login(a.url, 'bob', 'bob-password', 'API');
    expect(await projects(b.url, victim.accessToken)).toBe(200); // cached on B

    const store = b.services!.store as RedisTokenStore;
    const clients = String(await admin.call('CLIENT', 'LIST')).split('\n');
    const line = clients.find((l) => l.includes(`name=${store.connectionNames.subscriber}`));
    expect(line).toBeDefined();
    const id = /\bid=(\d+)/.exec(line!)![1]!;
    await admin.call('CLIENT', 'KILL', 'ID', id);
    // B notices the lost connection by itself (and from then on bypasses, then clears, its cache). Its first reconnect
    // comes after a backoff (100 ms or more), so a probe this frequent sees the gap.
    await until('B to notice its events connection is gone', () => !b.services!.subscription.connected, { within: NOT_HUNG_MS, every: 5 });

    // Revoked while B's channel is down: B must not serve its cached copy.
    expect((await fetch(`${a.url}/iam/sessions/${victim.sessionId}/revoke`, { method: 'POST', headers: bearer(keeper.accessToken) })).status).toBe(204);
    expect(await projects(b.url, victim.accessToken)).toBe(401);

    // The channel comes back by itself; B keeps working and keeps refusing the revoked token.
    await until('B to resubscribe by itself', () => b.services!.subscription.connected, { within: NOT_HUNG_MS, every: 50 });
    expect(await projects(b.url, victim.accessToken)).toBe(401);
    expect(await projects(b.url, keeper.accessToken)).toBe(200);

    // And events flow again: a revocation through A after recovery reaches B's cache.
    const next = await login(a.url, 'bob', 'bob-password', 'API');
    expect(await projects(b.url, next.accessToken)).toBe(200);
    expect((await fetch(`${a.url}/iam/sessions/${next.sessionId}/revoke`, { method: 'POST', headers: bearer(keeper.accessToken) })).status).toBe(204);
    expect(await projects(b.url, next.accessToken)).toBe(401);
  });

  it('revoke-others through A reaches B', async () => {
    const current = await login(a.url, 'alice');
    const other = await login(b.url, 'alice', 'alice-password', 'API');
    expect(await projects(b.url, other.accessToken)).toBe(200);
    expect((await fetch(`${a.url}/iam/sessions/revoke-others`, { method: 'POST', headers: bearer(current.accessToken) })).status).toBe(204);
    expect(await projects(b.url, other.accessToken)).toBe(401);
    expect(await projects(b.url, current.accessToken)).toBe(200);
  });
});
