import { Registry } from 'prom-client';
import type { GatewayConfig } from '../../src/config';
import { ClusterMetrics, type MetricFamily } from '../../src/workers/cluster-metrics';
import { parseWorkersOption, resolveWorkerCount, workerRefusal } from '../../src/workers/worker-count';
import { createMetrics, createPrimaryMetrics, type GatewayMetrics } from '../../src/observability/metrics';
import { testConfig } from '../support/gateway';

const familiesOf = async (metrics: GatewayMetrics): Promise<MetricFamily[]> => (await metrics.registry.getMetricsAsJSON()) as unknown as MetricFamily[];

/** The samples of an exposition, series → value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    expect(out.has(line.slice(0, space))).toBe(false);
    out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}

/** A worker's metrics after some traffic. */
function worker(requests: number, options: { connected: boolean; routes: number; loadedAt: number; cached: number }): GatewayMetrics {
  const metrics = createMetrics();
  for (let i = 0; i < requests; i++) {
    metrics.httpRequests.cell('/orders/:id', 'GET', '2xx').inc();
    metrics.httpDuration.cell('/orders/:id').observe(0.003);
  }
  metrics.logins.inc({ result: 'success' }, requests);
  metrics.storeChannelConnected.set(options.connected ? 1 : 0);
  metrics.policyRoutes.set(options.routes);
  metrics.policyLoadedTimestamp.set(options.loadedAt);
  metrics.observeSessionCache(() => options.cached);
  return metrics;
}

describe('the aggregated /metrics of serve --workers N', () => {
  it('sums counters and histograms (the per-request Fast* ones too), combines gauges as each declares, lists each series once', async () => {
    const a = worker(3, { connected: true, routes: 10, loadedAt: 1000, cached: 5 });
    const b = worker(4, { connected: false, routes: 11, loadedAt: 2000, cached: 7 });
    const primary = createPrimaryMetrics();
    primary.workers.set(2);
    const text = await new ClusterMetrics().exposition([await familiesOf(a), await familiesOf(b)], primary.registry);
    const values = samples(text);
    expect(values.get('iam_http_requests_total{route="/orders/:id",method="GET",status_class="2xx"}')).toBe(7);
    expect(values.get('iam_http_request_duration_seconds_bucket{le="0.005",route="/orders/:id"}')).toBe(7);
    expect(values.get('iam_http_request_duration_seconds_count{route="/orders/:id"}')).toBe(7);
    expect(values.get('iam_logins_total{result="success"}')).toBe(7);
    expect(values.get('iam_store_events_connected')).toBe(0); // min: 1 only while every worker is connected
    expect(values.get('iam_policy_routes')).toBe(11); // max
    expect(values.get('iam_policy_loaded_timestamp_seconds')).toBe(1000); // min: the oldest policy
    expect(values.get('iam_session_cache_entries')).toBe(12); // sum
    expect(values.get('iam_workers')).toBe(2);
    // prom-client's default metrics of both workers (and the primary's process metrics) merge under their one name.
    expect(values.get('iam_process_cpu_seconds_total')).toBeGreaterThan(0);
    const [major, minor, patch] = process.versions.node.split('.');
    expect(values.get(`iam_nodejs_version_info{version="${process.version}",major="${major}",minor="${minor}",patch="${patch}"}`)).toBe(1);
    expect(text).not.toMatch(/^iam_process_start_time_seconds/m);
    const types = text.split('\n').filter((line) => line.startsWith('# TYPE '));
    expect(new Set(types).size).toBe(types.length);
  });

  it("keeps an exited worker's last counters and histograms in the sums (no counter goes down), not its gauges", async () => {
    const cluster = new ClusterMetrics();
    const own = new Registry();
    const a = worker(3, { connected: true, routes: 10, loadedAt: 1000, cached: 5 });
    const b = worker(4, { connected: true, routes: 10, loadedAt: 1000, cached: 7 });
    cluster.record(1, await familiesOf(a));
    cluster.record(2, await familiesOf(b));
    const series = 'iam_http_requests_total{route="/orders/:id",method="GET",status_class="2xx"}';
    expect(samples(await cluster.exposition([await familiesOf(a), await familiesOf(b)], own)).get(series)).toBe(7);

    await cluster.retire(1);
    const c = worker(1, { connected: true, routes: 10, loadedAt: 1000, cached: 1 });
    b.httpRequests.cell('/orders/:id', 'GET', '2xx').inc();
    const after = samples(await cluster.exposition([await familiesOf(b), await familiesOf(c)], own));
    expect(after.get(series)).toBe(3 + 5 + 1);
    expect(after.get('iam_http_request_duration_seconds_count{route="/orders/:id"}')).toBe(3 + 4 + 1);
    expect(after.get('iam_session_cache_entries')).toBe(7 + 1);
    expect(after.get('iam_store_events_connected')).toBe(1);

    // A second exit adds up; a worker never scraped leaves nothing behind.
    cluster.record(3, await familiesOf(c));
    await cluster.retire(3);
    await cluster.retire(99);
    expect(samples(await cluster.exposition([await familiesOf(b)], own)).get(series)).toBe(3 + 5 + 1);
  });
});

