import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { FastCounter, FastHistogram, type CounterCell, type HistogramCell } from './fast-metrics';

/** The gateway's Prometheus metrics, one registry per gateway instance (no global state). */
export interface GatewayMetrics {
  registry: Registry;
  requests: FastCounter;
  decisions: FastCounter;
  /** Per-request metrics are {@link FastHistogram}/{@link FastCounter}: updated without prom-client's label hashing. */
  upstreamDuration: FastHistogram;
  /** RED per route pattern: proxied requests by route, method and status class, and their duration. */
  httpRequests: FastCounter;
  httpDuration: FastHistogram;
  /** Time to decide a request (authenticate + authorize, resolvers included). */
  decisionDuration: FastHistogram;
  logins: Counter<'result'>;
  forwardAuth: Counter<'outcome'>;
  /** `iam_host_checks_total{result}`: the checks of `POST /iam/authorization/check` (allowed, denied, error). */
  hostChecks: Counter<'result'>;
  /**
   * `iam_caller_resolutions_refused_total{reason}`: resolutions a caller's own check or diagnostics asked for beyond
   * its budget (authz/resolution-budget.ts), refused without a resolver request: `per_call`, `per_caller`.
   */
  callerResolutionsRefused: Counter<'reason'>;
  policyReloads: Counter<'result'>;
  policyRoutes: Gauge;
  /** `iam_policy_candidate_divergences_total{live, candidate}`: requests the candidate policy decided otherwise. */
  policyCandidateDivergences: Counter<'live' | 'candidate'>;
  /** `iam_policy_candidate_reloads_total{result}`, `iam_policy_candidate_routes`, `iam_policy_candidate_loaded_timestamp_seconds`. */
  policyCandidateReloads: Counter<'result'>;
  policyCandidateRoutes: Gauge;
  policyCandidateLoadedTimestamp: Gauge;
  sessionCacheEntries: Gauge;
  storeChannelConnected: Gauge;
  /** Makes `iam_session_cache_entries` report `size()` at every scrape (the real cache size). */
  observeSessionCache(size: () => number): void;

  // ---- #16 "Metrics you can alert on": resolvers, token store, revocation events, policy age, audit ----
  /** `iam_resolver_requests_total{type, result}`: ok, not_found, error, timeout (authz/resource-resolver.ts). */
  resolverRequests: Counter<'type' | 'result'>;
  /** `iam_resolver_duration_seconds{type}`: one observation per resolver request sent. */
  resolverDuration: Histogram<'type'>;
  /** `iam_store_operations_total{operation, result}`: counted by observability/instrumented-token-store.ts. */
  storeOperations: Counter<'operation' | 'result'>;
  /**
   * Runs `flush` before every read of `iam_store_operations_total`: the token store counts its round trips in
   * plain numbers (a prom-client `inc` hashes its labels each time, which would cost more than a cache-missed
   * in-process read) and adds them to the counter here.
   */
  beforeStoreOperationsScrape(flush: () => void): void;
  /** `iam_revocation_events_total{direction, type}`: events published (sent) and heard on the channel (received). */
  revocationEvents: Counter<'direction' | 'type'>;
  /** `iam_revocation_propagation_seconds`: receive time − the publisher's `sentAt`. */
  revocationPropagation: Histogram;
  /** `iam_policy_loaded_timestamp_seconds`: when the serving policy was loaded (epoch seconds). */
  policyLoadedTimestamp: Gauge;
  /** `iam_policy_reload_failing`: 1 while the last reload failed and the directory still differs from what serves. */
  policyReloadFailing: Gauge;
  /** Makes `iam_policy_reload_failing` report `failing()` at every scrape (the policy holder's own `lastError`). */
  observePolicyReloadFailing(failing: () => boolean): void;
  /** `iam_audit_queue_depth`: events buffered or in flight, not yet written (read at scrape). */
  auditQueueDepth: Gauge;
  /** `iam_audit_events_dropped_total{reason}` (audit/audit-trail.ts). */
  auditDropped: Counter<'reason'>;
  /** `iam_audit_events_written_total`: events the database stored. */
  auditWritten: Counter;
  /** `iam_audit_events_spooled_total{reason}`: events written to the disk spool (stop, buffer_full). */
  auditSpooled: Counter<'reason'>;
  /** `iam_audit_spool_bytes`: bytes of spool files waiting to be written (read at scrape). */
  auditSpoolBytes: Gauge;
  /** `iam_audit_spool_limit_bytes`: `iam.audit.spool-max-bytes`, so an alert can compare the two. */
  auditSpoolLimit: Gauge;
  /** Makes `iam_audit_queue_depth` report `depth()` at every scrape. */
  observeAuditQueue(depth: () => number): void;
  /** Makes `iam_audit_spool_bytes` report `bytes()` at every scrape, and sets `iam_audit_spool_limit_bytes`. */
  observeAuditSpool(bytes: () => number, limit: number): void;
  /** `iam_token_store_evicted_keys`: keys Redis evicted for memory (live tokens under `volatile-*`), read at scrape. */
  tokenStoreEvictedKeys: Gauge;
  /** `iam_token_store_eviction_policy{policy}` = 1: the Redis `maxmemory-policy` read at start (`unknown` when hidden). */
  tokenStoreEvictionPolicy: Gauge<'policy'>;
  /** Makes `iam_token_store_evicted_keys` report `read()` at every scrape (no series while it answers null). */
  observeTokenStoreEvictions(read: () => Promise<number | null>): void;
  /** `iam_password_verifications_starved_total`: logins whose password check found no idle CPU in time. */
  passwordStarvations: Counter;
  /** Makes `iam_password_verifications_starved_total` follow `count()` (a running total) at every scrape. */
  observePasswordStarvations(count: () => number): void;
}

