/**
 * The test run leaves nothing behind in the shared Redis: every store prefix of a run starts with
 * test-<run id>- (test/support/env.ts), and the global teardown removes exactly those keys.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { describeWithRedis, testRedisUrl, testRunPrefix, uniquePrefix } from '../support/env';
import { removeKeysStartingWith } from '../support/run-keys';

describeWithRedis('test hygiene', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(testRedisUrl()!);
  });
  afterAll(() => redis.quit());

  it('gives every store prefix of this run the run id', () => {
    expect(process.env.IAM_TEST_RUN_ID).toMatch(/^[0-9a-f]{8}$/);
    expect(uniquePrefix('gw').startsWith(testRunPrefix())).toBe(true);
  });

  it("removes a run's keys and nothing else (glob characters in the prefix are literal)", async () => {
    const run = `test-hygiene-${randomBytes(4).toString('hex')}-[a]-`;
    const other = `test-hygiene-${randomBytes(4).toString('hex')}-`;
    const mine = Array.from({ length: 1500 }, (_, i) => `${run}gw-1:token:${i}`);
    await redis.mset(...mine.flatMap((key) => [key, '1']));
    await redis.set(`${other}gw:token`, '1');
    await redis.set(`${run.replace('[a]', 'a')}gw:token`, '1'); // what an unescaped [a] would match
    expect(await removeKeysStartingWith(testRedisUrl()!, run)).toBe(1500);
    expect(await redis.exists(mine[0]!, mine[1499]!)).toBe(0);
    expect(await redis.exists(`${other}gw:token`, `${run.replace('[a]', 'a')}gw:token`)).toBe(2);
    await redis.del(`${other}gw:token`, `${run.replace('[a]', 'a')}gw:token`);
  });
});
