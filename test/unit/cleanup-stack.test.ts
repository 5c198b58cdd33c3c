/**
 * The stop's cleanup (app/cleanup-stack.ts): the steps that keep what was answered (the audit trail's write-else-spool)
 * run before every other step, each step has its own bound, and a step that never finishes is left behind, logged by
 * name, without starving the steps after it; the whole run has a bound of its own. The bounds are a fake timer the
 * test fires itself: no wall-clock waits.
 */
import { CleanupStack, type CleanupTimer } from '../../src/app/cleanup-stack';
import { createLogger } from '../../src/observability/logger';
import { until } from '../support/wait';

/** A timer whose waits end only when the test fires them; `armed` lists the waits asked for, by length. */
function fakeTimer(): { timer: CleanupTimer; armed: number[]; fire(ms: number): void } {
  const waits: Array<{ ms: number; resolve: () => void }> = [];
  return {
    timer: (ms) => new Promise<void>((resolve) => waits.push({ ms, resolve })),
    get armed() {
      return waits.map((wait) => wait.ms);
    },
    fire(ms) {
      for (const wait of waits) if (wait.ms === ms) wait.resolve();
    },
  };
}

function capturedLogger(): { logger: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  const logger = createLogger('info', { write: (chunk: string) => void (text += chunk) });
  return {
    logger,
    lines: () =>
      text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

const never = (): Promise<void> => new Promise<void>(() => undefined);

describe('CleanupStack', () => {
  it('runs the steps that keep what was answered first, then the rest in reverse order of opening', async () => {
    const { logger } = capturedLogger();
    const ran: string[] = [];
    const stack = new CleanupStack(logger, { timer: fakeTimer().timer });
    stack.push('database', async () => void ran.push('database'));
    stack.push('audit trail', async () => void ran.push('audit trail'), { keepsAnswered: true });
    stack.push('last-seen times', async () => void ran.push('last-seen times'));
    stack.push('change feed', async () => void ran.push('change feed'));
    await stack.run();
    expect(ran).toEqual(['audit trail', 'change feed', 'last-seen times', 'database']);
  });

  it('a step that never finishes is left behind at its own bound, logged by name; the next steps still run, each with its own bound', async () => {
    const { logger, lines } = capturedLogger();
    const clock = fakeTimer();
    const ran: string[] = [];
    const stack = new CleanupStack(logger, { timer: clock.timer, totalBoundMs: 10_000 });
    stack.push('database', async () => void ran.push('database'), { boundMs: 300 });
    stack.push('last-seen times', () => (ran.push('last-seen times'), never()), { boundMs: 200 });
    stack.push('audit trail', async () => void ran.push('audit trail'), { keepsAnswered: true, boundMs: 100 });
    const running = stack.run();

    // The hanging step holds the run only until its own bound (200), not the others' nor the whole run's.
    await until('the hanging step to be waited for', () => ran.includes('last-seen times') && clock.armed.includes(200));
    expect(ran).toEqual(['audit trail', 'last-seen times']);
    clock.fire(200);
    await running;
    expect(ran).toEqual(['audit trail', 'last-seen times', 'database']);
    const late = lines().filter((line) => line.msg === 'shutdown: a step did not finish within its bound; the stop goes on without it');
    expect(late.map((line) => [line.step, line.boundMs])).toEqual([['last-seen times', 200]]);
  });

  it('a keeping step is never starved by a hanging one: it runs before it, with its own bound', async () => {
    const { logger, lines } = capturedLogger();
    const clock = fakeTimer();
    const ran: string[] = [];
    const stack = new CleanupStack(logger, { timer: clock.timer });
    stack.push('audit trail', async () => void ran.push('audit trail'), { keepsAnswered: true });
    // Opened after the audit trail, so in plain reverse order it would run (and hang) first.
    stack.push('last-seen times', () => (ran.push('last-seen times'), never()));
    const running = stack.run();
    await until('the hanging step to be waited for', () => ran.includes('last-seen times'));
    expect(ran).toEqual(['audit trail', 'last-seen times']);
    clock.fire(3000);
    await running;
    expect(lines().filter((line) => line.step === 'audit trail')).toEqual([]);
    expect(lines().filter((line) => line.step === 'last-seen times').map((line) => line.boundMs)).toEqual([3000]);
  });

  it('the whole run is bounded: past it every remaining step is still started, none is waited for', async () => {
    const { logger, lines } = capturedLogger();
    const clock = fakeTimer();
    const started: string[] = [];
    const stack = new CleanupStack(logger, { timer: clock.timer, totalBoundMs: 5000 });
    for (const name of ['token store', 'database', 'change feed']) stack.push(name, () => (started.push(name), never()), { boundMs: 60_000 });
    const running = stack.run();
    await until('the first step to be waited for', () => started.length === 1 && clock.armed.includes(60_000));
    clock.fire(5000);
    await running;
    expect(started).toEqual(['change feed', 'database', 'token store']);
    const abandoned = lines().filter((line) => line.msg === 'shutdown: the cleanup is past its bound; a step was started, not waited for');
    expect(abandoned.map((line) => line.step)).toEqual(['change feed', 'database', 'token store']);
  });

  it('a step that fails (or throws before its promise) is logged and the rest still run', async () => {
    const { logger, lines } = capturedLogger();
    const ran: string[] = [];
    const stack = new CleanupStack(logger, { timer: fakeTimer().timer });
    stack.push('database', async () => void ran.push('database'));
    stack.push('tracing', () => {
      throw new Error('exporter gone');
    });
    stack.push('token store', () => Promise.reject(new Error('quit refused')));
    await stack.run();
    expect(ran).toEqual(['database']);
    expect(lines().filter((line) => line.msg === 'shutdown step failed').map((line) => line.step)).toEqual(['token store', 'tracing']);
  });
});
