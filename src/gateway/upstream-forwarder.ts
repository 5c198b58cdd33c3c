import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import { ProblemError } from '../domain/problem';

export interface ForwarderOptions {
  url: string;
  connections: number;
  connectTimeoutMs: number;
  responseTimeoutMs: number;
  bodyTimeoutMs: number;
  /** Drop the host's `Access-Control-*` response headers: the gateway answers CORS itself (iam.cors.enabled). */
  stripCorsHeaders?: boolean;
}

export interface ForwardRequest {
  method: string;
  /** Normalized path plus the original query: exactly what was authorized. */
  path: string;
  /** Flat `[name, value, ...]` list built by buildUpstreamHeaders. */
  headers: string[];
  /** Echoed to the client as X-Request-Id. */
  requestId: string;
  /** Called once the upstream's answer starts (for metrics). */
  onResponse?: (statusCode: number) => void;
  /** Called when the exchange fails before a response started: the caller answers with the problem. */
  onProblem: (problem: ProblemError) => void;
}

/** RFC 9110 §7.6.1: connection-specific response headers a proxy must not forward. */
const HOP_BY_HOP_RESPONSE = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authenticate']);

/**
 * Forwards authorized requests to the host over a keep-alive undici Pool, streaming both bodies with
 * back-pressure. Requests are never retried (a non-idempotent request must reach the host at most once).
 */
export class UpstreamForwarder {
  private readonly pool: Pool;
  readonly origin: string;

  constructor(private readonly options: ForwarderOptions) {
    const url = new URL(options.url);
    this.origin = url.origin;
    this.pool = new Pool(url.origin, {
      connections: options.connections,
      connectTimeout: options.connectTimeoutMs,
      headersTimeout: options.responseTimeoutMs,
      bodyTimeout: options.bodyTimeoutMs,
      keepAliveTimeout: 4_000,
      pipelining: 1,
    });
  }

  forward(req: IncomingMessage, res: ServerResponse, request: ForwardRequest): void {
    // The client may have left while the request was authorized: nothing is sent for it.
    if (res.destroyed || req.socket.destroyed) return;
    const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
    const stripCors = this.options.stripCorsHeaders === true;
    const stallLimitMs = this.options.bodyTimeoutMs;
    let controller: Dispatcher.DispatchController | null = null;
    let done = false;
    let stall: NodeJS.Timeout | null = null;
    // Ends the exchange at whatever stage it is: waiting for a pooled connection (aborted as soon as undici
    // hands it one, before a byte is written), sending, or streaming the answer. Never waits on `res` again.
    const abort = (reason: string): void => {
      if (done) return;
      done = true;
      if (stall) clearTimeout(stall);
      controller?.abort(new Error(reason));
      if (!res.destroyed) res.destroy();
    };
    res.once('close', () => abort('client went away'));
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(ctrl) {
        controller = ctrl;
        if (done) ctrl.abort(new Error('client went away'));
      },
      onResponseStart(ctrl, statusCode, headers, statusMessage) {
        if (done) return ctrl.abort(new Error('client went away'));
        request.onResponse?.(statusCode);
        // Flat [name, value, ...] as writeHead takes it; set-cookie stays one name with an array value.
        const out: Array<string | string[]> = [];
        const connectionTokens = headerTokens(headers.connection);
        for (const name in headers) {
          const value = headers[name];
          if (value === undefined || HOP_BY_HOP_RESPONSE.has(name) || connectionTokens?.has(name) || name === 'x-request-id') continue;
          if (stripCors && name.startsWith('access-control-')) continue;
          out.push(name, value);
        }
        out.push('x-request-id', request.requestId);
        res.writeHead(statusCode, statusMessage || undefined, out as string[]);
      },
      onResponseData(ctrl, chunk) {
        if (done) return ctrl.abort(new Error('client went away'));
        // Back-pressure: pause the host's body until the client has drained (listener only when needed).
        // undici's body timeout does not run while paused: a client that stops reading gets body-timeout
        // to drain, then the exchange is cut and the pooled connection freed.
        if (!res.write(chunk)) {
          ctrl.pause();
          stall = setTimeout(() => abort('client stopped reading'), stallLimitMs);
          res.once('drain', () => {
            if (stall) clearTimeout(stall);
            stall = null;
            if (!done) ctrl.resume();
          });
        }
      },
      onResponseEnd() {
        if (done) return;
        done = true;
        res.end();
      },
      onResponseError(_ctrl, error) {
        if (done) return;
        done = true;
        if (stall) clearTimeout(stall);
        if (!res.headersSent) request.onProblem(upstreamProblem(error));
        else res.destroy(error);
      },
    };
    this.pool.dispatch(
      {
        method: request.method as Dispatcher.HttpMethod,
        path: request.path,
        headers: request.headers,
        body: hasBody ? req : null,
        idempotent: false,
      },
      handler,
    );
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  async destroy(): Promise<void> {
    await this.pool.destroy();
  }
}

function headerTokens(value: string | string[] | undefined): Set<string> | null {
  // The usual values name no other header: skip building a set for them on every response.
  if (value === undefined || value === 'keep-alive' || value === 'close') return null;
  const joined = Array.isArray(value) ? value.join(',') : value;
  return new Set(joined.split(',').map((token) => token.trim().toLowerCase()).filter(Boolean));
}

/** Maps a transport failure to the problem the client sees (docs/http-contract.md). */
export function upstreamProblem(error: Error & { code?: string }): ProblemError {
  const code = error.code ?? '';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new ProblemError('IAM_UPSTREAM_TIMEOUT', 'The host did not answer in time.', { cause: error });
  }
  return new ProblemError('IAM_UPSTREAM_UNAVAILABLE', 'The host cannot be reached.', { cause: error });
}
