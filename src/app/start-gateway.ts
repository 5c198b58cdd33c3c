import { AssertionVerifier } from '../auth/assertion-verifier';
import { DecisionEngine } from '../authz/decision-engine';
import { ResolutionBudget } from '../authz/resolution-budget';
import { ResourceResolverClient } from '../authz/resource-resolver';
import { createFrontDoor, createProxyServer } from '../gateway/front-door';
import { createTransparentProxy } from '../gateway/transparent-proxy';
import { sessionCookieName } from '../http/session-cookie';
import { compileTrustedProxies } from '../http/trusted-proxies';
import { createLogger, type Logger } from '../observability/logger';
import { createMetrics, type GatewayMetrics } from '../observability/metrics';
import { OutageLog } from '../observability/outage-log';
import { startAudit } from './audit';
import { startLogins } from './logins';
import { startRequestPath } from './request-path';
import { preflight } from './preflight';
import { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from '../config';
import { openGatewayDatabase } from './database';
import { createIamApi } from './iam-api';
import { startListening, type PrimaryManagementPort } from './listeners';
import { localEndpoints } from './management-server';
import { startCandidatePolicy, startPolicy } from './policy';
import { CandidateDecisions } from '../gateway/candidate-decisions';
import { readinessChecks } from './readiness';
import { startSessions } from './sessions';
import { startTracing } from './tracing';
import type { DestinationStream } from 'pino';

import type { RunningGateway } from './running-gateway';

export type { GatewayServices, RunningGateway } from './running-gateway';

export interface StartOptions {
  logger?: Logger;
  /** Where the access log goes (default: stdout); tests capture it. */
  accessLogDestination?: DestinationStream;
  /** The environment the `OTEL_*` tracing variables are read from (default: the process's). */
  env?: NodeJS.ProcessEnv;
  /** The clock of the audit trail's per-minute budgets (default `Date.now`); tests move it instead of waiting. */
  auditClock?: () => number;
  /** Where the start's progress lines go (a new embedded database, migrations): serve prints them on stderr. */
  progress?: (line: string) => void;
}

/**
 * A worker process of `serve --workers N` (workers/): its cluster id (the `worker` field of its log and access
 * log lines) and its primary's management port. The primary ran the migrations and the start-time provisioning
 * before forking, and serves the management port for every worker.
 */
export interface WorkerRole {
  id: number;
  management: PrimaryManagementPort;
}

/**
 * The composition root (docs/architecture.md): the only place that knows the concrete classes. Each
 * subsystem is started by its own file in app/; this one puts them in order and hands the result to the
 * front door. A failed start closes whatever it had opened.
 */
export function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  return startGatewayAs(config, options, null);
}

