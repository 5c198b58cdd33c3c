import type { Logger } from '../observability/logger';
import type { SessionRepository } from '../domain/iam-repository';

/**
 * Keeps `lastSeenAt` of sessions without touching the database on the request path: requests note the time
 * in memory, and a timer writes the latest time per session in the background.
 */
export class LastSeenTracker {
  private pending = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly repository: Pick<SessionRepository, 'updateSession'>,
    private readonly logger: Logger,
    private readonly flushIntervalMs = 5000,
    private readonly maxPending = 100_000,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.flush(), this.flushIntervalMs);
    this.timer.unref();
  }

  /** Notes that a session was used at `atMs` (epoch ms); cheap enough for every request. */
  touch(sessionId: string, atMs: number): void {
    if (this.pending.size >= this.maxPending && !this.pending.has(sessionId)) return;
    this.pending.set(sessionId, atMs);
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    for (const [sessionId, lastSeenAt] of batch) {
      try {
        await this.repository.updateSession(sessionId, { lastSeenAt: new Date(lastSeenAt) });
      } catch (error) {
        this.logger.debug({ err: error }, 'sessions: lastSeenAt not written');
        return;
      }
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}
