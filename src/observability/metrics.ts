import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The gateway's Prometheus metrics, one registry per gateway instance (no global state). */
export interface GatewayMetrics {
  registry: Registry;
  requests: Counter<'outcome'>;
  decisions: Counter<'result' | 'step'>;
  upstreamDuration: Histogram<'status_class'>;
  logins: Counter<'result'>;
  forwardAuth: Counter<'outcome'>;
  policyReloads: Counter<'result'>;
  policyRoutes: Gauge;
  sessionCacheEntries: Gauge;
  storeChannelConnected: Gauge;
  /** Makes `iam_session_cache_entries` report `size()` at every scrape (the real cache size). */
  observeSessionCache(size: () => number): void;
}

export function createMetrics(options: { collectDefaults?: boolean } = {}): GatewayMetrics {
  const registry = new Registry();
  if (options.collectDefaults !== false) collectDefaultMetrics({ register: registry, prefix: 'iam_' });
  let sessionCacheSize: () => number = () => 0;
  return {
    observeSessionCache(size) {
      sessionCacheSize = size;
    },
    registry,
    requests: new Counter({
      name: 'iam_proxy_requests_total',
      help: 'Requests handled by the proxy, by outcome (forwarded, denied, unauthenticated, refused, error).',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    decisions: new Counter({
      name: 'iam_decisions_total',
      help: 'Authorization decisions of the proxy, upgrades and forward-auth, by result (allow, deny, shadow_deny) and failed step (none for allow).',
      labelNames: ['result', 'step'],
      registers: [registry],
    }),
    upstreamDuration: new Histogram({
      name: 'iam_upstream_duration_seconds',
      help: 'Time to the upstream response headers.',
      labelNames: ['status_class'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    logins: new Counter({
      name: 'iam_logins_total',
      help: 'Login attempts (POST /iam/auth/login) by result (success, failure, rate_limited, not_configured, error).',
      labelNames: ['result'],
      registers: [registry],
    }),
    forwardAuth: new Counter({
      name: 'iam_forward_auth_requests_total',
      help: 'Forward-auth checks by outcome (allowed, denied, unauthenticated, refused, error); their decisions also count in iam_decisions_total.',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    policyReloads: new Counter({
      name: 'iam_policy_reloads_total',
      help: 'Policy loads and reloads by result (success, failure).',
      labelNames: ['result'],
      registers: [registry],
    }),
    policyRoutes: new Gauge({ name: 'iam_policy_routes', help: 'Routes in the serving policy.', registers: [registry] }),
    sessionCacheEntries: new Gauge({
      name: 'iam_session_cache_entries',
      help: 'Entries in the local session cache.',
      registers: [registry],
      collect() {
        this.set(sessionCacheSize());
      },
    }),
    storeChannelConnected: new Gauge({
      name: 'iam_store_events_connected',
      help: '1 while the revocation channel is connected (local caches are trusted only then).',
      registers: [registry],
    }),
  };
}

/**
 * The proxy's per-request metric updates with their label children bound once, on first use: prom-client
 * hashes a label object on every `inc({…})`/`observe({…}, v)`, which cost more than the rest of the
 * bookkeeping of a forwarded request. Series appear exactly as before (only once a value is recorded).
 */
export class ProxyRequestMetrics {
  private forwarded: ReturnType<Counter<'outcome'>['labels']> | null = null;
  /** Index = status class (2 for 2xx). */
  private readonly durations: Array<ReturnType<Histogram<'status_class'>['labels']> | undefined> = [];

  constructor(private readonly metrics: GatewayMetrics) {}

  /** A request the host answered: counts it and records the time to the response headers. */
  forwardedResponse(statusCode: number, seconds: number): void {
    (this.forwarded ??= this.metrics.requests.labels('forwarded')).inc();
    const statusClass = Math.floor(statusCode / 100);
    (this.durations[statusClass] ??= this.metrics.upstreamDuration.labels(`${statusClass}xx`)).observe(seconds);
  }
}