/** {@link startGateway} in one process (`worker` null) or as a worker of `serve --workers N`. */
export async function startGatewayAs(config: GatewayConfig, options: StartOptions, worker: WorkerRole | null): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger(config.log.level);
  // What loading the configuration noticed (an IAM_… variable nothing reads), once: a worker's primary logged it.
  if (worker === null) for (const warning of config.warnings) logger.warn({}, warning);
  const metrics = createMetrics();
  if (!config.iam.enabled) return startTransparent(config, logger, metrics, worker);

  // Every file the configuration names is read and checked before anything is opened.
  const files = preflight(config);
  const cleanups = new CleanupStack(logger);
  const closeAuthenticator = files.authenticator.close?.bind(files.authenticator);
  if (closeAuthenticator) cleanups.push('authenticator', () => closeAuthenticator());
  try {
    const policy = await startPolicy(config, logger, metrics, cleanups);
    const candidatePolicy = await startCandidatePolicy(config, logger, metrics, cleanups);
    // A worker's primary applied the provisioning file once before forking (the migrations too: here they find nothing to do).
    const database = await openGatewayDatabase(config, logger, cleanups, worker === null ? files.provisioning : null, options.progress ?? null);
    const repository = database.repository;
    const audit = await startAudit(config, repository, logger, metrics, cleanups, options.auditClock);
    const state = await startSessions(config, { repository, logger, metrics, cleanups });
    const { store, sessions, grants } = state;

    const resolvers = new ResourceResolverClient({ metrics });
    cleanups.push('resource resolvers', () => resolvers.close());
    const engine = new DecisionEngine({ grants, resolvers });
    // A caller's check and diagnostics resolve ids of their own choosing: through a budget, on a pool of their own, so
    // no caller can queue the proxy's resolutions behind theirs.
    const { connections, ...limits } = config.iam.authz.callerResolutions;
    const callerResolvers = new ResourceResolverClient({ connections, metrics });
    cleanups.push('caller resource resolvers', () => callerResolvers.close());
    const resolutions = new ResolutionBudget(callerResolvers, limits, (reason) => metrics.callerResolutionsRefused.inc({ reason }));
    const candidate = candidatePolicy === null ? null : { holder: candidatePolicy.holder, decisions: new CandidateDecisions({ holder: candidatePolicy.holder, grants, metrics }) };
    const signer = files.signer;
    const { login, oidc, callers } = startLogins(config, files.authenticator, {
      repository,
      state,
      audit,
      logger,
      metrics,
      assertions: signer ? new AssertionVerifier(signer.key) : null,
      // The gateway accepts back every audience it issues: the configured one and the live policy's routes'.
      audiences: () => policy.holder.current.audiences,
    });
    const tracing = await startTracing(options.env ?? process.env, logger);
    cleanups.push('tracing', () => tracing.shutdown());
    const outages = new OutageLog(logger, { probes: { database: () => repository.ping(), tokenStore: () => store.ping() } });
    cleanups.push('outage log', async () => outages.close());
    const isTrustedProxy = compileTrustedProxies(config.iam.forward.trustedProxies);
    const { proxy, forwardAuth, cors, accessLog } = startRequestPath(config, {
      policy: () => policy.holder.current,
      callers,
      engine,
      candidate: candidate?.decisions ?? null,
      signer,
      branding: files.branding,
      state,
      audit,
      outages,
      tracing,
      isTrustedProxy,
      logger,
      metrics,
      cleanups,
      accessLogDestination: options.accessLogDestination,
      workerId: worker === null ? null : worker.id,
    });
    const iam = createIamApi(config, {
      logger,
      branding: files.branding,
      outages,
      repository,
      admin: database.admin,
      sessions,
      grants,
      changes: state.changes,
      login,
      engine,
      resolutions,
      policy: policy.holder,
      candidate,
      audit,
      jwks: () => (signer ? [signer.jwk] : []),
      oidc,
      callers,
      metrics,
    });

    let shuttingDown = false;
    const server = createFrontDoor({
      limits: config.server,
      prepare: {
        allowPathParameters: config.iam.gateway.allowPathParameters,
        maxUrlLength: config.server.maxUrlLength,
        isTrustedProxy,
        sessionCookie: sessionCookieName(config.iam.sessionCookie.secure),
      },
      cors,
      iam,
      forwardAuth,
      proxy,
      metrics,
      tracer: tracing.tracer,
      accessLog,
    });
    const endpoints = localEndpoints({
      registry: metrics.registry,
      isShuttingDown: () => shuttingDown,
      logger,
      checks: readinessChecks({ repository, databaseKind: database.kind, store, storeKind: state.storeKind, storeDetail: state.storeDetail, channelUp: state.channelUp, policy: policy.holder }),
    });
    return await startListening(config, logger, metrics, server, endpoints, {
      ...(worker === null ? {} : { primary: worker.management }),
      services: { repository, store: state.backingStore, sessions, login, engine, grants, policy: policy.holder, policyReloader: policy.reloader, audit, subscription: state.subscription },
      beforeStop: () => {
        shuttingDown = true;
        state.tunnels.closeAll('shutdown');
      },
      afterStop: () => cleanups.run(),
    });
  } catch (error) {
    await cleanups.run();
    throw error;
  }
}

/** `iam.enabled: false`, the rollback switch: a plain reverse proxy with the same limits, no `/iam`. */
async function startTransparent(config: GatewayConfig, logger: Logger, metrics: GatewayMetrics, worker: WorkerRole | null): Promise<RunningGateway> {
  const forwarder = createTransparentProxy(config.upstream);
  const cleanups = new CleanupStack(logger);
  cleanups.push('upstream forwarder', () => forwarder.close());
  let shuttingDown = false;
  // Node's own missing-Host check applies here: there is no request preparation to refuse it with a problem.
  const server = createProxyServer(config.server, true, forwarder.handle);
  server.on('upgrade', forwarder.handleUpgrade);
  const endpoints = localEndpoints({ registry: metrics.registry, isShuttingDown: () => shuttingDown, checks: [], logger });
  logger.warn({}, 'iam.enabled is false: transparent proxy, no /iam endpoints, no token or policy checks');
  return startListening(config, logger, metrics, server, endpoints, {
    ...(worker === null ? {} : { primary: worker.management }),
    services: null,
    beforeStop: () => {
      shuttingDown = true;
      forwarder.tunnels.closeAll('shutdown');
    },
    afterStop: () => cleanups.run(),
  });
}
