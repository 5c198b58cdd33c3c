/**
 * docs/threat-model.md #11.38: a resubscribe to the revocation channel that fails on a live connection is retried with
 * backoff until it succeeds, and meanwhile readiness reports the channel down (503) and the local session
 * cache is bypassed (fail closed). The SUBSCRIBE is made to fail for real on a private redis-server: the
 * gateway's ACL user loses its channel permission (Redis drops its subscriber connection, which reconnects
 * and gets NOPERM on SUBSCRIBE), then gets it back. The shared Redis is never touched.
 */
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { hashToken } from '../../src/domain/token-hash';
import type { RedisTokenStore } from '../../src/adapters/redis/redis-token-store';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { privateRedisAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { timed } from '../support/timed-fetch';
import { notRun } from '../support/env';
import { until } from '../support/wait';

const runnable = privateRedisAvailable() || Boolean(process.env.CI);
if (!runnable) notRun('events-resubscribe (/usr/bin/redis-server missing; CI always has it)');
const describeIfRedisServer = runnable ? describe : describe.skip;

const GW_USER = { user: 'gw', password: 'gw-password' };

/**
 * "Answered, not hung" for what the gateway must do by itself (report the channel, resubscribe, drop a session on an
 * event): far above a loaded machine's latency; it only turns "never" into a failure naming what was awaited.
 */
const NOT_HUNG_MS = 10_000;

describeIfRedisServer('#11.38 the revocation channel comes back after a failed resubscribe', () => {
  let redis: PrivateRedis;
  let upstream: RecordingUpstream;
  let gateway: RunningGateway;
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    redis = await startPrivateRedis();
    await redis.admin.call('ACL', 'SETUSER', GW_USER.user, 'on', `>${GW_USER.password}`, '~*', '&*', '+@all');
    upstream = await startRecordingUpstream();
    // Cached sessions are never revalidated during the test: only an event can drop one (see 'event delivered').
    gateway = await startTestGateway(upstream.url, {
      IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
      REDIS_URL: redis.url(GW_USER),
      IAM_TOKEN_CACHE_REVALIDATE_INTERVAL: '10m',
    });
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    await redis?.stop();
    await db?.close();
  });

  const ready = async (): Promise<{ status: number; body: { checks?: Record<string, { ok: boolean }> } }> => {
    const answer = await timed(`${gateway.managementUrl}/health/ready`);
    return { status: answer.status, body: JSON.parse(answer.body) as { checks?: Record<string, { ok: boolean }> } };
  };
  const projects = async (token: string): Promise<number> => (await timed(`${gateway.url}/api/projects`, { headers: bearer(token) })).status;

  /** SUBSCRIBEs the private Redis refused the gateway's user (its ACL LOG, reset before the test). */
  const refusedSubscribes = async (): Promise<number> => {
    const entries = (await redis.admin.call('ACL', 'LOG')) as unknown[][];
    let total = 0;
    for (const entry of entries) {
      const fields = new Map<string, unknown>();
      for (let i = 0; i + 1 < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
      if (fields.get('reason') === 'channel' && fields.get('username') === GW_USER.user) total += Number(fields.get('count'));
    }
    return total;
  };

  it('#11.38: SUBSCRIBE refused on a live connection: readiness 503 and cache bypassed meanwhile; retried until subscribed, then events flow', async () => {
    const store = gateway.services!.store as RedisTokenStore;
    const tokenKey = (token: string): string => `${store.prefix}:token:${hashToken(token)}`;
    expect((await ready()).status).toBe(200);
    const alice = await login(gateway.url, 'alice');
    expect(await projects(alice.accessToken)).toBe(200);

    // Redis drops the subscriber (its channel became forbidden); it reconnects and SUBSCRIBE answers NOPERM.
    await redis.admin.call('ACL', 'LOG', 'RESET');
    await redis.admin.call('ACL', 'SETUSER', GW_USER.user, 'resetchannels');
    await until('readiness reports the channel', async () => {
      const answer = await ready();
      return answer.status === 503 && answer.body.checks?.eventsChannel?.ok === false;
    }, { within: NOT_HUNG_MS, every: 100 });
    // The subscriber connection itself is up (a live connection without the subscription).
    await until('subscriber reconnected', async () => ((await redis.admin.call('CLIENT', 'LIST')) as string).includes(`name=${store.connectionNames.subscriber}`), { within: NOT_HUNG_MS, every: 100 });
    expect(gateway.services!.subscription.connected).toBe(false);
    // Fail closed: the cache is bypassed, so a token deleted behind the gateway's back is refused at once.
    expect(await projects(alice.accessToken)).toBe(200);
    await redis.admin.del(tokenKey(alice.accessToken));
    expect(await projects(alice.accessToken)).toBe(401);
    // Several retries fail meanwhile (Redis logs each refused SUBSCRIBE); readiness keeps reporting it.
    const refusedBefore = await refusedSubscribes();
    expect(refusedBefore).toBeGreaterThan(0);
    await until('two more refused SUBSCRIBE retries', async () => (await refusedSubscribes()) >= refusedBefore + 2, { within: NOT_HUNG_MS, every: 100 });
    expect((await ready()).status).toBe(503);

    await redis.admin.call('ACL', 'SETUSER', GW_USER.user, 'allchannels');
    await until('resubscribed and ready', async () => (await ready()).status === 200, { within: NOT_HUNG_MS, every: 100 });
    expect(gateway.services!.subscription.connected).toBe(true);

    // Events flow again: a cached session is dropped by an event published by someone else.
    const bob = await login(gateway.url, 'bob');
    expect(await projects(bob.accessToken)).toBe(200);
    await redis.admin.del(tokenKey(bob.accessToken));
    expect(await projects(bob.accessToken)).toBe(200); // served from the trusted cache
    const event = { type: 'session-ended', sessionId: bob.sessionId, tokenHash: hashToken(bob.accessToken), userId: 'u-bob', reason: 'test' };
    await redis.admin.publish(`${store.prefix}:events`, JSON.stringify(event));
    await until('event delivered', async () => (await projects(bob.accessToken)) === 401, { within: NOT_HUNG_MS, every: 100 });
  }, 40_000);
});
