import type { MetricObjectWithValues, MetricValue, MetricValueWithName, Registry } from 'prom-client';

/**
 * Counters and histograms for the per-request path. prom-client hashes the label set on every `inc()`/`observe()`,
 * even through a bound child (~200 ns each); these keep plain numbers in cells the caller holds on to (a few ns per
 * update) and format them for prom-client's registry only when `/metrics` is scraped. Same exposition as
 * prom-client's own types.
 */

type Labels = Record<string, string>;

/** One label set's counter. */
export class CounterCell {
  value = 0;
  constructor(readonly labels: Labels) {}
  inc(by = 1): void {
    this.value += by;
  }
}

/** One label set's histogram: non-cumulative bucket counts, cumulated at scrape time. */
export class HistogramCell {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let index = 0;
    while (index < bounds.length && value > bounds[index]!) index++;
    this.counts[index]!++;
    this.sum += value;
    this.count++;
  }
}

/** A counter whose cells are created once per label set (by key) and updated without hashing. */
export class FastCounter {
  private readonly cells = new Map<string, CounterCell>();

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
  ) {
    registry.registerMetric(this.asMetric('counter', () => [...this.cells.values()].map((cell) => ({ value: cell.value, labels: cell.labels }))));
  }

  /** The cell of `values` (in `labelNames` order); callers keep it. */
  cell(...values: string[]): CounterCell {
    const key = values.join('\u0000');
    let cell = this.cells.get(key);
    if (cell === undefined) {
      cell = new CounterCell(Object.fromEntries(this.labelNames.map((name, index) => [name, values[index] ?? ''])));
      this.cells.set(key, cell);
    }
    return cell;
  }

  /** prom-client's form: `inc({ outcome: 'denied' })` (looks the cell up; bind it with {@link cell} on hot paths). */
  inc(labels: Record<string, string>, by = 1): void {
    this.cell(...this.labelNames.map((name) => labels[name] ?? '')).inc(by);
  }

  /** The value of a label set (tests). */
  get(...values: string[]): number {
    return this.cells.get(values.join('\u0000'))?.value ?? 0;
  }

  private asMetric(type: 'counter', values: () => MetricValue<string>[]): Parameters<Registry['registerMetric']>[0] {
    return metricObject(this.name, this.help, type, values);
  }
}

/** A histogram whose cells are created once per label set and updated without hashing. */
export class FastHistogram {
  private readonly cells = new Map<string, HistogramCell>();

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    private readonly buckets: readonly number[],
  ) {
    registry.registerMetric(metricObject(this.name, this.help, 'histogram', () => this.values()));
  }

  cell(...values: string[]): HistogramCell {
    const key = values.join('\u0000');
    let cell = this.cells.get(key);
    if (cell === undefined) {
      cell = new HistogramCell(Object.fromEntries(this.labelNames.map((name, index) => [name, values[index] ?? ''])), this.buckets);
      this.cells.set(key, cell);
    }
    return cell;
  }

  private values(): MetricValueWithName<string>[] {
    const out: MetricValueWithName<string>[] = [];
    for (const cell of this.cells.values()) {
      let cumulative = 0;
      this.buckets.forEach((bound, index) => {
        cumulative += cell.counts[index]!;
        out.push({ metricName: `${this.name}_bucket`, labels: { le: bound, ...cell.labels }, value: cumulative });
      });
      out.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...cell.labels }, value: cell.count });
      out.push({ metricName: `${this.name}_sum`, labels: cell.labels, value: cell.sum });
      out.push({ metricName: `${this.name}_count`, labels: cell.labels, value: cell.count });
    }
    return out;
  }
}

/** What prom-client's registry calls at scrape time. */
function metricObject(name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValue<string>[]): Parameters<Registry['registerMetric']>[0] {
  return {
    name,
    help,
    type,
    aggregator: 'sum',
    get: (): Promise<MetricObjectWithValues<MetricValue<string>>> => Promise.resolve({ name, help, type, aggregator: 'sum', values: values() } as unknown as MetricObjectWithValues<MetricValue<string>>),
    reset: () => undefined,
  } as unknown as Parameters<Registry['registerMetric']>[0];
}
