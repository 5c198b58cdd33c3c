import type { StoreEvent, TokenRecord } from '../domain/token-record';
import type { EventSubscription, TokenStore } from '../domain/token-store';
import type { GatewayMetrics } from './metrics';

/** `operation` label values of `iam_store_operations_total`: one per kind of round trip (a bounded set). */
export const STORE_OPERATIONS = ['get', 'put', 'delete', 'list', 'publish', 'subscribe', 'rate_limit', 'purge', 'ping'] as const;
export type StoreOperation = (typeof STORE_OPERATIONS)[number];

/** The event types the channel carries (StoreEvent); anything else is counted as `other`, so labels stay bounded. */
const EVENT_TYPES: ReadonlySet<string> = new Set(['session-ended', 'user-sessions-ended', 'authorization-changed', 'profile-changed', 'template-changed', 'tokens-flushed']);

/** Reactions for one operation, bound once: settling a call only adds 1 to a plain number. */
interface OperationReactions {
  ok: () => void;
  error: () => void;
}

type Child = { inc(): void };

export type TokenStoreMetrics = Pick<GatewayMetrics, 'storeOperations' | 'beforeStoreOperationsScrape' | 'revocationEvents' | 'revocationPropagation'>;

/**
 * The token store as the gateway's components see it: the adapter (Redis or in-process), counted at its
 * boundary, so both stores report the same metrics without touching either adapter.
 *  - `iam_store_operations_total{operation, result}`: every call, ok or error (a rejection; the adapters'
 *    methods are async, so they never throw synchronously).
 *  - `iam_revocation_events_total{direction="sent"}` for every event published, and every published event
 *    carries `sentAt` (epoch ms, this instance's clock);
 *  - `iam_revocation_events_total{direction="received"}` and `iam_revocation_propagation_seconds` (now − sentAt,
 *    not below 0; events without `sentAt`, from older instances, are counted but not timed) for every event
 *    heard on the channel.
 * Cost on the request path (a cache-missed `getToken`): the caller gets the adapter's own promise back (no
 * promise in between, no added tick); the count is a reaction registered on it beside the caller's (its
 * functions bound here once: no closure, no label object per call) that adds 1 to a plain number, handed to
 * the prom-client counter at scrape time. About 30 ns per call against an in-process store's ~800 ns
 * (a prom-client `inc` per call would cost ~250 ns: it hashes its labels every time).
 */
export class InstrumentedTokenStore implements TokenStore {
  readonly prefix: string;
  private readonly reactions: Record<StoreOperation, OperationReactions>;
  /** Calls settled since start, [operation index * 2 + (0 ok | 1 error)], and how many the counter has. */
  private readonly settled = new Float64Array(STORE_OPERATIONS.length * 2);
  private readonly reported = new Float64Array(STORE_OPERATIONS.length * 2);
  private readonly children: Array<{ inc(value?: number): void }> = [];
  private readonly sent = new Map<string, Child>();
  private readonly received = new Map<string, Child>();

  constructor(
    /** The adapter itself. */
    readonly inner: TokenStore,
    private readonly metrics: TokenStoreMetrics,
  ) {
    this.prefix = inner.prefix;
    const reactions = {} as Record<StoreOperation, OperationReactions>;
    const settled = this.settled;
    STORE_OPERATIONS.forEach((operation, index) => {
      const ok = index * 2;
      const error = ok + 1;
      this.children[ok] = metrics.storeOperations.labels(operation, 'ok');
      this.children[error] = metrics.storeOperations.labels(operation, 'error');
      // Both series exist from the start (at 0), so increase() sees the first error.
      this.children[ok]!.inc(0);
      this.children[error]!.inc(0);
      reactions[operation] = { ok: () => void settled[ok]!++, error: () => void settled[error]!++ };
    });
    this.reactions = reactions;
    metrics.beforeStoreOperationsScrape(() => this.flush());
  }

