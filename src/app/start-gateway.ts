import Router from '@koa/router';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { readProvisioningFile } from '../api/provisioning-file';
import { AuditRetention } from '../audit/audit-retention';
import { AuditSpool } from '../audit/audit-spool';
import { AuditTrail } from '../audit/audit-trail';
import { createAuthenticator } from './authenticator';
import { LoginRateLimiter } from '../auth/login-rate-limiter';
import { LoginService } from '../auth/login-service';
import { DecisionEngine } from '../authz/decision-engine';
import { GrantProvider } from '../authz/grant-provider';
import { ResourceResolverClient } from '../authz/resource-resolver';
import type { GatewayConfig } from './config/gateway-config';
import { isIamPath, prepareRequest } from '../http/prepare-request';
import { sendProblem } from '../http/problem-response';
import { ProxyHandler } from '../gateway/proxy-handler';
import { compileTrustedProxies } from '../http/trusted-proxies';
import { UpstreamForwarder } from '../gateway/upstream-forwarder';
import { TunnelRegistry } from '../gateway/tunnel-registry';
import { WebSocketForwarder } from '../gateway/websocket-forwarder';
import { AssertionSigner } from '../gateway/assertion-signer';
import { CorsPolicy } from '../gateway/cors';
import { sendProblemOnSocket } from '../http/problem-response';
import { ProblemError } from '../domain/problem';
import { AdminService } from '../api/admin-service';
import { registerAdminRoutes } from '../api/admin-routes';
import { registerAuthRoutes } from '../api/auth-routes';
import { registerAuthorizationRoutes } from '../api/authorization-routes';
import { createIamApp } from '../api/iam-app';
import { PREPARED_REQUEST, type RequestWithPrepared } from '../api/iam-context';
import { problems } from '../domain/problem';
import { requireSession } from '../api/require-session';
import { registerSessionRoutes } from '../api/session-routes';
import { registerOpenApiRoutes } from '../api/openapi-routes';
import { createLogger, type Logger } from '../observability/logger';
import { createMetrics, type GatewayMetrics } from '../observability/metrics';
import { OutageLog } from '../observability/outage-log';
import { openDatabaseThread } from '../adapters/postgres/database-thread';
import type { IamRepository } from '../domain/iam-repository';
import { loadPolicyDirectory } from '../policy/load-policy-directory';
import { PolicyHolder } from '../policy/policy-holder';
import { PolicyReloader } from '../policy/policy-watcher';
import { ChangeFeed } from '../sessions/change-feed';
import { LastSeenTracker } from '../sessions/last-seen-tracker';
import { MemoryTokenStore } from '../adapters/memory/memory-token-store';
import { RedisTokenStore } from '../adapters/redis/redis-token-store';
import { RevocationRegistry } from '../sessions/revocation-registry';
import { SessionCache } from '../sessions/session-cache';
import { SessionService } from '../sessions/session-service';
import type { StoreEvent } from '../domain/token-record';
import type { EventSubscription, TokenStore } from '../domain/token-store';
import { answerClientErrors } from '../http/client-errors';
import { createManagementServer } from './management-server';
import { listen, refuseOnClosedConnections, settlesWithin, SHUTDOWN_CLEANUP_GRACE_MS, stopServer, timeoutSweepInterval, trackConnections } from '../http/server-lifecycle';
import { createTransparentProxy } from '../gateway/transparent-proxy';

/** A started gateway: both ports listening. */
export interface RunningGateway {
  /** Base URL of the proxy port, e.g. http://127.0.0.1:8080. */
  url: string;
  port: number;
  managementUrl: string;
  managementPort: number;
  logger: Logger;
  metrics: GatewayMetrics;
  /** Present when `iam.enabled`. */
  services: GatewayServices | null;
  /** Graceful stop: readiness fails, listeners close, in-flight requests finish (up to the shutdown timeout). */
  close(): Promise<void>;
}

/** The wired services, for the CLI, tests and the admin API. */
export interface GatewayServices {
  repository: IamRepository;
  store: TokenStore;
  sessions: SessionService;
  login: LoginService;
  engine: DecisionEngine;
  grants: GrantProvider;
  policy: PolicyHolder;
  /** Hot reload of the policies directory (file events, periodic checksum, SIGHUP). */
  policyReloader: PolicyReloader;
  audit: AuditTrail;
  subscription: EventSubscription;
}

export interface StartOptions {
  logger?: Logger;
}

