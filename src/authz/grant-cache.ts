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
 * than `max` entries: the oldest entry is evicted on insert.
 */
export class GrantCache<V> {
  private readonly entries = new Map<string, V>();

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`GrantCache max must be a positive integer, got ${max}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value for `key` (marking it most recently used), or undefined. */
  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    // Re-insert to move the key to the end of the Map's order (most recent).
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  /** Stores `value` as the most recently used entry, evicting the least recently used beyond `max`. */
  set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    while (this.entries.size > this.max) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** Removes every entry for which `predicate` is true; returns how many were removed. */
  deleteWhere(predicate: (value: V, key: string) => boolean): number {
    let removed = 0;
    // Deleting the current key while iterating a Map is safe (ECMA-262 Map iteration semantics).
    for (const [key, value] of this.entries) {
      if (predicate(value, key)) {
        this.entries.delete(key);
        removed++;
      }
    }
    return removed;
  }

  clear(): void {
    this.entries.clear();
  }
}
