import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ProblemError, problems } from '../domain/problem';
import { answerClientErrors } from '../http/client-errors';
import { isIamPath, PREPARED_REQUEST, prepareRequest, type PreparedRequest, type PrepareOptions, type RefusedRequest, type RequestWithPrepared } from '../http/prepare-request';
import { sendProblem, sendProblemOnSocket } from '../http/problem-response';
import { refuseOnClosedConnections, serverOptions, type ServerLimits } from '../http/server-lifecycle';
import type { GatewayMetrics } from '../observability/metrics';
import type { CorsPolicy } from './cors';
import type { ForwardAuthHandler } from './forward-auth-handler';
import type { ProxyHandler } from './proxy-handler';
import type { RequestTracer } from '../observability/tracing';
import type { AccessLog } from '../observability/access-log';
import { RefusalLog } from './refusal-log';

/** The proxy port's parser limits and timeouts (`server.*`, docs/configuration.md). */
export type ProxyServerLimits = ServerLimits;

/**
 * The proxy port's `node:http` server with the limits every port shares (http/server-lifecycle.ts serverOptions).
 * Node's own missing-Host check answers a bare 400 without a problem body; with `requireHostHeader: false` the
 * caller refuses it itself as IAM_BAD_REQUEST (RFC 9112 §3.2, docs/http-contract.md).
 */
export function createProxyServer(limits: ProxyServerLimits, requireHostHeader: boolean, listener: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer({ ...serverOptions(limits), requireHostHeader }, refuseOnClosedConnections(listener));
  answerClientErrors(server);
  return server;
}

export interface FrontDoorDeps {
  limits: ProxyServerLimits;
  prepare: PrepareOptions;
  /** Answers CORS preflights and adds the CORS response headers; null when `iam.cors.enabled` is false. */
  cors: CorsPolicy | null;
  /** The `/iam` application (Koa's callback): receives requests whose normalized path is under `/iam`. */
  iam: (req: IncomingMessage, res: ServerResponse) => unknown;
  /**
   * `GET`/`HEAD /iam/authorization/forward-auth`, answered here like a proxied request, before the `/iam`
   * application (its other methods stay there: 405, OPTIONS); null or absent: the `/iam` application answers it.
   */
  forwardAuth?: Pick<ForwardAuthHandler, 'accepts' | 'handle'> | null;
  /** Everything else: authorized and forwarded to the host. */
  proxy: Pick<ProxyHandler, 'handle' | 'handleUpgrade'>;
  metrics: GatewayMetrics;
  /** With tracing on, every `/iam` request gets its server span (proxied requests get theirs in the proxy handler). */
  tracer?: RequestTracer | null;
  /** `iam.access-log` (null when off): requests refused here get their line in every mode. */
  accessLog?: AccessLog | null;
}

/** The name of an `/iam` request's span until the app names it after the route it matched (none: it stays so). */
export const IAM_SPAN_ROUTE = '/iam/*';

/**
 * The gateway's front door: every connection to the proxy port arrives here. Each request is prepared
 * (target normalized, client headers checked: http/prepare-request.ts), then dispatched to the `/iam`
 * application, to forward-auth (gateway/forward-auth-handler.ts: the proxy's decision without Koa) or to the
 * proxy. What a client may send around a request is answered here too: `Expect`
 * (only `100-continue`, and only after the request passed the same checks), `CONNECT` (never a tunnel) and
 * upgrades (only through the proxy's WebSocket path, never to `/iam`).
 */
export function createFrontDoor(deps: FrontDoorDeps): Server {
  const { prepare, cors, iam, proxy, metrics } = deps;
  const forwardAuth = deps.forwardAuth ?? null;
  const tracer = deps.tracer ?? null;
  const refusals = new RefusalLog({ metrics, tracer, accessLog: deps.accessLog ?? null });
  const onRequest = (req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void => {
    const prepared = prepareRequest(req, prepare);
    if (!prepared.ok) return refusals.refuse(prepared.refused, req.headers, prepared.problem, () => sendProblem(res, prepared.problem, '/', prepared.refused.requestId));
    const request = prepared.request;
    if (cors) {
      if (cors.isPreflight(req)) return cors.answerPreflight(req, res, request.path, request.requestId);
      for (const [name, value] of cors.responseHeaders(req.headers.origin)) res.setHeader(name, value);
    }
    if (isIamPath(request.path)) {
      if (forwardAuth !== null && forwardAuth.accepts(request)) return forwardAuth.handle(req, res, request, expectContinue);
      if (expectContinue) res.writeContinue();
      (req as RequestWithPrepared)[PREPARED_REQUEST] = request;
      req.url = request.path + request.search;
      if (tracer === null) {
        void iam(req, res);
        return;
      }
      // Named `METHOD /iam/*` here: the /iam app renames it after the route pattern it matched (the path is the
      // client's choice and carries session and decision ids).
      const span = tracer.startSampled({ method: request.method, route: IAM_SPAN_ROUTE, path: request.path, headers: req.headers, clientAddress: request.clientAddress, trustedPeer: request.trustedPeer });
      if (span === null) {
        void iam(req, res);
        return;
      }
      res.once('close', () => span.end(res.statusCode));
      span.run(() => void iam(req, res));
      return;
    }
    void proxy.handle(req, res, request, expectContinue);
  };

  const server = createProxyServer(deps.limits, false, (req, res) => onRequest(req, res, false));
  server.on('checkContinue', refuseOnClosedConnections((req: IncomingMessage, res: ServerResponse) => onRequest(req, res, true)));
  // Any other expectation: Node would answer a bare 417; answer a problem instead, and never forward it.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const prepared = prepareRequest(req, prepare);
    if (!prepared.ok) return refusals.refuse(prepared.refused, req.headers, prepared.problem, () => sendProblem(res, prepared.problem, '/', prepared.refused.requestId));
    const request = prepared.request;
    const problem = problems.badRequest('Only "Expect: 100-continue" is supported (RFC 9110 §10.1.1).');
    refusals.refuse(refusedAs(request), req.headers, problem, () => sendProblem(res, problem, request.path, request.requestId));
  });
  // CONNECT asks for a tunnel (RFC 9110 §9.3.6), which a reverse proxy never opens; without a listener
  // Node drops the socket without a word.
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    const prepared = prepareRequest(req, prepare);
    const refused = prepared.ok ? refusedAs(prepared.request) : prepared.refused;
    const problem = new ProblemError('IAM_METHOD_NOT_ALLOWED', 'CONNECT is not supported: the gateway opens no tunnels.');
    refusals.refuse(refused, req.headers, problem, () => sendProblemOnSocket(socket, problem, '/', refused.requestId));
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const prepared = prepareRequest(req, prepare);
    if (!prepared.ok) return refusals.refuse(prepared.refused, req.headers, prepared.problem, () => sendProblemOnSocket(socket, prepared.problem, '/', prepared.refused.requestId));
    const request = prepared.request;
    if (isIamPath(request.path)) {
      const problem = new ProblemError('IAM_NOT_FOUND', 'The gateway endpoints do not accept upgrades.');
      return refusals.refuse(refusedAs(request), req.headers, problem, () => sendProblemOnSocket(socket, problem, request.path, request.requestId));
    }
    void proxy.handleUpgrade(req, socket, head, request);
  });
  return server;
}

/** A request that was prepared but is refused all the same (an unmet `Expect`, an upgrade to `/iam`). */
function refusedAs(request: PreparedRequest): RefusedRequest {
  return { requestId: request.requestId, method: request.method, path: request.path, clientAddress: request.clientAddress, trustedPeer: request.trustedPeer };
}
