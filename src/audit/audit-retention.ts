import type { Logger } from '../observability/logger';
import type { AuditRepository } from '../domain/iam-repository';

const HOUR_MS = 3_600_000;

/**
 * `iam.audit.retention`: deletes audit events older than the retention, shortly after start and then
 * hourly (every instance may do it; the deletes are idempotent). `iam-gateway audit purge` does the same
 * once, on demand.
 */
export class AuditRetention {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly repository: Pick<AuditRepository, 'purgeAudit'>,
    private readonly logger: Logger,
    private readonly retentionMs: number,
  ) {}

  start(): void {
    if (this.retentionMs <= 0 || this.timer) return;
    const run = (): void => {
      this.running ??= this.purgeNow()
        .then((deleted) => {
          if (deleted > 0) this.logger.info({ deleted, retentionMs: this.retentionMs }, 'audit: events past the retention deleted');
        })
        .catch((error: unknown) => this.logger.warn({ failure: (error as Error).name }, 'audit: retention purge failed; retried in an hour'))
        .finally(() => {
          this.running = null;
        });
    };
    setTimeout(run, 10_000).unref();
    this.timer = setInterval(run, HOUR_MS);
    this.timer.unref();
  }

  purgeNow(): Promise<number> {
    return this.repository.purgeAudit(new Date(Date.now() - this.retentionMs));
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
