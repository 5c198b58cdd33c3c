import { systemClock, type Clock } from '../domain/clock';
import type { TokenRecord } from '../domain/token-record';

interface Entry {
  record: TokenRecord;
  expiresAtMs: number;
  /** After this the entry is read from the store again (a deletion nobody announced is seen by then). */
  revalidateAtMs: number;
}

/**
 * In-process cache of verified sessions (tokenHash → TokenRecord), so a warm request makes no store round
 * trip. It is only as good as the revocation channel: `trusted()` must say whether the channel is up, and
 * while it is not, nothing is served from or added to the cache. A fetch that started before an
 * invalidation is not cached when it completes (generation check), so no revoked session can be re-added
 * by a slow read. Deletions nobody announces (a FLUSHALL, a failover that lost keys, a manual DEL) are seen
 * within `revalidateMs`: an entry older than that is read from the store again.
 */
export class SessionCache {
  private readonly entries = new Map<string, Entry>();
  private generation = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly trusted: () => boolean,
    /** `iam.token.cache.revalidate-interval`: the longest an entry is served without a store read. */
    private readonly revalidateMs = 2000,
    /** Starts the revalidation window of an entry; `get` is given its time by the caller. */
    private readonly clock: Clock = systemClock,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The generation to pass to `set` after a store read that started now. */
  snapshot(): number {
    return this.generation;
  }

  get(tokenHash: string, nowMs: number): TokenRecord | null {
    if (!this.trusted()) return null;
    const entry = this.entries.get(tokenHash);
    if (!entry) return null;
    if (entry.expiresAtMs <= nowMs || entry.revalidateAtMs <= nowMs) {
      this.entries.delete(tokenHash);
      return null;
    }
    // LRU: re-insert so that Map order is recency order.
    this.entries.delete(tokenHash);
    this.entries.set(tokenHash, entry);
    return entry.record;
  }

  /**
   * Caches a record read from the store. Sessions with an idle timeout are not cached: every request must
   * slide their expiry in the store.
   */
  set(tokenHash: string, record: TokenRecord, generationAtRead: number): void {
    if (this.maxEntries <= 0 || !this.trusted() || generationAtRead !== this.generation || record.idleTimeoutMs > 0) return;
    const expiresAtMs = Date.parse(record.expiresAt);
    this.entries.delete(tokenHash);
    this.entries.set(tokenHash, { record, expiresAtMs, revalidateAtMs: this.clock.now() + this.revalidateMs });
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  deleteToken(tokenHash: string): void {
    this.generation++;
    this.entries.delete(tokenHash);
  }

  deleteUser(userId: string): void {
    this.generation++;
    for (const [hash, entry] of this.entries) if (entry.record.principal.userId === userId) this.entries.delete(hash);
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
  }
}
