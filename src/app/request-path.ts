import type { DestinationStream } from 'pino';
import type { AuditTrail } from '../audit/audit-trail';
import type { DecisionEngine } from '../authz/decision-engine';
import type { GatewayConfig } from '../config';
import type { CandidateDecisions } from '../gateway/candidate-decisions';
import { CorsPolicy } from '../gateway/cors';
import { ForwardAuthHandler } from '../gateway/forward-auth-handler';
import { ProxyHandler } from '../gateway/proxy-handler';
import { RequestAuthorizer, type RequestAuthorizerDeps } from '../gateway/request-authorizer';
import { UpstreamForwarder } from '../gateway/upstream-forwarder';
import { WebSocketForwarder } from '../gateway/websocket-forwarder';
import type { PageBranding } from '../http/page-layout';
import { AccessLog } from '../observability/access-log';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { OutageLog } from '../observability/outage-log';
import type { CleanupStack } from './cleanup-stack';
import { browserLoginPath, browserSignOutPath } from './iam-api';
import type { Preflight } from './preflight';
import type { SessionState } from './sessions';
import type { TracingState } from './tracing';

/** What answers a request on the proxy port that is not for `/iam`: the one authorizer, the proxy, forward-auth. */
export interface RequestPath {
  proxy: ProxyHandler;
  forwardAuth: ForwardAuthHandler;
  cors: CorsPolicy | null;
  accessLog: AccessLog | null;
  isTrustedProxy: (address: string | undefined) => boolean;
}

/**
 * The per-request subsystem: one {@link RequestAuthorizer} (match, credential, decision, identity headers) shared by
 * the proxy, WebSocket upgrades and forward-auth; the upstream forwarder; the access log. Its parts close through
 * `cleanups`.
 */
export function startRequestPath(
  config: GatewayConfig,
  deps: {
    policy: RequestAuthorizerDeps['policy'];
    callers: RequestAuthorizerDeps['callers'];
    engine: Pick<DecisionEngine, 'decideRequestFast' | 'coveredFast'>;
    candidate: CandidateDecisions | null;
    signer: Preflight['signer'];
    branding: PageBranding;
    state: Pick<SessionState, 'tunnels'>;
    audit: AuditTrail;
    outages: OutageLog;
    tracing: TracingState;
    isTrustedProxy: (address: string | undefined) => boolean;
    logger: Logger;
    metrics: GatewayMetrics;
    cleanups: CleanupStack;
    /** Where the access log goes (default: stdout). */
    accessLogDestination: DestinationStream | undefined;
    /** The cluster id of a worker of `serve --workers N` (the access log's `worker` field); null in one process. */
    workerId: number | null;
  },
): RequestPath {
  const { logger, metrics, cleanups, signer, isTrustedProxy } = deps;
  if (signer && !config.iam.forward.assertion.keyFile) logger.warn({}, 'assertion: no iam.forward.assertion.key-file; signing with a key generated at start (verifiable on this instance only)');
  const cors = config.iam.cors.enabled ? new CorsPolicy(config.iam.cors) : null;
  const forwarder = new UpstreamForwarder({ ...config.upstream, stripCorsHeaders: cors !== null });
  cleanups.push('upstream forwarder', () => forwarder.close());
  const authorizer = new RequestAuthorizer({
    policy: deps.policy,
    callers: deps.callers,
    engine: deps.engine,
    audit: deps.audit,
    metrics,
    logger,
    trustedOrigins: new Set(config.iam.sessionCookie.trustedOrigins),
    signAssertion: signer ? (decision, session, method, path, requestId, audience) => signer.sign(decision, session, method, path, requestId, audience) : null,
    candidate: deps.candidate,
  });
  const accessLog =
    config.iam.accessLog.mode === 'off'
      ? null
      : new AccessLog(config.iam.accessLog.mode, config.iam.accessLog.sample, deps.accessLogDestination, deps.workerId === null ? undefined : { worker: deps.workerId });
  if (accessLog) cleanups.push('access log', async () => accessLog.close());
  const loginPath = browserLoginPath(config);
  const proxy = new ProxyHandler({
    authorizer,
    forwarder,
    websockets: new WebSocketForwarder({ ...config.upstream, idleTimeoutMs: config.upstream.websocketIdleTimeoutMs }, deps.state.tunnels),
    metrics,
    logger,
    isTrustedProxy,
    browserLogin: loginPath === null ? null : { path: loginPath, secureCookie: config.iam.sessionCookie.secure, signOutPath: browserSignOutPath(config) },
    branding: deps.branding,
    tracer: deps.tracing.tracer,
    accessLog,
  });
  // Forward-auth checks take the proxy's path (the same authorizer), not the /iam application's.
  const forwardAuth = new ForwardAuthHandler({
    authorizer,
    metrics,
    target: { allowPathParameters: config.iam.gateway.allowPathParameters, maxUrlLength: config.server.maxUrlLength },
    logger,
    outages: deps.outages,
    tracer: deps.tracing.tracer,
    accessLog,
  });
  return { proxy, forwardAuth, cors, accessLog, isTrustedProxy };
}
