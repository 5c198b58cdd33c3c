import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** The proxy port's open sockets, and whether the server is draining (stopping). */
export interface TrackedConnections {
  sockets: Set<Socket>;
  draining: boolean;
}

type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

/**
 * Keeps the set of open sockets so shutdown can destroy, at its deadline, what is still open. During a drain,
 * every response tells its client to close the connection (RFC 9112 §9.6), and the connection closes once it
 * is sent, so nothing new arrives on a connection that is about to close.
 */
export function trackConnections(server: Server): TrackedConnections {
  const tracked: TrackedConnections = { sockets: new Set<Socket>(), draining: false };
  server.on('connection', (socket: Socket) => {
    tracked.sockets.add(socket);
    socket.once('close', () => tracked.sockets.delete(socket));
  });
  const onRequest = (_req: IncomingMessage, res: ServerResponse): void => {
    if (tracked.draining) res.shouldKeepAlive = false;
  };
  server.prependListener('request', onRequest);
  server.prependListener('checkContinue', onRequest);
  return tracked;
}

/**
 * Wraps a request listener: a request that arrives on a connection the gateway has already closed for
 * writing (after an answer that said `Connection: close`, which a client must not send past) is never
 * handled — its answer could not be delivered, and its client, told of the close, may safely send it again
 * elsewhere (RFC 9112 §9.3.1).
 */
export function refuseOnClosedConnections<A extends unknown[]>(listener: (req: IncomingMessage, res: ServerResponse, ...rest: A) => void) {
  return (req: IncomingMessage, res: ServerResponse, ...rest: A): void => {
    if (!req.socket.writable) return void req.socket.destroy();
    listener(req, res, ...rest);
  };
}

/**
 * Graceful stop (issue: SIGTERM): stop accepting, answer what is in flight and whatever arrives on a connection
 * already open with `Connection: close` (RFC 9112 §9.6), let it finish until `deadlineMs`, then destroy what is
 * left.
 *
 * An idle keep-alive connection is not closed when the stop begins. Its client may have sent a request on it at
 * that very moment (a client cannot know the server's close is on its way), and a request that arrives after the
 * server's FIN gets no answer at all — a "socket hang up" that the client cannot tell from a request the host
 * received, so it must not retry one that was not idempotent. Left open, such a request is answered (with
 * `Connection: close`), and a connection nobody uses is closed when its keep-alive timeout runs out — the moment
 * the `Keep-Alive: timeout=N` of its last answer announced, when it would have closed without a stop. Only a
 * connection still idle at `deadlineMs` (a keep-alive timeout at or above the shutdown timeout) is cut without
 * that notice.
 */
export async function stopServer(server: Server, tracked: TrackedConnections, deadlineMs: number): Promise<void> {
  tracked.draining = true;
  // Responses not started yet (requests being authorized or waiting for the host) close their connection too.
  for (const socket of tracked.sockets as Set<HttpSocket>) {
    const res = socket._httpMessage;
    if (res && !res.headersSent) res.shouldKeepAlive = false;
  }
  // server.close() closes idle connections at once (Node >= 19, closeIdleConnections): they stay open instead (above).
  server.closeIdleConnections = () => undefined;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const deadline = new Promise<void>((resolve) => setTimeout(resolve, deadlineMs).unref());
  await Promise.race([closed, deadline]);
  for (const socket of tracked.sockets) socket.destroy();
  await closed;
}

/**
 * Time allowed after the drain for one cleanup step (flushing buffered writes, closing a pool): a step whose
 * database or token store does not answer is left behind after it, and the next step runs.
 */
export const SHUTDOWN_STEP_GRACE_MS = 3000;

/** Time allowed after the drain for all the cleanup steps together (then the stop waits for none). */
export const SHUTDOWN_CLEANUP_GRACE_MS = 10_000;

/** The parser limits and timeouts of a listening port (`server.*`, docs/configuration.md). */
export interface ServerLimits {
  maxHeaderSize: number;
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

/**
 * `http.createServer` options for `limits`, the same on the proxy and the management port: Node's sweep runs often
 * enough that the configured timeouts are what clients get (a slowloris client would otherwise hold its socket up to
 * 30 s past headers-timeout: test/integration/limits.test.ts), and ambiguous framing is refused instead of guessed
 * (request smuggling, RFC 9112 §6.3).
 */
export function serverOptions(limits: ServerLimits): ServerOptions {
  return {
    maxHeaderSize: limits.maxHeaderSize,
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout: limits.headersTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: timeoutSweepInterval(limits.headersTimeoutMs, limits.requestTimeoutMs),
    insecureHTTPParser: false,
  };
}

/**
 * How often Node's HTTP server checks `headersTimeout`/`requestTimeout` (its `connectionsCheckingInterval`,
 * 30 s by default, which would let a slowloris client hold a socket up to 30 s past the configured timeout):
 * a quarter of the shortest enabled timeout, between 100 ms and 1 s.
 */
export function timeoutSweepInterval(...timeoutsMs: number[]): number {
  const enabled = timeoutsMs.filter((ms) => ms > 0);
  if (enabled.length === 0) return 1000;
  return Math.min(1000, Math.max(100, Math.floor(Math.min(...enabled) / 4)));
}
