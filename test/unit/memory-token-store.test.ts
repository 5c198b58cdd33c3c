/**
 * The in-process token store's time (src/adapters/memory/memory-token-store.ts) on an injected clock: absolute
 * expiry, the sliding idle window and its cap, counter windows and the periodic sweep, each checked on both sides of
 * its boundary without waiting. test/integration/token-store.test.ts runs the same contract against Redis too.
 */
import { MemoryTokenStore } from '../../src/adapters/memory/memory-token-store';
import { generateToken, hashToken } from '../../src/domain/token-hash';
import type { TokenRecord } from '../../src/domain/token-record';
import { FakeClock } from '../support/clock';

let clock: FakeClock;
let store: MemoryTokenStore;

beforeEach(() => {
  clock = new FakeClock();
  store = new MemoryTokenStore({ prefix: 'unit', clock });
});
afterEach(async () => {
  await store.close();
});

let sequence = 0;
function record(options: { userId?: string; ttlMs?: number; idleMs?: number } = {}): TokenRecord {
  sequence++;
  return {
    sessionId: `s${sequence}`,
    principal: { userId: options.userId ?? `u${sequence}`, identityId: 'id', identityDomain: 'example.com', activeProfileId: 'p', displayName: 'A', authorizationVersion: 1 },
    clientType: 'WEB',
    createdAt: new Date(clock.now()).toISOString(),
    expiresAt: new Date(clock.now() + (options.ttlMs ?? 60_000)).toISOString(),
    idleTimeoutMs: options.idleMs ?? 0,
  };
}

const newHash = (): string => hashToken(generateToken());

describe('MemoryTokenStore on an injected clock', () => {
  it('forgets a token, and its index entry, at its absolute expiry and not a millisecond before', async () => {
    const hash = newHash();
    const put = record({ userId: 'alice', ttlMs: 1000 });
    await store.putToken(hash, put);
    clock.advance(999);
    expect(await store.getToken(hash)).toEqual(put);
    clock.advance(1);
    expect(await store.getToken(hash)).toBeNull();
    expect((await store.listUserTokens('alice')).size).toBe(0);
    expect(await store.deleteToken(hash, 'alice', put.sessionId)).toBe(false);
  });

  it('never stores a record already expired by its clock', async () => {
    const hash = newHash();
    await store.putToken(hash, record({ ttlMs: 0 }));
    expect(await store.getToken(hash)).toBeNull();
  });

  it('slides the idle window on every read and forgets a token left idle for the whole window', async () => {
    const hash = newHash();
    await store.putToken(hash, record({ ttlMs: 60_000, idleMs: 1200 }));
    clock.advance(1199);
    expect(await store.getToken(hash)).not.toBeNull(); // read: idle until 1199 + 1200
    clock.advance(1199);
    expect(await store.getToken(hash)).not.toBeNull(); // past the first window, inside the slid one
    clock.advance(1200);
    expect(await store.getToken(hash)).toBeNull();
  });

  it('does not slide past the absolute expiry', async () => {
    const hash = newHash();
    await store.putToken(hash, record({ ttlMs: 1000, idleMs: 800 }));
    clock.advance(400);
    expect(await store.getToken(hash)).not.toBeNull(); // would slide to 1200: capped at 1000
    clock.advance(599);
    expect(await store.getToken(hash)).not.toBeNull();
    clock.advance(1);
    expect(await store.getToken(hash)).toBeNull();
  });

  it('lists only the live sessions of a user as their tokens expire', async () => {
    const [long, short] = [newHash(), newHash()];
    const longRecord = record({ userId: 'bob', ttlMs: 60_000 });
    const shortRecord = record({ userId: 'bob', ttlMs: 1000 });
    await store.putToken(long, longRecord);
    await store.putToken(short, shortRecord);
    expect((await store.listUserTokens('bob')).size).toBe(2);
    clock.advance(1000);
    expect(await store.listUserTokens('bob')).toEqual(new Map([[longRecord.sessionId, long]]));
  });

  it('counts hits in a fixed window that starts at the first hit and ends exactly at its length', async () => {
    expect(await store.hit('k', 2000)).toEqual({ count: 1, resetInMs: 2000 });
    clock.advance(300);
    expect(await store.hit('k', 2000)).toEqual({ count: 2, resetInMs: 1700 }); // the window did not restart
    clock.advance(1699);
    expect(await store.peek('k')).toEqual({ count: 2, resetInMs: 1 });
    clock.advance(1);
    expect(await store.peek('k')).toEqual({ count: 0, resetInMs: 0 });
    expect(await store.hit('k', 2000)).toEqual({ count: 1, resetInMs: 2000 }); // a new window
  });

  it('refuses takeCounters while a full window lasts and admits again when it ends', async () => {
    expect(await store.takeCounters(['a', 'b'], [2, 5], 10_000)).toEqual({ allowed: true, resetInMs: 0 });
    expect(await store.takeCounters(['a', 'b'], [2, 5], 10_000)).toEqual({ allowed: true, resetInMs: 0 });
    clock.advance(9_999);
    expect(await store.takeCounters(['a', 'b'], [2, 5], 10_000)).toEqual({ allowed: false, resetInMs: 1 });
    clock.advance(1);
    expect(await store.takeCounters(['a', 'b'], [2, 5], 10_000)).toEqual({ allowed: true, resetInMs: 0 });
    expect(await store.peek('b')).toEqual({ count: 1, resetInMs: 10_000 }); // both windows started again
  });
});

describe('MemoryTokenStore memory bound', () => {
  // Only the sweep's interval timer is faked: the store's time is the injected clock, promises run as usual.
  beforeEach(() => {
    jest.useFakeTimers({ doNotFake: ['Date', 'hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('sweeps a flood of expired distinct tokens and counters that nobody reads again', async () => {
    const sweeping = new MemoryTokenStore({ prefix: 'unit-sweep', sweepIntervalMs: 50, clock });
    try {
      for (let i = 0; i < 2000; i++) {
        await sweeping.putToken(newHash(), record({ ttlMs: 100 }));
        await sweeping.hit(`k${i}`, 100);
      }
      await sweeping.putToken(newHash(), record({ userId: 'kept', ttlMs: 60_000 }));
      clock.advance(100);
      jest.advanceTimersByTime(50);
      // Nothing was read: only the sweep can have released them. Left: the live token and its user index.
      expect(await sweeping.purge()).toBe(2);
    } finally {
      await sweeping.close();
    }
  });
});
