/**
 * The one way a test waits for something: poll `probe` until it returns a value that is not `false`, `null` or
 * `undefined`, and resolve that value. A test never sleeps a fixed time hoping the thing happened, and never asserts
 * how long it took (a loaded CI machine breaks both); timing is the bench's job.
 *
 * `within` is a generous upper bound, not a timing assertion: it only turns a hang into a failure that says `what`
 * was awaited and what the probe last returned or threw.
 */
export interface UntilOptions {
  /** Give up after this many ms (default 20 s: generous on a machine kept busy by other work). */
  within?: number;
  /** Pause between probes (default 25 ms). */
  every?: number;
}

export async function until<T>(what: string, probe: () => T | null | undefined | false | Promise<T | null | undefined | false>, options: UntilOptions = {}): Promise<T> {
  const within = options.within ?? 20_000;
  const every = options.every ?? 25;
  const deadline = Date.now() + within;
  let last: unknown = undefined;
  for (;;) {
    try {
      const value = await probe();
      if (value !== false && value !== null && value !== undefined) return value;
      last = value;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      const seen = last instanceof Error ? `${last.name}: ${last.message}` : JSON.stringify(last);
      throw new Error(`timed out after ${within} ms waiting for ${what} (last probe: ${seen})`);
    }
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}

/** Resolves after the current macrotask queue has run (lets already-due timers and I/O callbacks fire). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