/** The composition root: the only place that knows the concrete classes. */
export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger(config.log.level);
  const metrics = createMetrics();
  if (!config.iam.enabled) return startTransparent(config, logger, metrics);

  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async (): Promise<void> => {
    for (const step of cleanups.reverse()) await step().catch((error: unknown) => logger.warn({ err: error }, 'shutdown step failed'));
  };
  try {
    const policyResult = await loadPolicyDirectory(config.iam.policy.dir, { defaultResolverTimeoutMs: config.iam.authz.resolverTimeoutMs });
    for (const issue of policyResult.issues) {
      const where = issue.source ? `${issue.source.file}:${issue.source.line}: ` : '';
      logger[issue.severity === 'error' ? 'error' : 'warn']({ kind: issue.kind }, `policy: ${where}${issue.message}`);
    }
    if (!policyResult.policy) throw new Error(`policy: ${config.iam.policy.dir} has errors; see the log above`);
    metrics.policyReloads.inc({ result: 'success' });
    metrics.policyRoutes.set(policyResult.policy.routes.length);
    const policy = new PolicyHolder(policyResult.policy);
    const policyReloader = new PolicyReloader({
      dir: config.iam.policy.dir,
      holder: policy,
      debounceMs: config.iam.policy.debounceMs,
      pollIntervalMs: config.iam.policy.pollIntervalMs,
      defaultResolverTimeoutMs: config.iam.authz.resolverTimeoutMs,
      logger,
      metrics,
    });
    policyReloader.start();
    cleanups.push(() => policyReloader.close());
    // docs/policy-format.md: SIGHUP reloads the policies now (e.g. where file events are unreliable).
    const onSighup = (): void => void policyReloader.reload('SIGHUP');
    process.on('SIGHUP', onSighup);
    cleanups.push(async () => {
      process.off('SIGHUP', onSighup);
    });

    // The ORM runs on its own thread: the proxy's event loop never waits behind database work.
    const database = await openDatabaseThread(config, {
      onUnexpectedExit: ({ code, error }) => logger.error({ code, err: error }, 'database thread stopped unexpectedly; it restarts on the next database call'),
    });
    cleanups.push(() => database.close());
    const repository = database.repository;
    logger.info({ database: database.kind }, 'database ready, migrations applied');

    if (config.iam.provision.file) {
      // Create-missing only (#11.22): a restart never reverts an admin API edit; `provision FILE --overwrite` syncs.
      const summary = await repository.applyProvisioning(readProvisioningFile(config.iam.provision.file), {
        overwrite: false,
        audit: { actorUserId: 'provisioning', source: config.iam.provision.file },
      });
      logger.info({ file: config.iam.provision.file, created: summary.created, updated: summary.updated, unchanged: summary.unchanged }, 'provisioning applied');
    }

    // The durable revocation record, in memory: verification refuses what PostgreSQL says ended (#11.29).
    const revocationState = await repository.loadRevocationState();
    const revocations = new RevocationRegistry(config.iam.token.ttlMs);
    revocations.load(revocationState);

    const store: TokenStore = config.redis.url
      ? await RedisTokenStore.connect({ url: config.redis.url, prefix: config.iam.token.storePrefix, logger, slidingExpiry: config.iam.token.idleTimeoutMs > 0, refuseEvictingPolicy: true })
      : new MemoryTokenStore({ prefix: config.iam.token.storePrefix });
    cleanups.push(() => store.close());

    let subscription: EventSubscription | null = null;
    const channelUp = (): boolean => subscription?.connected === true;
    // Open WebSocket tunnels, closed when their session ends (the events below) or fails a recheck.
    const tunnels = new TunnelRegistry({ recheckIntervalMs: config.upstream.websocketRecheckIntervalMs, channelUp, logger });
    const cache = config.iam.token.cache.enabled ? new SessionCache(config.iam.token.cache.maxEntries, channelUp, config.iam.token.cache.revalidateMs) : null;
    if (cache) metrics.observeSessionCache(() => cache.size);
    const grants = new GrantProvider({ repository, maxEntries: config.iam.authz.abilityCacheSize, maxBytes: config.iam.authz.abilityCacheBytes, trustCache: channelUp });
    const audit = new AuditTrail(repository, logger, {
      flushIntervalMs: config.iam.audit.flushIntervalMs,
      spool: new AuditSpool(config.iam.audit.spoolDir),
      anonymousDenialsPerMinute: config.iam.audit.anonymousDenialsPerMinute,
    });
    audit.start();
    cleanups.push(() => audit.close());
    const retention = new AuditRetention(repository, logger, config.iam.audit.retentionMs);
    retention.start();
    cleanups.push(() => retention.close());
    const lastSeen = new LastSeenTracker(repository, logger);
    lastSeen.start();
    cleanups.push(() => lastSeen.close());
    let changes: ChangeFeed | null = null;
    const deliverChanges = { deliver: () => changes?.deliver() ?? Promise.resolve() };
    const sessions = new SessionService({
      store,
      repository,
      cache,
      lastSeen,
      audit,
      logger,
      ttlMs: config.iam.token.ttlMs,
      idleTimeoutMs: config.iam.token.idleTimeoutMs,
      maxSessionsPerUser: config.iam.token.maxSessionsPerUser,
      revocations,
      changes: deliverChanges,
    });
    cleanups.push(async () => void (await sessions.close()));
    const applyChange = (event: StoreEvent): void => {
      sessions.handleEvent(event);
      grants.handleEvent(event);
      // After the caches: a tunnel rechecked on this event must not be vouched for by a stale entry.
      tunnels.handleEvent(event);
    };
    subscription = await store.subscribe(
      applyChange,
      (connected) => {
        metrics.storeChannelConnected.set(connected ? 1 : 0);
        // While the channel was down, events may have been missed: nothing cached before stays trusted.
        if (connected) {
          cache?.clear();
          grants.clear();
        }
        tunnels.channelChanged(connected);
        logger[connected ? 'info' : 'warn']({}, connected ? 'store events channel connected' : 'store events channel lost: local caches bypassed');
      },
    );
    metrics.storeChannelConnected.set(subscription.connected ? 1 : 0);
    cleanups.push(() => subscription!.close());
    // The change feed: committed changes delivered until done, and read by every instance on an interval (#11.25).
    const feed = new ChangeFeed({ repository, store, apply: applyChange, logger, intervalMs: config.iam.changes.pollIntervalMs, cursor: revocationState.cursor });
    changes = feed;
    feed.start();
    cleanups.push(() => feed.close());
    // Start-time provisioning's changes (and any left undelivered by a stopped instance) go out now (#11.26).
    void feed.tick();

    const resolvers = new ResourceResolverClient();
    cleanups.push(() => resolvers.close());
    const engine = new DecisionEngine({ grants, resolvers });
    const authenticator = createAuthenticator(config.iam.authenticator, { maxPendingVerifications: config.iam.login.maxPendingVerifications });
    if (authenticator.type === 'none') logger.warn({}, 'iam.authenticator.type is none: logins are off (501 IAM_LOGIN_NOT_CONFIGURED) until an authenticator is configured');
    if (authenticator.close) cleanups.push(() => authenticator.close!());
    const login = new LoginService({
      authenticator,
      repository,
      sessions,
      store,
      changes: deliverChanges,
      audit,
      logger,
      rateLimiter: new LoginRateLimiter(store, config.iam.login.rateLimit),
    });

    const isTrustedProxy = compileTrustedProxies(config.iam.forward.trustedProxies);
    const assertion = config.iam.forward.assertion;
    const signer = assertion.enabled ? new AssertionSigner(assertion) : null;
    if (signer && !assertion.keyFile) logger.warn({}, 'assertion: no iam.forward.assertion.key-file; signing with a key generated at start (verifiable on this instance only)');
    const cors = config.iam.cors.enabled ? new CorsPolicy(config.iam.cors) : null;
    const forwarder = new UpstreamForwarder({ ...config.upstream, stripCorsHeaders: cors !== null });
    cleanups.push(() => forwarder.close());
    const proxy = new ProxyHandler({
      policy: () => policy.current,
      sessions,
      engine,
      forwarder,
      websockets: new WebSocketForwarder({ ...config.upstream, idleTimeoutMs: config.upstream.websocketIdleTimeoutMs }, tunnels),
      audit,
      metrics,
      logger,
      isTrustedProxy,
      signAssertion: signer ? (decision, session, method, path, requestId) => signer.sign(decision, session, method, path, requestId) : null,
    });

    const sessionGuard = requireSession(sessions);
    const outages = new OutageLog(logger, { probes: { database: () => repository.ping(), tokenStore: () => store.ping() } });
    cleanups.push(async () => outages.close());
    const iamApp = createIamApp({
      logger,
      outages,
      bodyLimit: config.server.iamBodyLimit,
      register: (router: Router) => {
        registerAuthRoutes(router, { login, sessions, clientTypes: config.iam.clientTypes, requireSession: sessionGuard });
        registerSessionRoutes(router, { sessions, requireSession: sessionGuard });
        registerOpenApiRoutes(router);
        router.get('/.well-known/jwks.json', (ctx) => {
          ctx.body = { keys: signer ? [signer.jwk] : [] };
          ctx.set('Cache-Control', 'public, max-age=300');
        });
        registerAuthorizationRoutes(router, {
          login,
          engine,
          proxy,
          policy: () => policy.current,
          audit,
          repository,
          requireSession: sessionGuard,
          allowPathParameters: config.iam.gateway.allowPathParameters,
          maxUrlLength: config.server.maxUrlLength,
        });
        const admin = new AdminService({ admin: database.admin, repository, sessions, changes: deliverChanges, audit });
        registerAdminRoutes(router, { admin, engine, grants, requireSession: sessionGuard });
      },
    });
    const iamCallback = iamApp.callback();

    const prepareOptions = { allowPathParameters: config.iam.gateway.allowPathParameters, maxUrlLength: config.server.maxUrlLength, isTrustedProxy };
    const onRequest = (req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void => {
      const prepared = prepareRequest(req, prepareOptions);
      if (!prepared.ok) {
        metrics.requests.inc({ outcome: 'refused' });
        sendProblem(res, prepared.problem, '/', prepared.requestId);
        return;
      }
      const request = prepared.request;
      if (cors) {
        if (cors.isPreflight(req)) return cors.answerPreflight(req, res, request.path, request.requestId);
        for (const [name, value] of cors.responseHeaders(req.headers.origin)) res.setHeader(name, value);
      }
      if (isIamPath(request.path)) {
        if (expectContinue) res.writeContinue();
        (req as RequestWithPrepared)[PREPARED_REQUEST] = request;
        req.url = request.path + request.search;
        void iamCallback(req, res);
        return;
      }
      void proxy.handle(req, res, request, expectContinue);
    };

    let shuttingDown = false;
    const server = createProxyServer(config, (req, res) => onRequest(req, res, false));
    server.on('checkContinue', refuseOnClosedConnections((req: IncomingMessage, res: ServerResponse) => onRequest(req, res, true)));
    // Any other expectation: Node would answer a bare 417; answer a problem instead, and never forward it.
    server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
      const prepared = prepareRequest(req, prepareOptions);
      metrics.requests.inc({ outcome: 'refused' });
      if (!prepared.ok) return sendProblem(res, prepared.problem, '/', prepared.requestId);
      sendProblem(res, problems.badRequest('Only "Expect: 100-continue" is supported (RFC 9110 §10.1.1).'), prepared.request.path, prepared.request.requestId);
    });
    // CONNECT asks for a tunnel (RFC 9110 §9.3.6), which a reverse proxy never opens; without a listener
    // Node drops the socket without a word.
    server.on('connect', (req: IncomingMessage, socket: Socket) => {
      const prepared = prepareRequest(req, prepareOptions);
      metrics.requests.inc({ outcome: 'refused' });
      const requestId = prepared.ok ? prepared.request.requestId : prepared.requestId;
      sendProblemOnSocket(socket, new ProblemError('IAM_METHOD_NOT_ALLOWED', 'CONNECT is not supported: the gateway opens no tunnels.'), '/', requestId);
    });
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      const prepared = prepareRequest(req, prepareOptions);
      if (!prepared.ok) return sendProblemOnSocket(socket, prepared.problem, '/', prepared.requestId);
      if (isIamPath(prepared.request.path)) {
        return sendProblemOnSocket(socket, new ProblemError('IAM_NOT_FOUND', 'The gateway endpoints do not accept upgrades.'), prepared.request.path, prepared.request.requestId);
      }
      void proxy.handleUpgrade(req, socket, head, prepared.request);
    });
    const management = createManagementServer({
      registry: metrics.registry,
      isShuttingDown: () => shuttingDown,
      server: config.server,
      logger,
      checks: [
        { name: 'database', check: async () => (await repository.ping(), { ok: true, detail: { kind: database.kind } }) },
        { name: 'tokenStore', check: async () => (await store.ping(), { ok: true, detail: { kind: store.kind, eventsConnected: channelUp(), ...(store instanceof RedisTokenStore ? { evictionPolicy: store.evictionPolicy } : {}) } }) },
        // Unsubscribed, revocations from other instances are not heard: caches are bypassed, and readiness says so.
        { name: 'eventsChannel', check: async () => ({ ok: channelUp(), detail: { connected: channelUp() } }) },
        { name: 'policy', check: async () => ({ ok: true, detail: policy.describe() }) },
      ],
    });
    return await startListening(config, logger, metrics, server, management, {
      services: { repository, store, sessions, login, engine, grants, policy, policyReloader, audit, subscription },
      beforeStop: () => {
        shuttingDown = true;
        tunnels.closeAll('shutdown');
      },
      afterStop: cleanup,
    });
  } catch (error) {
    await cleanup();
    throw error;
  }
}