export function createMetrics(options: { collectDefaults?: boolean } = {}): GatewayMetrics {
  const registry = new Registry();
  if (options.collectDefaults !== false) collectDefaultMetrics({ register: registry, prefix: 'iam_' });
  let sessionCacheSize: () => number = () => 0;
  let auditQueueDepth: () => number = () => 0;
  let auditSpoolBytes: () => number = () => 0;
  let evictedKeys: (() => Promise<number | null>) | null = null;
  let starvedVerifications: () => number = () => 0;
  let starvedReported = 0;
  let policyReloadFailing: () => boolean = () => false;
  const storeOperationFlushes: Array<() => void> = [];
  return {
    observeSessionCache(size) {
      sessionCacheSize = size;
    },
    registry,
    requests: new FastCounter(registry, 'iam_proxy_requests_total', 'Requests handled by the proxy, by outcome (forwarded, denied, unauthenticated, refused, error).', ['outcome']),
    decisions: new FastCounter(
      registry,
      'iam_decisions_total',
      'Authorization decisions of the proxy, upgrades and forward-auth, by result (allow, deny, shadow_deny) and failed step (none for allow).',
      ['result', 'step'],
    ),
    upstreamDuration: new FastHistogram(
      registry,
      'iam_upstream_duration_seconds',
      "Seconds to the host's response headers for forwarded requests, by status class.",
      ['status_class'],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ),
    httpRequests: new FastCounter(
      registry,
      'iam_http_requests_total',
      'Proxied requests answered, by matched route pattern (`none`: no route matched), method and status class (2xx…5xx).',
      ['route', 'method', 'status_class'],
    ),
    httpDuration: new FastHistogram(
      registry,
      'iam_http_request_duration_seconds',
      'Seconds from a proxied request to its response headers (the gateway and the host), by route pattern.',
      ['route'],
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ),
    decisionDuration: new FastHistogram(
      registry,
      'iam_decision_duration_seconds',
      'Seconds to authenticate and authorize a proxied request (store round trip and resolvers included), by result.',
      ['result'],
      [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2],
    ),
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
    hostChecks: new Counter({
      name: 'iam_host_checks_total',
      help: 'Checks a host asked for (POST /iam/authorization/check), by result: allowed, denied (403/404), error (a resolver down or no resolver: 500/502, or over the resolution budget: 429); a count of checks.',
      labelNames: ['result'],
      registers: [registry],
    }),
    callerResolutionsRefused: new Counter({
      name: 'iam_caller_resolutions_refused_total',
      help: "Resolutions a caller's check (POST /iam/authorization/check) or diagnostics asked for beyond iam.authz.caller-resolutions, answered 429 RESOLUTION_BUDGET_EXCEEDED without a resolver request, by reason: per_call, per_caller.",
      labelNames: ['reason'],
      registers: [registry],
    }),
    policyReloads: new Counter({
      name: 'iam_policy_reloads_total',
      help: 'Policy loads and reloads by result (success, failure).',
      labelNames: ['result'],
      registers: [registry],
    }),
    // `aggregator`: how `serve --workers N` combines the workers' values on the primary's /metrics (prom-client's
    // AggregatorRegistry; counters and histograms are summed, gauges too unless they say otherwise here).
    policyRoutes: new Gauge({ name: 'iam_policy_routes', help: 'Routes in the serving policy.', registers: [registry], aggregator: 'max' }),
    policyCandidateDivergences: new Counter({
      name: 'iam_policy_candidate_divergences_total',
      help: 'Requests the candidate policy (iam.policy.candidate-dir) decided otherwise than the live policy, by the live decision (allow, deny) and the candidate\'s (allow, deny, unknown: it needed a grant or a resolution the live decision did not load).',
      labelNames: ['live', 'candidate'],
      registers: [registry],
    }),
    policyCandidateReloads: new Counter({
      name: 'iam_policy_candidate_reloads_total',
      help: 'Candidate policy loads and reloads by result (success, failure); a failure never affects the live policy.',
      labelNames: ['result'],
      registers: [registry],
    }),
    policyCandidateRoutes: new Gauge({ name: 'iam_policy_candidate_routes', help: 'Routes in the candidate policy; 0 while none is loaded.', registers: [registry], aggregator: 'max' }),
    policyCandidateLoadedTimestamp: new Gauge({
      name: 'iam_policy_candidate_loaded_timestamp_seconds',
      help: 'When the candidate policy was loaded, as Unix time in seconds; 0 while none is loaded.',
      registers: [registry],
      aggregator: 'min',
    }),
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
      // With workers: 1 only while every worker is connected.
      aggregator: 'min',
    }),

    // ---- #16 "Metrics you can alert on": resolvers, token store, revocation events, policy age, audit ----
    observeAuditQueue(depth) {
      auditQueueDepth = depth;
    },
    observeAuditSpool(bytes, limit) {
      auditSpoolBytes = bytes;
      this.auditSpoolLimit.set(limit);
    },
    observeTokenStoreEvictions(read) {
      evictedKeys = read;
    },
    beforeStoreOperationsScrape(flush) {
      storeOperationFlushes.push(flush);
    },
    resolverRequests: new Counter({
      name: 'iam_resolver_requests_total',
      help: 'Resource resolver calls, by resource type of the policy and result (ok, not_found, error, timeout); a count of calls.',
      labelNames: ['type', 'result'],
      registers: [registry],
    }),
    resolverDuration: new Histogram({
      name: 'iam_resolver_duration_seconds',
      help: 'Time of one resource resolver request, answer body read included, by resource type; in seconds.',
      labelNames: ['type'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    storeOperations: new Counter({
      name: 'iam_store_operations_total',
      help: 'Token store round trips, by operation (get, put, delete, list, publish, subscribe, rate_limit, purge, ping) and result (ok, error); a count of calls.',
      labelNames: ['operation', 'result'],
      registers: [registry],
      collect() {
        for (const flush of storeOperationFlushes) flush();
      },
    }),
    revocationEvents: new Counter({
      name: 'iam_revocation_events_total',
      help: 'Events on the token store events channel (revocations and authorization changes), by direction (sent: published by this instance; received: heard by this instance, its own included) and event type; a count of events.',
      labelNames: ['direction', 'type'],
      registers: [registry],
    }),
    revocationPropagation: new Histogram({
      name: 'iam_revocation_propagation_seconds',
      help: 'Delay from publishing an event on the events channel (its sentAt, the publisher clock) to this instance receiving it; in seconds.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    policyLoadedTimestamp: new Gauge({
      name: 'iam_policy_loaded_timestamp_seconds',
      help: 'When the serving policy was loaded (start or successful reload), as Unix time in seconds; its age is time() minus this.',
      registers: [registry],
      // With workers: the oldest worker's policy, so its age alerts when any worker serves a stale one.
      aggregator: 'min',
    }),
    observePolicyReloadFailing(failing) {
      policyReloadFailing = failing;
    },
    policyReloadFailing: new Gauge({
      name: 'iam_policy_reload_failing',
      help: '1 while the policies directory holds a change that failed to load (the last good policy keeps serving), 0 once a reload succeeds or the directory is back to what serves.',
      registers: [registry],
      // With workers: 1 when any worker refused the directory.
      aggregator: 'max',
      collect() {
        this.set(policyReloadFailing() ? 1 : 0);
      },
    }),
    auditQueueDepth: new Gauge({
      name: 'iam_audit_queue_depth',
      help: 'Audit events buffered or being written, not yet stored in the database, at scrape time; a count of events.',
      registers: [registry],
      collect() {
        this.set(auditQueueDepth());
      },
    }),
    observePasswordStarvations(count) {
      starvedVerifications = count;
    },
    passwordStarvations: new Counter({
      name: 'iam_password_verifications_starved_total',
      help: 'Password verifications that waited 250 ms on a SCHED_IDLE thread without getting CPU (the machine had no idle CPU) and were moved to the nice value; a count of verifications.',
      registers: [registry],
      collect() {
        // The pool counts in a plain number; the counter catches up with it at each scrape.
        const total = starvedVerifications();
        if (total > starvedReported) {
          this.inc(total - starvedReported);
          starvedReported = total;
        }
      },
    }),
    auditDropped: new Counter({
      name: 'iam_audit_events_dropped_total',
      help: 'Audit events not stored, by reason (rate_limited: events of unauthenticated requests beyond the per-minute budget, only summarised; buffer_full: oldest dropped from a full buffer without a spool; spool_full: a full buffer could not move its oldest to the disk spool, at iam.audit.spool-max-bytes or refused by the disk; refused: the database refused the row; unreadable: a spooled line that could not be read; lost: neither written nor spooled at stop); a count of events.',
      labelNames: ['reason'],
      registers: [registry],
    }),
    auditWritten: new Counter({
      name: 'iam_audit_events_written_total',
      help: 'Audit events stored in the database (spooled events included when replayed); a count of events.',
      registers: [registry],
    }),
    auditSpooled: new Counter({
      name: 'iam_audit_events_spooled_total',
      help: 'Audit events written to the local disk spool because the database could not take them, by reason (stop: unwritten at stop, replayed at the next start; buffer_full: the oldest of a full memory buffer while the database is away, replayed when it returns); a count of events.',
      labelNames: ['reason'],
      registers: [registry],
    }),
    auditSpoolBytes: new Gauge({
      name: 'iam_audit_spool_bytes',
      help: 'Bytes of audit spool files this instance holds, waiting to be written to the database, at scrape time; in bytes.',
      registers: [registry],
      collect() {
        this.set(auditSpoolBytes());
      },
    }),
    auditSpoolLimit: new Gauge({
      name: 'iam_audit_spool_limit_bytes',
      help: 'iam.audit.spool-max-bytes: what the spool may hold before a full buffer drops events (spool_full); in bytes.',
      registers: [registry],
    }),
    tokenStoreEvictedKeys: new Gauge({
      name: 'iam_token_store_evicted_keys',
      help: "Keys the Redis token store evicted for memory since the server started (INFO stats evicted_keys, summed over a Cluster's primaries), read at scrape; under a volatile-* maxmemory-policy each is a live token (a silent logout) or a counter; a count of keys.",
      registers: [registry],
      // Every worker reads the same server: the largest reading, not their sum.
      aggregator: 'max',
      async collect() {
        const read = evictedKeys === null ? null : await evictedKeys().catch(() => null);
        if (read === null) this.reset();
        else this.set(read);
      },
    }),
    tokenStoreEvictionPolicy: new Gauge({
      name: 'iam_token_store_eviction_policy',
      help: "The Redis token store's maxmemory-policy read at start, as a label with value 1 (unknown: CONFIG disabled); anything but noeviction evicts live tokens under memory pressure.",
      labelNames: ['policy'],
      registers: [registry],
      aggregator: 'max',
    }),
  };
}

/** The primary's own metrics with `serve --workers N` (its /metrics adds the workers' aggregated ones). */
export interface PrimaryMetrics {
  registry: Registry;
  /** `iam_workers`: worker processes listening now. */
  workers: Gauge;
  /** `iam_worker_restarts_total{reason}`: workers started to replace one that exited (crashed) or stopped alone (stopped). */
  workerRestarts: Counter<'reason'>;
}

/**
 * The primary's registry: the worker gauges and its own process metrics (`iam_process_*`: CPU and memory of the
 * primary, summed with the workers'; the `iam_nodejs_*` event-loop and heap figures are the workers' alone).
 */
export function createPrimaryMetrics(): PrimaryMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'iam_' });
  for (const metric of registry.getMetricsAsArray()) {
    if (!metric.name.startsWith('iam_process_')) registry.removeSingleMetric(metric.name);
  }
  return {
    registry,
    workers: new Gauge({ name: 'iam_workers', help: 'Worker processes serving the proxy port (serve --workers N), listening now.', registers: [registry] }),
    workerRestarts: new Counter({
      name: 'iam_worker_restarts_total',
      help: 'Worker processes started to replace one that exited, by reason (crashed: exited on its own or killed; stopped: SIGTERM or SIGINT to that worker alone); a count of starts.',
      labelNames: ['reason'],
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
  private forwarded: CounterCell | null = null;
  /** Index = status class (2 for 2xx). */
  private readonly durations: Array<HistogramCell | undefined> = [];

  constructor(private readonly metrics: GatewayMetrics) {}

  /** `iam_http_*` children per route and method (route patterns and methods are bounded by the policy). */
  /** Route pattern → method → its cells (route patterns and methods are bounded by the policy and the method set). */
  private readonly routes = new Map<string, Map<string, { duration: HistogramCell; counts: Array<CounterCell | undefined> }>>();
  private readonly decisions: Array<HistogramCell | undefined> = [];

  /** A proxied request answered (forwarded, denied or failed): RED per route pattern. */
  answered(route: string | undefined, method: string, status: number, seconds: number): void {
    const routeLabel = route ?? 'none';
    const methodLabel = STANDARD_METHODS.has(method) ? method : 'OTHER';
    let methods = this.routes.get(routeLabel);
    if (methods === undefined) {
      methods = new Map();
      this.routes.set(routeLabel, methods);
    }
    let cells = methods.get(methodLabel);
    if (cells === undefined) {
      cells = { duration: this.metrics.httpDuration.cell(routeLabel), counts: [] };
      methods.set(methodLabel, cells);
    }
    const statusClass = Math.floor(status / 100);
    (cells.counts[statusClass] ??= this.metrics.httpRequests.cell(routeLabel, methodLabel, `${statusClass}xx`)).inc();
    cells.duration.observe(seconds);
  }

  /** The time a decision took: index 0 allow, 1 deny (a refusal or a failure). */
  decided(allowed: boolean, seconds: number): void {
    const index = allowed ? 0 : 1;
    (this.decisions[index] ??= this.metrics.decisionDuration.cell(allowed ? 'allow' : 'deny')).observe(seconds);
  }

  /** A request the host answered: counts it and records the time to the response headers. */
  forwardedResponse(statusCode: number, seconds: number): void {
    (this.forwarded ??= this.metrics.requests.cell('forwarded')).inc();
    const statusClass = Math.floor(statusCode / 100);
    (this.durations[statusClass] ??= this.metrics.upstreamDuration.cell(`${statusClass}xx`)).observe(seconds);
  }
}
