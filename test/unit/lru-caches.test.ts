/**
 * The two LRU caches of the request path (GrantCache, SessionCache): random operation sequences, checked against a
 * plain model of a bounded LRU after every step: the same keys held, the same values answered, the same entry
 * evicted. Keys are fresh string copies, so the caches must compare them by value. Each step compares plainly and
 * calls `expect` only on a mismatch (with the seed and step), so the 160,000 checks cost milliseconds, not seconds.
 */
import { GrantCache } from '../../src/authz/grant-cache';
import { SessionCache } from '../../src/sessions/session-cache';
import type { TokenRecord } from '../../src/domain/token-record';
import { seededRandom } from '../support/random';

/** A bounded LRU as an array in recency order (oldest first): obviously right, and slow. */
class ModelLru {
  readonly order: Array<[string, number]> = [];
  constructor(private readonly max: number) {}
  get(key: string): number | undefined {
    const at = this.order.findIndex(([k]) => k === key);
    if (at < 0) return undefined;
    const [entry] = this.order.splice(at, 1);
    this.order.push(entry!);
    return entry![1];
  }
  set(key: string, value: number): void {
    this.delete(key);
    this.order.push([key, value]);
    if (this.order.length > this.max) this.order.shift();
  }
  delete(key: string): void {
    const at = this.order.findIndex(([k]) => k === key);
    if (at >= 0) this.order.splice(at, 1);
  }
}

const KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];

describe('GrantCache against a model LRU', () => {
  it.each([1, 2, 3, 4])('max %i: 2,000 random get/set/delete/clear steps agree', (max) => {
    for (let seed = 1; seed <= 10; seed++) {
      const next = seededRandom(seed * 31 + max);
      const cache = new GrantCache<number>(max);
      const model = new ModelLru(max);
      for (let step = 0; step < 2000; step++) {
        // Fresh string copies: the cache must compare keys by value, not by identity.
        const key = `${KEYS[Math.floor(next() * KEYS.length)]!}`.slice(0);
        const roll = next();
        if (roll < 0.55) {
          const got = cache.get(key);
          const want = model.get(key);
          if (got !== want) expect({ seed, step, key, got }).toEqual({ seed, step, key, got: want });
        } else if (roll < 0.9) {
          cache.set(key, step);
          model.set(key, step);
        } else if (roll < 0.98) {
          cache.deleteWhere((_value, k) => k === key);
          model.delete(key);
        } else {
          cache.clear();
          model.order.length = 0;
        }
        if (cache.size !== model.order.length) expect({ seed, step, size: cache.size }).toEqual({ seed, step, size: model.order.length });
      }
    }
  });
});

describe('SessionCache against a model LRU', () => {
  // The cache's own clock: a fixed instant, with every record valid for an hour after it.
  const NOW = Date.parse('2026-11-28T08:00:00Z');
  const record = (userId: string): TokenRecord => ({ principal: { userId }, expiresAt: new Date(NOW + 3_600_000).toISOString(), idleTimeoutMs: 0 }) as unknown as TokenRecord;

  it.each([1, 2, 3, 4])('max %i: 2,000 random get/set/deleteToken/deleteUser steps agree', (max) => {
    for (let seed = 1; seed <= 10; seed++) {
      const next = seededRandom(seed * 17 + max);
      const cache = new SessionCache(max, () => true, 60_000, { now: () => NOW });
      const model = new ModelLru(max);
      const values = new Map<TokenRecord, number>();
      const userOf = (key: string): string => `u${Number(key.slice(1)) % 2}`;
      for (let step = 0; step < 2000; step++) {
        const key = `${KEYS[Math.floor(next() * KEYS.length)]!}`.slice(0);
        const roll = next();
        if (roll < 0.55) {
          const hit = cache.get(key, NOW);
          const got = hit === null ? undefined : values.get(hit);
          const want = model.get(key);
          if (got !== want) expect({ seed, step, key, got }).toEqual({ seed, step, key, got: want });
        } else if (roll < 0.9) {
          const value = record(userOf(key));
          values.set(value, step);
          cache.set(key, value, cache.snapshot());
          model.set(key, step);
        } else if (roll < 0.96) {
          cache.deleteToken(key);
          model.delete(key);
        } else {
          const userId = userOf(key);
          cache.deleteUser(userId);
          for (const [k] of [...model.order]) if (userOf(k) === userId) model.delete(k);
        }
        if (cache.size !== model.order.length) expect({ seed, step, size: cache.size }).toEqual({ seed, step, size: model.order.length });
      }
    }
  });
});
