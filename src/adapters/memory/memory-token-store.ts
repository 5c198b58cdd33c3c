import { systemClock, type Clock } from '../../domain/clock';
import type { TokenRecord } from '../../domain/token-record';
import { StoreUnavailableError, type TokenStorage } from '../../domain/token-store';

/** Options of the in-process store. */
export interface MemoryTokenStoreOptions {
  /** Key prefix, kept for parity with Redis (`iam.token.store-prefix`); default `iam`. */
  prefix?: string;
  /** How often expired tokens and counters are swept so memory stays bounded; default 30 s. */
  sweepIntervalMs?: number;
  /** The time of every expiry, idle window and counter window (default the system clock; tests move their own). */
  clock?: Clock;
}

interface StoredToken {
  /** The record as JSON: every read returns a fresh copy, exactly as Redis would. */
  json: string;
  userId: string;
  sessionId: string;
  expiresAtMs: number;
  idleTimeoutMs: number;
  /** When the entry disappears: min(expiresAt, last use + idle window). */
  deadlineMs: number;
}

interface Counter {
  count: number;
  windowEndsAtMs: number;
}

const DEFAULT_SWEEP_INTERVAL_MS = 30_000;

/**
 * The token store of a single gateway instance (used when `REDIS_URL` is not set). Same
 * semantics as `RedisTokenStore`: TTLs (checked lazily on read and swept periodically, so a flood of
 * distinct puts cannot grow memory without bound), sliding idle timeouts, the per-user index, counters
 * with fixed windows. It has no events channel of its own (`capabilities.events: false` in ./backend.ts): the registry
 * gives it the in-process one, which is complete because no other process sees this store.
 */
export class MemoryTokenStore implements TokenStorage {
  readonly prefix: string;
  private readonly tokens = new Map<string, StoredToken>();
  private readonly userIndex = new Map<string, Map<string, string>>();
  private readonly counters = new Map<string, Counter>();
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly clock: Clock;
  private closed = false;

  constructor(options: MemoryTokenStoreOptions = {}) {
    this.prefix = options.prefix ?? 'iam';
    this.clock = options.clock ?? systemClock;
    this.sweepTimer = setInterval(() => this.sweep(), options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS);
    // The sweep must never keep the process alive on its own.
    this.sweepTimer.unref();
  }

  async getToken(tokenHash: string): Promise<TokenRecord | null> {
    this.assertOpen();
    const entry = this.tokens.get(tokenHash);
    if (!entry) return null;
    const now = this.clock.now();
    if (now >= entry.deadlineMs) {
      this.removeToken(tokenHash, entry);
      return null;
    }
    if (entry.idleTimeoutMs > 0) {
      entry.deadlineMs = Math.min(entry.expiresAtMs, now + entry.idleTimeoutMs);
    }
    return JSON.parse(entry.json) as TokenRecord;
  }

  async putToken(tokenHash: string, record: TokenRecord): Promise<void> {
    this.assertOpen();
    const expiresAtMs = parseExpiresAt(record);
    const now = this.clock.now();
    const existing = this.tokens.get(tokenHash);
    if (existing) this.removeToken(tokenHash, existing);
    // An already expired record is never stored (Redis refuses a PX <= 0 as well).
    if (expiresAtMs <= now) return;
    const idleTimeoutMs = record.idleTimeoutMs > 0 ? record.idleTimeoutMs : 0;
    const userId = record.principal.userId;
    this.tokens.set(tokenHash, {
      json: JSON.stringify(record),
      userId,
      sessionId: record.sessionId,
      expiresAtMs,
      idleTimeoutMs,
      deadlineMs: idleTimeoutMs > 0 ? Math.min(expiresAtMs, now + idleTimeoutMs) : expiresAtMs,
    });
    let sessions = this.userIndex.get(userId);
    if (!sessions) {
      sessions = new Map();
      this.userIndex.set(userId, sessions);
    }
    sessions.set(record.sessionId, tokenHash);
  }

  async deleteToken(tokenHash: string, userId: string, sessionId: string): Promise<boolean> {
    this.assertOpen();
    const entry = this.tokens.get(tokenHash);
    const existed = entry !== undefined && this.clock.now() < entry.deadlineMs;
    if (entry) this.removeToken(tokenHash, entry);
    const sessions = this.userIndex.get(userId);
    if (sessions) {
      sessions.delete(sessionId);
      if (sessions.size === 0) this.userIndex.delete(userId);
    }
    return existed;
  }