function createProxyServer(config: GatewayConfig, listener: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer(
    {
      maxHeaderSize: config.server.maxHeaderSize,
      requestTimeout: config.server.requestTimeoutMs,
      headersTimeout: config.server.headersTimeoutMs,
      keepAliveTimeout: config.server.keepAliveTimeoutMs,
      // Node enforces the two timeouts above only when it sweeps connections, every 30 s by default: a
      // slowloris client would hold its socket up to 30 s past headers-timeout. Sweep often enough that
      // the configured timeouts are what clients get (test/integration/limits.test.ts).
      connectionsCheckingInterval: timeoutSweepInterval(config.server.headersTimeoutMs, config.server.requestTimeoutMs),
      // Refuse ambiguous framing instead of guessing (request smuggling, RFC 9112 §6.3).
      insecureHTTPParser: false,
      // Node's own missing-Host check answers a bare 400 without a problem body; with iam enabled,
      // prepareRequest refuses it as IAM_BAD_REQUEST instead (RFC 9112 §3.2, docs/http-contract.md).
      requireHostHeader: !config.iam.enabled,
    },
    refuseOnClosedConnections(listener),
  );
  answerClientErrors(server);
  return server;
}

async function startTransparent(config: GatewayConfig, logger: Logger, metrics: GatewayMetrics): Promise<RunningGateway> {
  const forwarder = createTransparentProxy(config.upstream);
  let shuttingDown = false;
  const server = createProxyServer(config, forwarder.handle);
  server.on('upgrade', forwarder.handleUpgrade);
  const management = createManagementServer({ registry: metrics.registry, isShuttingDown: () => shuttingDown, checks: [], server: config.server, logger });
  logger.warn({}, 'iam.enabled is false: transparent proxy, no /iam endpoints, no token or policy checks');
  return startListening(config, logger, metrics, server, management, {
    services: null,
    beforeStop: () => {
      shuttingDown = true;
      forwarder.tunnels.closeAll('shutdown');
    },
    afterStop: () => forwarder.close(),
  });
}

