import type { StoreEvent, TokenRecord } from './token-record';

/** A live subscription to the events channel. */
export interface EventSubscription {
  /** True while the channel is connected and subscribed; caches must not be trusted while false. */
  readonly connected: boolean;
  close(): Promise<void>;
}

/*
 * The token store's seams: each consumer takes the narrowest one it uses (or a `Pick` of it); `TokenStore` is their
 * intersection, what the adapters implement and app/ wires. Every method rejects with a `StoreUnavailableError`
 * when the store cannot be reached.
 */

/** The live tokens: `{prefix}:token:{tokenHash}` and each user's index `{prefix}:user:{userId}:sessions`. */
export interface TokenRecords {
  /**
   * The record for a token hash, or null when absent or expired. One round trip. When the record has an
   * idle timeout, the same round trip slides its expiry to min(idle window, absolute expiry).
   */
  getToken(tokenHash: string): Promise<TokenRecord | null>;
  /** Stores a record with TTL until `expiresAt` (or the idle window) and indexes it under its user. */
  putToken(tokenHash: string, record: TokenRecord): Promise<void>;
  /** Deletes a token and its index entry; resolves true when it existed. */
  deleteToken(tokenHash: string, userId: string, sessionId: string): Promise<boolean>;
  /** sessionId → tokenHash of a user's live tokens (entries whose token expired are pruned). */
  listUserTokens(userId: string): Promise<Map<string, string>>;
  /** Deletes every key under the prefix, counters included (the rollback step); resolves the number deleted. */
  purge(): Promise<number>;
}

/** The events channel `{prefix}:events`: what one instance changed, told to every instance. */
export interface TokenEvents {
  /** Publishes an event to every instance (this one included). */
  publish(event: StoreEvent): Promise<void>;
  /** Subscribes to events; `onConnectionChange` is called whenever the channel drops or comes back. */
  subscribe(onEvent: (event: StoreEvent) => void, onConnectionChange?: (connected: boolean) => void): Promise<EventSubscription>;
}

/** Shared counters `{prefix}:ratelimit:{key}`: the login rate limits and single-use marks. */
export interface TokenCounters {
  /**
   * Fixed-window counter for rate limiting: increments `{prefix}:ratelimit:{key}` and returns the count and
   * the ms left in the window (the window starts at the first increment).
   */
  hit(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }>;
  /** The current count of a counter without changing it. */
  peek(key: string): Promise<{ count: number; resetInMs: number }>;
  /**
   * Rate limiting without a check-then-increment race: in one atomic step, if every counter `keys[i]` is
   * below `limits[i]`, increments them all (a window of `windowMs` starts at a counter's first increment)
   * and answers allowed; otherwise changes nothing and answers the ms until the first full counter resets.
   */
  takeCounters(keys: readonly string[], limits: readonly number[], windowMs: number): Promise<{ allowed: boolean; resetInMs: number }>;
  /** Gives back one unit taken by {@link takeCounters} (never below zero; the window is kept). */
  releaseCounter(key: string): Promise<void>;
  resetCounter(key: string): Promise<void>;
}

/**
 * A store's own part: the records and counters under one prefix, without the events channel. What a backend without
 * pub/sub implements (adapters/registry.ts gives it an in-process channel: its events reach this process only).
 */
export interface TokenStorage extends TokenRecords, TokenCounters {
  readonly prefix: string;
  /** Resolves when the store answers. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The shared token store: every seam above under one prefix. Which backend serves it (Redis, in-process, …) is the
 * composition root's choice (adapters/registry.ts), never a property its consumers branch on.
 * Keys (all under the configured prefix):
 *  - `{prefix}:token:{tokenHash}` → TokenRecord (JSON), TTL = time to `expiresAt` (or the idle window, whichever is shorter)
 *  - `{prefix}:user:{userId}:sessions` → sessionId → tokenHash of that user's live tokens
 *  - `{prefix}:ratelimit:{key}` → counters for the login rate limit
 *  - channel `{prefix}:events` → JSON StoreEvent
 */
export interface TokenStore extends TokenStorage, TokenEvents {}

/** The store could not be reached or answered with an error: callers fail closed (503). */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
