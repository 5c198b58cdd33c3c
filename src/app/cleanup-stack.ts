import { SHUTDOWN_CLEANUP_GRACE_MS, SHUTDOWN_STEP_GRACE_MS } from '../http/server-lifecycle';
import type { Logger } from '../observability/logger';

export interface CleanupStepOptions {
  /**
   * The step keeps something the gateway already answered (audit events, ended sessions: written, else spooled to
   * disk). Such steps run before every other, so a database-bound step that hangs (a last-seen flush to a silent
   * database) can never use up the time they need.
   */
  keepsAnswered?: boolean;
  /** How long the stop waits for this step (default {@link SHUTDOWN_STEP_GRACE_MS}). */
  boundMs?: number;
}

/** Waits `ms`; the stack's timer (tests inject one they fire themselves). */
export type CleanupTimer = (ms: number) => Promise<void>;

interface Step {
  name: string;
  run: () => Promise<void>;
  keepsAnswered: boolean;
  boundMs: number;
}

/**
 * What a start has opened, closed again: on a failed start (so nothing is left holding a port, a thread or a
 * connection) and at shutdown. The steps that keep what was answered run first, then the rest in reverse order of
 * opening. Each step has its own bound, and the whole run a bound of its own ({@link SHUTDOWN_CLEANUP_GRACE_MS}):
 * a step that hangs (its database or token store silent) is left behind, logged by name, and the next one still
 * runs. A step that fails is logged and the rest still run.
 */
export class CleanupStack {
  private readonly steps: Step[] = [];
  private readonly timer: CleanupTimer;
  private readonly totalBoundMs: number;

  constructor(
    private readonly logger: Logger,
    options: { timer?: CleanupTimer; totalBoundMs?: number } = {},
  ) {
    this.timer = options.timer ?? unrefTimer;
    this.totalBoundMs = options.totalBoundMs ?? SHUTDOWN_CLEANUP_GRACE_MS;
  }

  push(name: string, step: () => Promise<void>, options: CleanupStepOptions = {}): void {
    this.steps.push({ name, run: step, keepsAnswered: options.keepsAnswered ?? false, boundMs: options.boundMs ?? SHUTDOWN_STEP_GRACE_MS });
  }

  async run(): Promise<void> {
    const reversed = this.steps.splice(0).reverse();
    // The run's own bound: every step is still started (what it does at once, like clearing a timer, happens), but
    // past it none is waited for.
    let overall = false;
    const total = this.timer(this.totalBoundMs).then(() => void (overall = true));
    const runOne = async (step: Step): Promise<void> => {
      const outcome = await this.settle(step, overall ? Promise.resolve() : Promise.race([this.timer(step.boundMs), total]));
      if (outcome === 'done') return;
      if (outcome !== 'late') this.logger.warn({ step: step.name, err: outcome.error }, 'shutdown step failed');
      else if (overall) this.logger.error({ step: step.name, totalBoundMs: this.totalBoundMs }, 'shutdown: the cleanup is past its bound; a step was started, not waited for');
      else this.logger.error({ step: step.name, boundMs: step.boundMs }, 'shutdown: a step did not finish within its bound; the stop goes on without it');
    };
    // Independent of each other and of what follows: together, none waiting for another.
    await Promise.all(reversed.filter((step) => step.keepsAnswered).map(runOne));
    for (const step of reversed.filter((candidate) => !candidate.keepsAnswered)) await runOne(step);
  }

  private async settle(step: Step, expired: Promise<void>): Promise<'done' | 'late' | { error: unknown }> {
    let work: Promise<'done' | { error: unknown }>;
    try {
      work = step.run().then(
        () => 'done' as const,
        (error: unknown) => ({ error }),
      );
    } catch (error) {
      return { error };
    }
    return Promise.race([work, expired.then(() => 'late' as const)]);
  }
}

function unrefTimer(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