  async listUserTokens(userId: string): Promise<Map<string, string>> {
    this.assertOpen();
    const sessions = this.userIndex.get(userId);
    const live = new Map<string, string>();
    if (!sessions) return live;
    const now = this.clock.now();
    for (const [sessionId, tokenHash] of sessions) {
      const entry = this.tokens.get(tokenHash);
      if (entry && now < entry.deadlineMs) {
        live.set(sessionId, tokenHash);
      } else {
        if (entry) this.removeToken(tokenHash, entry);
        sessions.delete(sessionId);
      }
    }
    if (sessions.size === 0) this.userIndex.delete(userId);
    return live;
  }

  async hit(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }> {
    this.assertOpen();
    const now = this.clock.now();
    let counter = this.counters.get(key);
    if (!counter || now >= counter.windowEndsAtMs) {
      counter = { count: 0, windowEndsAtMs: now + windowMs };
      this.counters.set(key, counter);
    }
    counter.count += 1;
    return { count: counter.count, resetInMs: counter.windowEndsAtMs - now };
  }

  /** One synchronous step: no other call can run between the check and the increment. */
  async takeCounters(keys: readonly string[], limits: readonly number[], windowMs: number): Promise<{ allowed: boolean; resetInMs: number }> {
    this.assertOpen();
    const now = this.clock.now();
    for (let i = 0; i < keys.length; i++) {
      const counter = this.counters.get(keys[i]!);
      if (counter && now < counter.windowEndsAtMs && counter.count >= limits[i]!) return { allowed: false, resetInMs: counter.windowEndsAtMs - now };
    }
    for (const key of keys) {
      let counter = this.counters.get(key);
      if (!counter || now >= counter.windowEndsAtMs) {
        counter = { count: 0, windowEndsAtMs: now + windowMs };
        this.counters.set(key, counter);
      }
      counter.count += 1;
    }
    return { allowed: true, resetInMs: 0 };
  }

  async releaseCounter(key: string): Promise<void> {
    this.assertOpen();
    const counter = this.counters.get(key);
    if (counter && counter.count > 0) counter.count -= 1;
  }

  async peek(key: string): Promise<{ count: number; resetInMs: number }> {
    this.assertOpen();
    const now = this.clock.now();
    const counter = this.counters.get(key);
    if (!counter || now >= counter.windowEndsAtMs) return { count: 0, resetInMs: 0 };
    return { count: counter.count, resetInMs: counter.windowEndsAtMs - now };
  }

  async resetCounter(key: string): Promise<void> {
    this.assertOpen();
    this.counters.delete(key);
  }

  /** Counts entries as Redis would count keys: tokens, user indexes and counters still held. */
  async purge(): Promise<number> {
    this.assertOpen();
    const count = this.tokens.size + this.userIndex.size + this.counters.size;
    this.tokens.clear();
    this.userIndex.clear();
    this.counters.clear();
    return count;
  }

  async ping(): Promise<void> {
    this.assertOpen();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweepTimer);
  }

  /** Drops every expired token (with its index entry) and every elapsed counter window. */
  private sweep(): void {
    const now = this.clock.now();
    for (const [tokenHash, entry] of this.tokens) {
      if (now >= entry.deadlineMs) this.removeToken(tokenHash, entry);
    }
    for (const [key, counter] of this.counters) {
      if (now >= counter.windowEndsAtMs) this.counters.delete(key);
    }
  }

  private removeToken(tokenHash: string, entry: StoredToken): void {
    this.tokens.delete(tokenHash);
    const sessions = this.userIndex.get(entry.userId);
    // Only drop the index entry when it still points at this token.
    if (sessions && sessions.get(entry.sessionId) === tokenHash) {
      sessions.delete(entry.sessionId);
      if (sessions.size === 0) this.userIndex.delete(entry.userId);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('the in-process token store is closed');
  }
}

function parseExpiresAt(record: TokenRecord): number {
  const expiresAtMs = Date.parse(record.expiresAt);
  if (!Number.isFinite(expiresAtMs)) {
    throw new TypeError(`TokenRecord.expiresAt is not an ISO 8601 date: ${JSON.stringify(record.expiresAt)}`);
  }
  return expiresAtMs;
}
