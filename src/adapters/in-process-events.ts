import type { StoreEvent } from '../domain/token-record';
import { StoreUnavailableError, type EventSubscription, type TokenEvents, type TokenStorage, type TokenStore } from '../domain/token-store';

interface Listener {
  onEvent: (event: StoreEvent) => void;
  active: boolean;
}

/**
 * The events channel of a backend without pub/sub (`capabilities.events: false`): what this process publishes reaches
 * this process's subscribers, nobody else. Complete for a store only one process sees (the in-process store); the
 * registry hands it out so no backend special-cases its missing channel.
 */
class InProcessEvents implements TokenEvents {
  private readonly listeners = new Set<Listener>();
  private closed = false;

  async publish(event: StoreEvent): Promise<void> {
    this.assertOpen();
    // Serialize once, parse per delivery: subscribers get their own copy, as they would from Redis.
    const message = JSON.stringify(event);
    for (const listener of this.listeners) {
      // Asynchronous like a real channel: never re-enters the publisher's call stack.
      setImmediate(() => {
        if (!listener.active) return;
        try {
          listener.onEvent(JSON.parse(message) as StoreEvent);
        } catch {
          // A failing subscriber must not break delivery to the others.
        }
      });
    }
  }

  async subscribe(onEvent: (event: StoreEvent) => void): Promise<EventSubscription> {
    this.assertOpen();
    const listener: Listener = { onEvent, active: true };
    this.listeners.add(listener);
    const listeners = this.listeners;
    // In-process delivery never drops, so onConnectionChange has nothing to report.
    return {
      get connected() {
        return listener.active;
      },
      async close() {
        listener.active = false;
        listeners.delete(listener);
      },
    };
  }

  close(): void {
    this.closed = true;
    for (const listener of this.listeners) listener.active = false;
    this.listeners.clear();
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('the in-process events channel is closed');
  }
}

/** `storage` with an in-process events channel: a whole TokenStore, closed together. */
export function withInProcessEvents(storage: TokenStorage): TokenStore {
  const events = new InProcessEvents();
  return {
    prefix: storage.prefix,
    getToken: (tokenHash) => storage.getToken(tokenHash),
    putToken: (tokenHash, record) => storage.putToken(tokenHash, record),
    deleteToken: (tokenHash, userId, sessionId) => storage.deleteToken(tokenHash, userId, sessionId),
    listUserTokens: (userId) => storage.listUserTokens(userId),
    purge: () => storage.purge(),
    hit: (key, windowMs) => storage.hit(key, windowMs),
    peek: (key) => storage.peek(key),
    takeCounters: (keys, limits, windowMs) => storage.takeCounters(keys, limits, windowMs),
    releaseCounter: (key) => storage.releaseCounter(key),
    resetCounter: (key) => storage.resetCounter(key),
    ping: () => storage.ping(),
    publish: (event) => events.publish(event),
    subscribe: (onEvent) => events.subscribe(onEvent),
    async close() {
      events.close();
      await storage.close();
    },
  };
}
