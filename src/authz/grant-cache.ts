/** Optional memory bound: the approximate bytes of a value, and the most all values may weigh together. */
export interface CacheWeight<V> {
  maxBytes: number;
  weigh(value: V): number;
}

/**
 * The cache key of one (user, profile) pair. Ids are free-form (Auth0-style `auth0|abc`, `:`...), so a
 * separator alone is not enough: `auth0` + `victim|admin` and `auth0|victim` + `admin` would share
 * `auth0|victim|admin`. The user id's length in front makes the split unambiguous (injective).
 */
export function grantKey(userId: string, profileId: string): string {
  return `${userId.length}:${userId}|${profileId}`;
}

/**
 * A bounded least-recently-used cache over a `Map` (insertion order = recency order). Never holds more
 * than `max` entries nor, with a weight, more than `maxBytes` approximate bytes: the least recently used
 * entries are evicted on insert (a value heavier than `maxBytes` alone is not kept).
 */
export class GrantCache<V> {
  private readonly entries = new Map<string, V>();
  private readonly weights = new Map<string, number>();
  private totalBytes = 0;
  /** The key last in the Map's order (the most recently used), or undefined when not known. */
  private newest: string | undefined = undefined;

  constructor(
    readonly max: number,
    private readonly weight: CacheWeight<V> | null = null,
  ) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`GrantCache max must be a positive integer, got ${max}`);
    if (weight !== null && !(weight.maxBytes >= 1)) throw new RangeError(`GrantCache maxBytes must be positive, got ${weight.maxBytes}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Approximate bytes of the values held (0 without a weight). */
  get bytes(): number {
    return this.totalBytes;
  }

  /** The value for `key` (marking it most recently used), or undefined. */
  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    // Already the most recent (the same user deciding again, 100 checks of one call): nothing to move.
    if (key === this.newest) return value;
    // Re-insert to move the key to the end of the Map's order (most recent).
    this.entries.delete(key);
    this.entries.set(key, value);
    this.newest = key;
    return value;
  }

  /** Stores `value` as the most recently used entry, evicting the least recently used beyond `max`. */
  set(key: string, value: V): void {
    this.delete(key);
    this.entries.set(key, value);
    this.newest = key;
    if (this.weight !== null) {
      const bytes = this.weight.weigh(value);
      this.weights.set(key, bytes);
      this.totalBytes += bytes;
    }
    while (this.entries.size > this.max || (this.weight !== null && this.totalBytes > this.weight.maxBytes && this.entries.size > 0)) {
      this.delete(this.entries.keys().next().value as string);
    }
  }

  private delete(key: string): void {
    if (!this.entries.delete(key)) return;
    if (key === this.newest) this.newest = undefined;
    this.totalBytes -= this.weights.get(key) ?? 0;
    this.weights.delete(key);
  }

  /** Removes every entry for which `predicate` is true; returns how many were removed. */
  deleteWhere(predicate: (value: V, key: string) => boolean): number {
    let removed = 0;
    // Deleting the current key while iterating a Map is safe (ECMA-262 Map iteration semantics).
    for (const [key, value] of this.entries) {
      if (predicate(value, key)) {
        this.delete(key);
        removed++;
      }
    }
    return removed;
  }

  clear(): void {
    this.entries.clear();
    this.newest = undefined;
    this.weights.clear();
    this.totalBytes = 0;
  }
}