describe('worker count', () => {
  const config = (overrides: Record<string, string> = {}): GatewayConfig => testConfig('http://127.0.0.1:9', overrides);

  it.each([
    ['auto', 'auto'],
    ['1', 1],
    ['16', 16],
    ['1024', 1024],
    ['0', null],
    ['1025', null],
    ['2.5', null],
    ['-1', null],
    ['two', null],
    ['', null],
  ])('--workers %j → %j', (value, expected) => {
    expect(parseWorkersOption(value)).toBe(expected);
  });

  it('the flag wins over server.workers; auto is the available cores', () => {
    expect(resolveWorkerCount(undefined, config({ SERVER_WORKERS: '3' }))).toEqual({ count: 3, source: 'server.workers 3' });
    expect(resolveWorkerCount(2, config({ SERVER_WORKERS: '3' }))).toEqual({ count: 2, source: '--workers 2' });
    expect(resolveWorkerCount(undefined, config({ SERVER_WORKERS: 'auto' }), 8)).toEqual({ count: 8, source: 'server.workers auto: 8 cores' });
    expect(resolveWorkerCount('auto', config(), 1)).toEqual({ count: 1, source: '--workers auto: 1 core' });
  });

  it('refuses several workers with what lives in one process: the in-process token store, the embedded database, a generated assertion key', () => {
    const two = { count: 2, source: '--workers 2' };
    const shared = { REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL: 'postgresql://iam@db/iam' };
    expect(workerRefusal(config(shared), two)).toBeNull();
    expect(workerRefusal(config({ ...shared, REDIS_URL: '' }), two)).toMatch(/^cannot run 2 worker processes \(--workers 2\); run one, or: .*Set REDIS_URL/);
    expect(workerRefusal(config({ ...shared, DATABASE_URL: '' }), two)).toMatch(/embedded PGlite .*Set DATABASE_URL/);
    expect(workerRefusal(config({ ...shared, IAM_FORWARD_ASSERTION_ENABLED: 'true' }), two)).toMatch(/iam\.forward\.assertion\.key-file/);
    expect(workerRefusal(config({ REDIS_URL: '', DATABASE_URL: '' }), two)?.split('\n')).toHaveLength(3);
    // One worker, or the transparent proxy (no token store, no database): nothing to share.
    expect(workerRefusal(config({ REDIS_URL: '', DATABASE_URL: '' }), { count: 1, source: 'server.workers 1' })).toBeNull();
    expect(workerRefusal(config({ REDIS_URL: '', DATABASE_URL: '', IAM_ENABLED: 'false' }), two)).toBeNull();
  });
});
