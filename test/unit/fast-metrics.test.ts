import { Histogram, Registry } from 'prom-client';
import { FastCounter, FastHistogram } from '../../src/observability/fast-metrics';

describe('fast counters and histograms', () => {
  it('expose exactly what prom-client exposes for the same observations', async () => {
    const fast = new Registry();
    const reference = new Registry();
    const buckets = [0.01, 0.1, 1];
    const mine = new FastHistogram(fast, 'x_seconds', 'help', ['route'], buckets);
    const theirs = new Histogram({ name: 'x_seconds', help: 'help', labelNames: ['route'], buckets, registers: [reference] });
    for (const value of [0.005, 0.01, 0.05, 0.5, 5]) {
      mine.cell('/a').observe(value);
      theirs.labels('/a').observe(value);
    }
    mine.cell('/b').observe(0.2);
    theirs.labels('/b').observe(0.2);
    expect(await fast.metrics()).toBe(await reference.metrics());
  });

  it('count by label set, in cells or by prom-client style label objects', async () => {
    const registry = new Registry();
    const counter = new FastCounter(registry, 'y_total', 'help', ['outcome', 'step']);
    const cell = counter.cell('denied', 'SCOPE_DENIED');
    cell.inc();
    counter.inc({ outcome: 'denied', step: 'SCOPE_DENIED' });
    counter.inc({ outcome: 'allowed', step: 'none' }, 2);
    expect(counter.get('denied', 'SCOPE_DENIED')).toBe(2);
    expect(await registry.metrics()).toBe('# HELP y_total help\n# TYPE y_total counter\ny_total{outcome="denied",step="SCOPE_DENIED"} 2\ny_total{outcome="allowed",step="none"} 2\n');
  });
});
