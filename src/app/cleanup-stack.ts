import type { Logger } from '../observability/logger';

/**
 * What a start has opened, closed again in reverse order: on a failed start (so nothing is left holding a
 * port, a thread or a connection) and at shutdown. A step that fails is logged and the rest still run.
 */
export class CleanupStack {
  private readonly steps: Array<() => Promise<void>> = [];

  constructor(private readonly logger: Logger) {}

  push(step: () => Promise<void>): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) await step().catch((error: unknown) => this.logger.warn({ err: error }, 'shutdown step failed'));
  }
}
