import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The gateway's Prometheus metrics, one registry per gateway instance (no global state). */
export interface GatewayMetrics {
  registry: Registry;
  requests: Counter<'outcome'>;
  decisions: Counter<'result' | 'step'>;
  upstreamDuration: Histogram<'status_class'>;
  /** RED per route pattern: proxied requests by route, method and status class, and their duration. */
  httpRequests: Counter<'route' | 'method' | 'status_class'>;
  httpDuration: Histogram<'route'>;
  /** Time to decide a request (authenticate + authorize, resolvers included). */
  decisionDuration: Histogram<'result'>;
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
    httpRequests: new Counter({
      name: 'iam_http_requests_total',
      help: 'Proxied requests answered, by matched route pattern (`none`: no route matched), method and status class (2xx…5xx).',
      labelNames: ['route', 'method', 'status_class'],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'iam_http_request_duration_seconds',
      help: 'Seconds from a proxied request to its response headers (the gateway and the host), by route pattern.',
      labelNames: ['route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    decisionDuration: new Histogram({
      name: 'iam_decision_duration_seconds',
      help: 'Seconds to authenticate and authorize a proxied request (store round trip and resolvers included), by result.',
      labelNames: ['result'],
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2],
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

const STANDARD_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE']);

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

  /** `iam_http_*` children per route and method (route patterns and methods are bounded by the policy). */
  private readonly routes = new Map<string, { duration: ReturnType<Histogram<'route'>['labels']>; counts: Array<ReturnType<Counter<'route' | 'method' | 'status_class'>['labels']> | undefined> }>();
  private readonly decisions: Array<ReturnType<Histogram<'result'>['labels']> | undefined> = [];

  /** A proxied request answered (forwarded, denied or failed): RED per route pattern. */
  answered(route: string | undefined, method: string, status: number, seconds: number): void {
    const routeLabel = route ?? 'none';
    const methodLabel = STANDARD_METHODS.has(method) ? method : 'OTHER';
    const key = `${methodLabel} ${routeLabel}`;
    let children = this.routes.get(key);
    if (children === undefined) {
      children = { duration: this.metrics.httpDuration.labels(routeLabel), counts: [] };
      this.routes.set(key, children);
    }
    const statusClass = Math.floor(status / 100);
    (children.counts[statusClass] ??= this.metrics.httpRequests.labels(routeLabel, methodLabel, `${statusClass}xx`)).inc();
    children.duration.observe(seconds);
  }

  /** The time a decision took: index 0 allow, 1 deny (a refusal or a failure). */
  decided(allowed: boolean, seconds: number): void {
    const index = allowed ? 0 : 1;
    (this.decisions[index] ??= this.metrics.decisionDuration.labels(allowed ? 'allow' : 'deny')).observe(seconds);
  }

  /** A request the host answered: counts it and records the time to the response headers. */
  forwardedResponse(statusCode: number, seconds: number): void {
    (this.forwarded ??= this.metrics.requests.labels('forwarded')).inc();
    const statusClass = Math.floor(statusCode / 100);
    (this.durations[statusClass] ??= this.metrics.upstreamDuration.labels(`${statusClass}xx`)).observe(seconds);
  }
}