async function startListening(
  config: GatewayConfig,
  logger: Logger,
  metrics: GatewayMetrics,
  server: Server,
  management: Server,
  hooks: { services: GatewayServices | null; beforeStop: () => void; afterStop: () => Promise<void> },
): Promise<RunningGateway> {
  const connections = trackConnections(server);
  try {
    await listen(server, config.server.port, config.server.host);
    await listen(management, config.server.managementPort, config.server.managementHost);
  } catch (error) {
    // A failed start holds no port (#11.20): close whichever listener did open, then fail.
    await Promise.all([server, management].map((listener) => new Promise<void>((resolve) => (listener.listening ? listener.close(() => resolve()) : resolve()))));
    throw error;
  }
  const port = (server.address() as AddressInfo).port;
  const managementPort = (management.address() as AddressInfo).port;
  const host = urlHost(config.server.host);
  logger.info({ port, managementPort, upstream: config.upstream.url, enabled: config.iam.enabled }, 'iam-gateway listening');
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${port}`,
    port,
    managementUrl: `http://${urlHost(config.server.managementHost)}:${managementPort}`,
    managementPort,
    logger,
    metrics,
    services: hooks.services,
    close() {
      closing ??= (async () => {
        hooks.beforeStop();
        await stopServer(server, connections, config.server.shutdownTimeoutMs);
        await new Promise<void>((resolve) => management.close(() => resolve()));
        management.closeAllConnections();
        // Flushing the audit trail and closing pools needs the database and the token store; when they do
        // not answer (silent partition) the stop gives up after a grace instead of hanging forever.
        if (!(await settlesWithin(hooks.afterStop(), SHUTDOWN_CLEANUP_GRACE_MS))) {
          logger.error({ graceMs: SHUTDOWN_CLEANUP_GRACE_MS }, 'shutdown: cleanup did not finish in time (database or token store not answering); audit events neither written nor spooled by now are lost');
        }
        logger.info({}, 'iam-gateway stopped');
      })();
      return closing;
    },
  };
}

/** The address to reach a listener bound to `host` from this machine (wildcards → loopback; IPv6 in brackets). */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
