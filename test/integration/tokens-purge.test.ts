/**
 * `iam-gateway tokens purge` deletes every key under the configured prefix (the
 * rollback step), reports how many, and leaves every other key alone.
 */
import Redis from 'ioredis';
import { main } from '../../src/cli/main';
import { RedisTokenStore } from '../../src/adapters/redis/redis-token-store';
import { generateToken, hashToken } from '../../src/domain/token-hash';
import { describeWithRedis, testRedisUrl, uniquePrefix } from '../support/env';

const redisUrl = testRedisUrl();

async function runCli(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  let out = '';
  const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  try {
    return { code: await main(args), out };
  } finally {
    spy.mockRestore();
    process.env = saved;
  }
}

describeWithRedis('tokens purge', () => {
  it('deletes the keys under the prefix only and says how many', async () => {
    const prefix = uniquePrefix('purge');
    const store = await RedisTokenStore.connect({ url: redisUrl!, prefix });
    const admin = new Redis(redisUrl!);
    try {
      const now = Date.now();
      for (let i = 0; i < 3; i++) {
        await store.putToken(hashToken(generateToken()), {
          sessionId: `s${i}`,
          principal: { userId: 'u1', identityId: 'i1', identityDomain: 'd', activeProfileId: null, authorizationVersion: 1 },
          clientType: 'WEB',
          createdAt: new Date(now).toISOString(),
          expiresAt: new Date(now + 60_000).toISOString(),
          idleTimeoutMs: 0,
        });
      }
      const before = (await admin.keys(`${prefix}:*`)).length;
      expect(before).toBe(4); // three tokens and the user's session index
      await admin.set(`${prefix}x:outside`, '1');
      await admin.set(`other-${prefix}:outside`, '1');

      const { code, out } = await runCli(['tokens', 'purge'], { REDIS_URL: redisUrl!, IAM_TOKEN_STORE_PREFIX: prefix });
      expect(code).toBe(0);
      expect(out).toContain(`deleted ${before} keys`);
      expect(await admin.keys(`${prefix}:*`)).toEqual([]);
      expect(await admin.get(`${prefix}x:outside`)).toBe('1');
      expect(await admin.get(`other-${prefix}:outside`)).toBe('1');
    } finally {
      await admin.del(`${prefix}x:outside`, `other-${prefix}:outside`);
      admin.disconnect();
      await store.close();
    }
  });
});

it('refuses an unknown tokens action with usage and exit code 2', async () => {
  const errors: string[] = [];
  const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    errors.push(String(chunk));
    return true;
  });
  try {
    expect(await main(['tokens', 'wipe'])).toBe(2);
  } finally {
    spy.mockRestore();
  }
  expect(errors.join('')).toContain('usage: iam-gateway tokens purge');
});
