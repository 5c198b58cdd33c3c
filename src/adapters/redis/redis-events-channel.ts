import type { Redis } from 'ioredis';
import type { StoreEvent } from '../../domain/token-record';
import { StoreUnavailableError, type EventSubscription } from '../../domain/token-store';
import { toUnavailable, type StoreLogger } from './redis-connection';

interface RedisListener {
  onEvent: (event: StoreEvent) => void;
  onConnectionChange?: (connected: boolean) => void;
  active: boolean;
  /** The state this listener last saw; undefined until its own subscribe() resolved (no initial call). */
  lastSeen?: boolean;
}

const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set([
  'session-ended',
  'user-sessions-ended',
  'authorization-changed',
  'profile-changed',
  'template-changed',
  'tokens-flushed',
]);

/**
 * The events channel side of `RedisTokenStore`, on its dedicated subscriber connection: subscription and
 * resubscription after a reconnect, the `connected` state listeners see, the liveness ping, and delivery of
 * events to listeners. The connection itself is opened and closed by the store.
 */
export class RedisEventsChannel {
  private readonly listeners = new Set<RedisListener>();
  private channelSubscribed = false;
  /** Incremented whenever the subscriber socket closes: a SUBSCRIBE confirmed on an older socket is stale. */
  private subscriberEpoch = 0;
  private pendingSubscribe: { epoch: number; promise: Promise<void> } | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** A resubscribe that failed on a live connection is retried on this timer (docs/threat-model.md #11.38). */
  private retryTimer: NodeJS.Timeout | undefined;
  private retryAttempt = 0;

  constructor(
    /** The channel name, `{prefix}:events`. */
    readonly channel: string,
    private readonly subscriber: Redis,
    private readonly logger: StoreLogger | undefined,
    /** Upper bound of the resubscribe backoff (the store's reconnect bound). */
    private readonly maxRetryDelayMs = 2000,
  ) {
    subscriber.on('message', (channel: string, message: string) => this.deliver(channel, message));
    subscriber.on('close', () => this.onSubscriberClosed());
    subscriber.on('ready', () => this.onSubscriberReady());
  }

  /**
   * Registers a listener and resolves once the channel subscription is confirmed. The channel stays
   * subscribed for the life of the store; closing a subscription only detaches its listener.
   */
  async subscribe(
    onEvent: (event: StoreEvent) => void,
    onConnectionChange?: (connected: boolean) => void,
  ): Promise<EventSubscription> {
    if (this.closed) throw new StoreUnavailableError('the Redis token store is closed');
    const listener: RedisListener = { onEvent, onConnectionChange, active: true };
    this.listeners.add(listener);
    try {
      await this.ensureChannelSubscribed();
    } catch (error) {
      this.listeners.delete(listener);
      throw toUnavailable(error);
    }
    listener.lastSeen = this.channelSubscribed;
    const channelSubscribed = (): boolean => this.channelSubscribed;
    const forget = (): boolean => this.listeners.delete(listener);
    return {
      get connected() {
        return listener.active && channelSubscribed();
      },
      async close() {
        listener.active = false;
        forget();
      },
    };
  }

  /**
   * A subscriber socket can die without a FIN (NAT timeout, failover); PING through it so `socketTimeout`
   * notices, the socket is replaced, and `connected` turns false meanwhile.
   */
  startPing(intervalMs: number): void {
    this.pingTimer = setInterval(() => {
      if (this.subscriber.status !== 'ready') return;
      this.subscriber.ping().catch(() => {
        if (!this.closed && this.subscriber.status === 'ready') this.subscriber.disconnect(true);
      });
    }, intervalMs);
    this.pingTimer.unref();
  }

  /** Stops the ping and detaches every listener (no connection-change call); the store quits the socket. */
  stop(): void {
    this.closed = true;
    clearInterval(this.pingTimer);
    clearTimeout(this.retryTimer);
    this.channelSubscribed = false;
    for (const listener of this.listeners) listener.active = false;
    this.listeners.clear();
  }

  private ensureChannelSubscribed(): Promise<void> {
    if (this.channelSubscribed) return Promise.resolve();
    const epoch = this.subscriberEpoch;
    if (this.pendingSubscribe?.epoch === epoch) return this.pendingSubscribe.promise;
    const promise = this.subscriber.subscribe(this.channel).then(() => {
      // Only a confirmation received on the current socket counts.
      if (epoch === this.subscriberEpoch && !this.closed) this.setChannelSubscribed(true);
    });
    const pending = { epoch, promise };
    this.pendingSubscribe = pending;
    const clear = (): void => {
      if (this.pendingSubscribe === pending) this.pendingSubscribe = undefined;
    };
    promise.then(clear, clear);
    return promise;
  }

  private onSubscriberClosed(): void {
    this.subscriberEpoch += 1;
    // The next 'ready' starts over.
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.retryAttempt = 0;
    if (this.channelSubscribed) this.setChannelSubscribed(false);
  }

  private onSubscriberReady(): void {
    this.resubscribe();
  }

  /**
   * Subscribes again after a reconnect. A SUBSCRIBE can fail on a connection that stays up (an error reply
   * such as NOPERM, a command timeout); no new 'ready' would come, so it is retried with a capped backoff
   * while the connection lives. Until it succeeds subscriptions report connected = false: the local caches
   * are bypassed (fail closed) and readiness says so.
   */
  private resubscribe(): void {
    this.retryTimer = undefined;
    if (this.closed || this.listeners.size === 0 || this.channelSubscribed || this.subscriber.status !== 'ready') return;
    const epoch = this.subscriberEpoch;
    this.ensureChannelSubscribed().then(
      () => {
        this.retryAttempt = 0;
      },
      (error: unknown) => {
        if (this.retryAttempt === 0) this.logger?.warn({ err: error }, 'token store: resubscribing to the events channel failed; retrying');
        if (this.closed || epoch !== this.subscriberEpoch || this.retryTimer) return;
        const delay = Math.min(100 * 2 ** Math.min(this.retryAttempt, 10), this.maxRetryDelayMs);
        this.retryAttempt++;
        this.retryTimer = setTimeout(() => this.resubscribe(), delay);
        this.retryTimer.unref();
      },
    );
  }

  private setChannelSubscribed(connected: boolean): void {
    this.channelSubscribed = connected;
    for (const listener of this.listeners) {
      if (!listener.active || listener.lastSeen === undefined || listener.lastSeen === connected) continue;
      listener.lastSeen = connected;
      if (!listener.onConnectionChange) continue;
      try {
        listener.onConnectionChange(connected);
      } catch (error) {
        this.logger?.warn({ err: error }, 'token store: onConnectionChange listener threw');
      }
    }
  }

  private deliver(channel: string, message: string): void {
    if (channel !== this.channel) return;
    let event: StoreEvent;
    try {
      const parsed: unknown = JSON.parse(message);
      const type = (parsed as { type?: unknown } | null)?.type;
      if (typeof type !== 'string' || !KNOWN_EVENT_TYPES.has(type)) throw new Error('unknown event type');
      event = parsed as StoreEvent;
    } catch (error) {
      this.logger?.warn({ err: error, channel }, 'token store: malformed event ignored');
      return;
    }
    for (const listener of this.listeners) {
      if (!listener.active) continue;
      try {
        listener.onEvent(event);
      } catch (error) {
        this.logger?.warn({ err: error, type: event.type }, 'token store: event listener threw');
      }
    }
  }
}
