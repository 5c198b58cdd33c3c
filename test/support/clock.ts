import type { Clock } from '../../src/domain/clock';

/**
 * A clock the test moves by hand (`advance`): an expiry, an idle window or a counter window ends exactly when the
 * test says, however loaded the machine is, and the test never waits for it.
 */
export class FakeClock implements Clock {
  constructor(private ms = Date.parse('2026-01-01T00:00:00Z')) {}

  now(): number {
    return this.ms;
  }

  advance(ms: number): void {
    this.ms += ms;
  }
}
