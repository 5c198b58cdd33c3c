import type { Logger } from './logger';

/** A dependency whose outage makes the gateway answer 503. */
export type Dependency = 'database' | 'tokenStore';

interface Outage {
  sinceMs: number;
  /** Answers that failed because of it, since it began. */
  failures: number;
  /** Failures already reported by the last "still unavailable" line. */
  reported: number;
  lastSummaryMs: number;
  timer: NodeJS.Timeout;
  /** A probe is in flight (a hanging dependency never piles up probes). */
  probing: boolean;
}

export interface OutageLogOptions {
  /** Resolves when the dependency answers again (e.g. the repository's or the store's ping). */
  probes: Record<Dependency, () => Promise<unknown>>;
  /** How often a dependency in outage is probed; default 1 s. */
  probeIntervalMs?: number;
  /** How often a long outage is summarized; default 60 s. */
  summaryIntervalMs?: number;
}

/**
 * Logs outages as state changes, not one line per failed answer (docs/threat-model.md #11.39): an outage of thousands
 * of 503s logs "became unavailable" once (warn, the error message, no stack), a count at most once a
 * summary interval while it lasts, and "recovered" with the count and the duration once a probe of the
 * dependency succeeds again.
 */
export class OutageLog {
  private readonly outages = new Map<Dependency, Outage>();
  private readonly probeIntervalMs: number;
  private readonly summaryIntervalMs: number;

  constructor(
    private readonly logger: Logger,
    private readonly options: OutageLogOptions,
  ) {
    this.probeIntervalMs = options.probeIntervalMs ?? 1000;
    this.summaryIntervalMs = options.summaryIntervalMs ?? 60_000;
  }

  /** True while `dependency` is in an outage this log has seen. */
  isDown(dependency: Dependency): boolean {
    return this.outages.has(dependency);
  }

  /** An answer failed because `dependency` is unavailable. */
  failed(dependency: Dependency, error: unknown): void {
    const now = Date.now();
    const outage = this.outages.get(dependency);
    if (outage) {
      outage.failures++;
      if (now - outage.lastSummaryMs >= this.summaryIntervalMs) {
        this.logger.warn({ dependency, failures: outage.failures, newFailures: outage.failures - outage.reported, sinceMs: now - outage.sinceMs }, `${dependency} still unavailable`);
        outage.reported = outage.failures;
        outage.lastSummaryMs = now;
      }
      return;
    }
    const timer = setInterval(() => this.probe(dependency), this.probeIntervalMs);
    timer.unref();
    this.outages.set(dependency, { sinceMs: now, failures: 1, reported: 1, lastSummaryMs: now, timer, probing: false });
    const reason = error instanceof Error ? error.message : String(error);
    this.logger.warn({ dependency, reason }, `${dependency} became unavailable: answering 503 until it recovers`);
  }

  /** Stops probing (shutdown). */
  close(): void {
    for (const outage of this.outages.values()) clearInterval(outage.timer);
    this.outages.clear();
  }

  private probe(dependency: Dependency): void {
    const current = this.outages.get(dependency);
    if (!current || current.probing) return;
    current.probing = true;
    Promise.resolve()
      .then(() => this.options.probes[dependency]())
      .finally(() => {
        current.probing = false;
      })
      .then(
        () => {
          if (this.outages.get(dependency) !== current) return;
          clearInterval(current.timer);
          this.outages.delete(dependency);
          this.logger.info({ dependency, failures: current.failures, durationMs: Date.now() - current.sinceMs }, `${dependency} recovered`);
        },
        () => undefined,
      );
  }
}
