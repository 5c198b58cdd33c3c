/**
 * The session cache's time (src/sessions/session-cache.ts) on an injected clock: an entry is read from the store
 * again once `revalidateMs` has passed since it was cached (a deletion nobody announced is seen by then), and never
 * served at or after its session's expiry.
 */
import type { TokenRecord } from '../../src/domain/token-record';
import { SessionCache } from '../../src/sessions/session-cache';
import { FakeClock } from '../support/clock';

const record = (expiresAtMs: number, idleTimeoutMs = 0): TokenRecord =>
  ({ principal: { userId: 'alice' }, expiresAt: new Date(expiresAtMs).toISOString(), idleTimeoutMs }) as unknown as TokenRecord;

describe('SessionCache on an injected clock', () => {
  it('serves an entry for revalidateMs after it was cached, then sends the read back to the store', () => {
    const clock = new FakeClock();
    const cache = new SessionCache(10, () => true, 2000, clock);
    const cached = record(clock.now() + 3_600_000);
    clock.advance(500); // the window starts when the entry is cached, not when the session began
    cache.set('h', cached, cache.snapshot());
    clock.advance(1999);
    expect(cache.get('h', clock.now())).toBe(cached);
    clock.advance(1);
    expect(cache.get('h', clock.now())).toBeNull();
    expect(cache.size).toBe(0);
  });

  it('never serves an entry at or after its session expiry, however recent', () => {
    const clock = new FakeClock();
    const cache = new SessionCache(10, () => true, 60_000, clock);
    const cached = record(clock.now() + 1000);
    cache.set('h', cached, cache.snapshot());
    clock.advance(999);
    expect(cache.get('h', clock.now())).toBe(cached);
    clock.advance(1);
    expect(cache.get('h', clock.now())).toBeNull();
  });

  it('does not cache a session with an idle timeout: every request must slide it in the store', () => {
    const clock = new FakeClock();
    const cache = new SessionCache(10, () => true, 2000, clock);
    cache.set('h', record(clock.now() + 3_600_000, 60_000), cache.snapshot());
    expect(cache.get('h', clock.now())).toBeNull();
  });
});
