import type { Logger } from '../observability/logger';
import type { ProblemError } from '../domain/problem';
import type { StoreEvent } from '../domain/token-record';

/** The session an open tunnel was authorized with (null for a public route without one). */
export interface TunnelSession {
  tokenHash: string;
  userId: string;
  /** Absolute end of the session (epoch ms): the tunnel closes then at the latest. */
  expiresAtMs: number;
}

/** What a tunnel needs to stay open: its session, and a fresh authorization of its handshake. */
export interface TunnelBinding {
  session: TunnelSession | null;
  /**
   * Authorizes the handshake again exactly as the proxy would now: null while it is still allowed, else the
   * problem a new handshake would get. A problem (or a rejection) closes the tunnel.
   */
  recheck: () => Promise<ProblemError | null>;
}

interface Tunnel extends TunnelBinding {
  close(reason: string): void;
  checking: boolean;
  expiry: NodeJS.Timeout | null;
}

export interface TunnelRegistryOptions {
  /** Longest time between two rechecks of a tunnel (`upstream.websocket-recheck-interval`). */
  recheckIntervalMs: number;
  /** Whether the revocation events channel is up; while it is down, tunnels are rechecked every second. */
  channelUp?: () => boolean;
  logger?: Logger;
}

/** setTimeout's limit (about 24.8 days); a longer session expiry is caught by the periodic recheck. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const CHANNEL_DOWN_RECHECK_MS = 1000;

/**
 * The open WebSocket tunnels of this instance. A tunnel was authorized once, at its handshake; from then on
 * it lives only as long as that authorization would still be given: it closes when its session ends (the
 * `session-ended`/`user-sessions-ended` events every instance receives, the session's absolute expiry), and
 * it is authorized again when its user's grants or any template change, when the events channel comes
 * back, and at least every `recheckIntervalMs` (every second while the channel is down, when events may be
 * missed). An event type this registry does not know rechecks every tunnel: new events fail closed.
 */
export class TunnelRegistry {
  private readonly tunnels = new Set<Tunnel>();
  private ticker: NodeJS.Timeout | null = null;

  constructor(private readonly options: TunnelRegistryOptions) {}

  get size(): number {
    return this.tunnels.size;
  }

  /** Registers an open tunnel; `close` must end both sockets. Returns the function that unregisters it. */
  add(binding: TunnelBinding, close: (reason: string) => void): () => void {
    const tunnel: Tunnel = { ...binding, close, checking: false, expiry: null };
    if (binding.session) {
      const delay = Math.max(0, Math.min(binding.session.expiresAtMs - Date.now(), MAX_TIMER_MS));
      tunnel.expiry = setTimeout(() => this.end(tunnel, 'session expired'), delay);
      tunnel.expiry.unref();
    }
    this.tunnels.add(tunnel);
    this.schedule();
    return () => this.remove(tunnel);
  }

  /** Called for every event of the store's events channel, after the session and grant caches saw it. */
  handleEvent(event: StoreEvent): void {
    switch (event.type) {
      case 'session-ended':
        // Ended by its id alone (no token hash): which tunnel carries it is found by rechecking them all.
        if (event.tokenHash === undefined) return this.recheckAll();
        for (const tunnel of this.tunnels) if (tunnel.session?.tokenHash === event.tokenHash) this.end(tunnel, `session ended (${event.reason})`);
        return;
      case 'user-sessions-ended':
        for (const tunnel of this.tunnels) if (tunnel.session?.userId === event.userId) this.end(tunnel, `sessions of the user ended (${event.reason})`);
        return;
      case 'authorization-changed':
      case 'profile-changed':
        for (const tunnel of this.tunnels) if (tunnel.session?.userId === event.userId) this.recheck(tunnel);
        return;
      default:
        this.recheckAll();
    }
  }

  /** The events channel went down or came back: whatever it missed is checked now. */
  channelChanged(connected: boolean): void {
    if (connected) this.recheckAll();
    this.reschedule();
  }

  /** Closes every tunnel (shutdown). */
  closeAll(reason: string): void {
    for (const tunnel of [...this.tunnels]) this.end(tunnel, reason);
  }

  private recheckAll(): void {
    for (const tunnel of this.tunnels) this.recheck(tunnel);
  }

  private recheck(tunnel: Tunnel): void {
    if (tunnel.checking) return;
    tunnel.checking = true;
    tunnel.recheck().then(
      (problem) => {
        tunnel.checking = false;
        if (problem) this.end(tunnel, `no longer authorized (${problem.code})`);
      },
      () => {
        tunnel.checking = false;
        this.end(tunnel, 'authorization could not be checked');
      },
    );
  }

  private end(tunnel: Tunnel, reason: string): void {
    if (!this.tunnels.has(tunnel)) return;
    this.remove(tunnel);
    this.options.logger?.info({ userId: tunnel.session?.userId, reason }, 'websocket: tunnel closed');
    tunnel.close(reason);
  }

  private remove(tunnel: Tunnel): void {
    if (tunnel.expiry) clearTimeout(tunnel.expiry);
    this.tunnels.delete(tunnel);
    if (this.tunnels.size === 0) this.stopTicker();
  }

  private interval(): number {
    const channelUp = this.options.channelUp?.() ?? true;
    return channelUp ? this.options.recheckIntervalMs : Math.min(CHANNEL_DOWN_RECHECK_MS, this.options.recheckIntervalMs);
  }

  private schedule(): void {
    if (this.ticker || this.tunnels.size === 0) return;
    this.ticker = setTimeout(() => {
      this.ticker = null;
      this.recheckAll();
      this.schedule();
    }, this.interval());
    this.ticker.unref();
  }

  private reschedule(): void {
    this.stopTicker();
    this.schedule();
  }

  private stopTicker(): void {
    if (this.ticker) clearTimeout(this.ticker);
    this.ticker = null;
  }
}
