import { AggregatorRegistry, type Registry } from 'prom-client';

/** One metric family as `registry.getMetricsAsJSON()` gives it (what a worker sends its primary). */
export interface MetricFamily {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: Array<{ value: number; labels: Record<string, string | number>; metricName?: string }>;
}

/** Families whose values only grow while their process lives: a worker's last values stay in the sum after it exits. */
const MONOTONIC = new Set(['counter', 'histogram']);

/**
 * The management port's `/metrics` with `serve --workers N`: every worker's registry combined with prom-client's
 * `AggregatorRegistry.aggregate` (counters and histograms summed; gauges by the `aggregator` each one declares in
 * observability/metrics.ts, `sum` by default; the default process metrics by prom-client's own choices: CPU and
 * memory summed, event-loop lag averaged, start time omitted), plus the primary's own registry.
 *
 * A worker that exits takes its counters with it, and a sum that drops would read as a counter reset to
 * Prometheus (`rate()` would count the survivors' whole totals again). So the last values each worker reported
 * for its counters and histograms are kept when it exits ("retired") and added to every later scrape: the sums
 * never go down; what a worker counted after its last scrape is lost, as it would be in a single process that
 * crashed.
 */
export class ClusterMetrics {
  private readonly last = new Map<number, MetricFamily[]>();
  private retired: MetricFamily[] = [];
  /** Retirements run one after the other; a scrape waits for those already begun. */
  private retiring: Promise<void> = Promise.resolve();

  /** A worker's answer to a scrape; kept until the next one (or retired when the worker exits). */
  record(workerId: number, families: MetricFamily[]): void {
    this.last.set(workerId, families);
  }

  /** The worker exited: its last counters and histograms join the retired sums. */
  retire(workerId: number): Promise<void> {
    const families = this.last.get(workerId);
    this.last.delete(workerId);
    if (families === undefined) return this.retiring;
    const monotonic = families.filter((family) => MONOTONIC.has(family.type));
    this.retiring = this.retiring.then(async () => {
      this.retired = await familiesOf(aggregate([this.retired, monotonic]));
    });
    return this.retiring;
  }

  /** The exposition of `workers` (their answers to this scrape), the retired sums and the primary's own registry. */
  async exposition(workers: MetricFamily[][], own: Registry): Promise<string> {
    await this.retiring;
    const ownFamilies = (await own.getMetricsAsJSON()) as unknown as MetricFamily[];
    return aggregate([...workers, this.retired, ownFamilies]).metrics();
  }
}

function aggregate(sets: MetricFamily[][]): Registry {
  return AggregatorRegistry.aggregate(sets.filter((set) => set.length > 0));
}

async function familiesOf(registry: Registry): Promise<MetricFamily[]> {
  return (await registry.getMetricsAsJSON()) as unknown as MetricFamily[];
}
