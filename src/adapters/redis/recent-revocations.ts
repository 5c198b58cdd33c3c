import type { StoreEvent } from '../../domain/token-record';

/** Events that end sessions: what a failover may have lost and is published again. */
const REVOCATION_EVENTS: ReadonlySet<StoreEvent['type']> = new Set(['session-ended', 'user-sessions-ended', 'tokens-flushed']);

/** At most this many of each kind are remembered (older ones first out); the durable record covers the rest. */
const MAX_ENTRIES = 10_000;

const RETRY_MS = 500;

interface Remembered<T> {
  at: number;
  value: T;
}

export interface RememberedDelete {
  tokenKey: string;
  indexKey: string;
  sessionId: string;
}

/**
 * The revocations this instance made in the last `windowMs`: the token deletes and the published ends. After
 * a failover the Redis store applies them again (see RedisTokenStore.replayRevocations). A replay that fails
 * (Redis still failing over) is retried every 500 ms until it succeeds or nothing is left in the window.
 */
export class RecentRevocations {
  private deletes: Array<Remembered<RememberedDelete>> = [];
  private events: Array<Remembered<string>> = [];
  private retryTimer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(readonly windowMs: number) {}

  deleted(tokenKey: string, indexKey: string, sessionId: string): void {
    this.deletes.push({ at: Date.now(), value: { tokenKey, indexKey, sessionId } });
    if (this.deletes.length > MAX_ENTRIES) this.deletes.splice(0, this.deletes.length - MAX_ENTRIES);
  }

  published(event: StoreEvent, message: string): void {
    if (!REVOCATION_EVENTS.has(event.type)) return;
    this.events.push({ at: Date.now(), value: message });
    if (this.events.length > MAX_ENTRIES) this.events.splice(0, this.events.length - MAX_ENTRIES);
  }

  /** What is still inside the window, oldest first. */
  snapshot(): { deletes: RememberedDelete[]; events: string[] } {
    const since = Date.now() - this.windowMs;
    this.deletes = this.deletes.filter((entry) => entry.at >= since);
    this.events = this.events.filter((entry) => entry.at >= since);
    return { deletes: this.deletes.map((entry) => entry.value), events: this.events.map((entry) => entry.value) };
  }

  /** Runs `replay` now (or after the one running), retrying on failure while the window holds anything. */
  schedule(replay: () => Promise<unknown>): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.running = true;
    replay().then(
      () => this.settle(replay, false),
      () => this.settle(replay, true),
    );
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
  }

  private settle(replay: () => Promise<unknown>, failed: boolean): void {
    this.running = false;
    if (this.stopped) return;
    const { deletes, events } = this.snapshot();
    if (this.again || (failed && deletes.length + events.length > 0)) {
      this.again = false;
      this.retryTimer = setTimeout(() => this.schedule(replay), failed ? RETRY_MS : 0);
      this.retryTimer.unref();
    }
  }
}
