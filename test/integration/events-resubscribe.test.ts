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

const runnable = privateRedisAvailable() || Boolean(process.env.CI);
if (!runnable) notRun('events-resubscribe (/usr/bin/redis-server missing; CI always has it)');
const describeIfRedisServer = runnable ? describe : describe.skip;

const GW_USER = { user: 'gw', password: 'gw-password' };

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
    gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), REDIS_URL: redis.url(GW_USER) });
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

  async function until(what: string, withinMs: number, probe: () => Promise<boolean>): Promise<void> {
    const started = Date.now();
    while (!(await probe())) {
      if (Date.now() - started > withinMs) throw new Error(`${what}: not within ${withinMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  it('#11.38: SUBSCRIBE refused on a live connection: readiness 503 and cache bypassed meanwhile; retried until subscribed, then events flow', async () => {
    const store = gateway.services!.store as RedisTokenStore;
    const tokenKey = (token: string): string => `${store.prefix}:token:${hashToken(token)}`;
    expect((await ready()).status).toBe(200);
    const alice = await login(gateway.url, 'alice');
    expect(await projects(alice.accessToken)).toBe(200);

    // Redis drops the subscriber (its channel became forbidden); it reconnects and SUBSCRIBE answers NOPERM.
    await redis.admin.call('ACL', 'SETUSER', GW_USER.user, 'resetchannels');
    await until('readiness reports the channel', 5000, async () => {
      const answer = await ready();
      return answer.status === 503 && answer.body.checks?.eventsChannel?.ok === false;
    });
    // The subscriber connection itself is up (a live connection without the subscription).
    await until('subscriber reconnected', 5000, async () => ((await redis.admin.call('CLIENT', 'LIST')) as string).includes(`name=${store.connectionNames.subscriber}`));
    expect(gateway.services!.subscription.connected).toBe(false);
    // Fail closed: the cache is bypassed, so a token deleted behind the gateway's back is refused at once.
    expect(await projects(alice.accessToken)).toBe(200);
    await redis.admin.del(tokenKey(alice.accessToken));
    expect(await projects(alice.accessToken)).toBe(401);
    // Several retries fail meanwhile; readiness keeps reporting it.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await ready()).status).toBe(503);

    await redis.admin.call('ACL', 'SETUSER', GW_USER.user, 'allchannels');
    await until('resubscribed and ready', 5000, async () => (await ready()).status === 200);
    expect(gateway.services!.subscription.connected).toBe(true);

    // Events flow again: a cached session is dropped by an event published by someone else.
    const bob = await login(gateway.url, 'bob');
    expect(await projects(bob.accessToken)).toBe(200);
    await redis.admin.del(tokenKey(bob.accessToken));
    expect(await projects(bob.accessToken)).toBe(200); // served from the trusted cache
    const event = { type: 'session-ended', sessionId: bob.sessionId, tokenHash: hashToken(bob.accessToken), userId: 'u-bob', reason: 'test' };
    await redis.admin.publish(`${store.prefix}:events`, JSON.stringify(event));
    await until('event delivered', 2000, async () => (await projects(bob.accessToken)) === 401);
  }, 40_000);
});