  getToken(tokenHash: string): Promise<TokenRecord | null> {
    return this.track(this.reactions.get, this.inner.getToken(tokenHash));
  }

  putToken(tokenHash: string, record: TokenRecord): Promise<void> {
    return this.track(this.reactions.put, this.inner.putToken(tokenHash, record));
  }

  deleteToken(tokenHash: string, userId: string, sessionId: string): Promise<boolean> {
    return this.track(this.reactions.delete, this.inner.deleteToken(tokenHash, userId, sessionId));
  }

  listUserTokens(userId: string): Promise<Map<string, string>> {
    return this.track(this.reactions.list, this.inner.listUserTokens(userId));
  }

  /** Publishes `event` stamped with `sentAt` (now, epoch ms); counted as sent once the store took it. */
  publish(event: StoreEvent): Promise<void> {
    const published = this.inner.publish({ ...event, sentAt: Date.now() });
    const sent = this.child(this.sent, 'sent', event.type);
    published.then(() => sent.inc(), () => undefined);
    return this.track(this.reactions.publish, published);
  }

  subscribe(onEvent: (event: StoreEvent) => void, onConnectionChange?: (connected: boolean) => void): Promise<EventSubscription> {
    const counted = (event: StoreEvent): void => {
      this.child(this.received, 'received', event.type).inc();
      const sentAt = event.sentAt;
      if (typeof sentAt === 'number' && Number.isFinite(sentAt)) this.metrics.revocationPropagation.observe(Math.max(0, Date.now() - sentAt) / 1000);
      onEvent(event);
    };
    return this.track(this.reactions.subscribe, this.inner.subscribe(counted, onConnectionChange));
  }

  hit(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }> {
    return this.track(this.reactions.rate_limit, this.inner.hit(key, windowMs));
  }

  peek(key: string): Promise<{ count: number; resetInMs: number }> {
    return this.track(this.reactions.rate_limit, this.inner.peek(key));
  }

  takeCounters(keys: readonly string[], limits: readonly number[], windowMs: number): Promise<{ allowed: boolean; resetInMs: number }> {
    return this.track(this.reactions.rate_limit, this.inner.takeCounters(keys, limits, windowMs));
  }

  releaseCounter(key: string): Promise<void> {
    return this.track(this.reactions.rate_limit, this.inner.releaseCounter(key));
  }

  resetCounter(key: string): Promise<void> {
    return this.track(this.reactions.rate_limit, this.inner.resetCounter(key));
  }

  purge(): Promise<number> {
    return this.track(this.reactions.purge, this.inner.purge());
  }

  ping(): Promise<void> {
    return this.track(this.reactions.ping, this.inner.ping());
  }

  /** Closing is not a round trip worth counting (once, at stop). */
  close(): Promise<void> {
    return this.inner.close();
  }

  /**
   * Counts `pending` when it settles and returns it unchanged: the caller awaits the adapter's promise itself.
   * The reaction's own (derived) promise always fulfils, so a rejection is never reported twice as unhandled.
   */
  private track<T>(reactions: OperationReactions, pending: Promise<T>): Promise<T> {
    pending.then(reactions.ok, reactions.error);
    return pending;
  }

  /** Adds what settled since the last scrape to `iam_store_operations_total`. */
  private flush(): void {
    for (let i = 0; i < this.settled.length; i++) {
      const delta = this.settled[i]! - this.reported[i]!;
      if (delta > 0) {
        this.children[i]!.inc(delta);
        this.reported[i] = this.settled[i]!;
      }
    }
  }

  private child(children: Map<string, Child>, direction: 'sent' | 'received', type: string): Child {
    const label = EVENT_TYPES.has(type) ? type : 'other';
    let child = children.get(label);
    if (child === undefined) {
      child = this.metrics.revocationEvents.labels(direction, label);
      children.set(label, child);
    }
    return child;
  }
}
