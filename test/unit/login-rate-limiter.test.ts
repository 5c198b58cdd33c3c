/**
 * The failed-login limits' window (src/auth/login-rate-limiter.ts): its time is the token store's, here the
 * in-process store on an injected clock, so the window's end is checked on both sides without waiting for it.
 */
import { MemoryTokenStore } from '../../src/adapters/memory/memory-token-store';
import { LoginRateLimiter } from '../../src/auth/login-rate-limiter';
import { ProblemError } from '../../src/domain/problem';
import { FakeClock } from '../support/clock';

async function refusal(attempt: Promise<unknown>): Promise<{ code: string; retryAfter: string | undefined }> {
  const error = await attempt.then(
    () => null,
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof ProblemError)) throw new Error(`expected a ProblemError, got ${String(error)}`);
  return { code: error.code, retryAfter: error.headers['Retry-After'] };
}

describe('LoginRateLimiter window on an injected clock', () => {
  let store: MemoryTokenStore;
  afterEach(async () => {
    await store.close();
  });

  it('refuses a used-up username and address until the window ends, with Retry-After counting down', async () => {
    const clock = new FakeClock();
    store = new MemoryTokenStore({ prefix: 'unit', clock });
    const limiter = new LoginRateLimiter(store, { maxFailures: 2, maxFailuresPerAddress: 10, windowMs: 60_000 });
    await limiter.acquire('alice', '192.0.2.1');
    await limiter.acquire('alice', '192.0.2.1');
    expect(await refusal(limiter.acquire('alice', '192.0.2.1'))).toEqual({ code: 'IAM_RATE_LIMITED', retryAfter: '60' });
    clock.advance(58_500);
    expect(await refusal(limiter.acquire('alice', '192.0.2.1'))).toEqual({ code: 'IAM_RATE_LIMITED', retryAfter: '2' });
    clock.advance(1_499);
    expect(await refusal(limiter.acquire('alice', '192.0.2.1'))).toEqual({ code: 'IAM_RATE_LIMITED', retryAfter: '1' });
    clock.advance(1);
    await expect(limiter.acquire('alice', '192.0.2.1')).resolves.toBeDefined();
  });

  it('refuses a used-up address for any username until its window ends', async () => {
    const clock = new FakeClock();
    store = new MemoryTokenStore({ prefix: 'unit', clock });
    const limiter = new LoginRateLimiter(store, { maxFailures: 5, maxFailuresPerAddress: 2, windowMs: 30_000 });
    await limiter.acquire('alice', '192.0.2.7');
    await limiter.acquireAddress('192.0.2.7');
    expect((await refusal(limiter.acquire('bob', '192.0.2.7'))).code).toBe('IAM_RATE_LIMITED');
    await expect(limiter.acquire('bob', '192.0.2.8')).resolves.toBeDefined(); // another address is not affected
    clock.advance(30_000);
    await expect(limiter.acquire('bob', '192.0.2.7')).resolves.toBeDefined();
  });
});
