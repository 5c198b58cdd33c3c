import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import { ProblemError } from '../domain/problem';
import { BoundedBody, filterList, isFilteredStatus, unfilterableAnswer, UNFILTERED_BODY_HEADERS, type ListFilterPlan } from './list-filter';

export interface ForwarderOptions {
  url: string;
  connections: number;
  connectTimeoutMs: number;
  responseTimeoutMs: number;
  bodyTimeoutMs: number;
  /** Drop the host's `Access-Control-*` response headers: the gateway answers CORS itself (iam.cors.enabled). */
  stripCorsHeaders?: boolean;
  /**
   * `upstream.filter-max-bytes`: the largest answer a filtered list route reads; 502 above. A forwarder without it (the
   * transparent proxy, the bench's bare forwarder) is never given a filtered request; if it were, it would refuse it.
   */
  filterMaxBytes?: number;
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
  /**
   * The list filter of a filtered route's request (gateway/list-filter.ts): a 2xx answer is read whole (at most
   * `filterMaxBytes`), filtered and sent with its own `Content-Length`, or refused with 502 `IAM_FILTER_FAILED`, never
   * sent unfiltered. Absent: the answer streams as the host sends it.
   */
  filter?: ListFilterPlan | null;
  /** With `filter`: what the filter kept and removed, called just before the filtered answer is sent. */
  onFiltered?: (counts: { kept: number; removed: number }) => void;
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
    const filter = request.filter ?? null;
    const filterMaxBytes = this.options.filterMaxBytes ?? 0;
    let controller: Dispatcher.DispatchController | null = null;
    let done = false;
    let stall: NodeJS.Timeout | null = null;
    /** A filtered answer being read: its status line and headers wait for the whole body. */
    let pending: { statusCode: number; statusMessage: string; headers: Record<string, string | string[] | undefined>; body: BoundedBody } | null = null;
    // The answer cannot be filtered: the exchange ends here and the client gets the problem, never the host's body.
    const refuseUnfilterable = (ctrl: Dispatcher.DispatchController | null, reason: string): void => {
      if (done) return;
      done = true;
      pending = null;
      ctrl?.abort(new Error(reason));
      request.onProblem(filterProblem(reason));
    };
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
        if (filter !== null && isFilteredStatus(statusCode)) {
          const reason = unfilterableAnswer({ contentType: single(headers['content-type']), contentEncoding: joined(headers['content-encoding']), contentLength: single(headers['content-length']) }, filterMaxBytes);
          if (reason !== null) return refuseUnfilterable(ctrl, reason);
          pending = { statusCode, statusMessage: statusMessage ?? '', headers, body: new BoundedBody(filterMaxBytes) };
          return;
        }
        request.onResponse?.(statusCode);
        res.writeHead(statusCode, statusMessage || undefined, responseHeaders(headers, stripCors, false, request.requestId) as string[]);
      },
      onResponseData(ctrl, chunk) {
        if (done) return ctrl.abort(new Error('client went away'));
        if (pending !== null) {
          if (!pending.body.add(chunk)) refuseUnfilterable(ctrl, `the answer is larger than upstream.filter-max-bytes (${filterMaxBytes} bytes)`);
          return;
        }
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
        if (pending !== null) {
          const answer = pending;
          const outcome = filterList(answer.body.body(), filter!);
          if (!outcome.ok) return refuseUnfilterable(null, outcome.reason);
          done = true;
          request.onResponse?.(answer.statusCode);
          request.onFiltered?.({ kept: outcome.kept, removed: outcome.removed });
          const out = responseHeaders(answer.headers, stripCors, true, request.requestId);
          out.push('content-length', String(outcome.body.length));
          res.writeHead(answer.statusCode, answer.statusMessage || undefined, out as string[]);
          // A HEAD (asked of the host as GET) gets the headers only: Node sends no body for it.
          res.end(outcome.body);
          return;
        }
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

/**
 * The host's answer headers as the client gets them, flat [name, value, ...] as writeHead takes them (set-cookie stays
 * one name with an array value): without hop-by-hop headers, the host's `X-Request-Id` (the gateway's own goes
 * instead), `Access-Control-*` when the gateway answers CORS itself, and for a filtered answer the headers that
 * describe the unfiltered body.
 */
function responseHeaders(headers: Record<string, string | string[] | undefined>, stripCors: boolean, filtered: boolean, requestId: string): Array<string | string[]> {
  const out: Array<string | string[]> = [];
  const connectionTokens = headerTokens(headers.connection);
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || HOP_BY_HOP_RESPONSE.has(name) || connectionTokens?.has(name) || name === 'x-request-id') continue;
    if (stripCors && name.startsWith('access-control-')) continue;
    if (filtered && UNFILTERED_BODY_HEADERS.has(name)) continue;
    out.push(name, value);
  }
  out.push('x-request-id', requestId);
  return out;
}

/** A header's one value; undefined when absent or repeated (a repeated Content-Type names no one type). */
function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}

/** A list header's values as one (`gzip, br`). */
function joined(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The client's answer when a filtered route's answer cannot be filtered; the reason goes to the log only. */
function filterProblem(reason: string): ProblemError {
  return new ProblemError('IAM_FILTER_FAILED', "The host's answer to this list could not be filtered for you, so it is not sent.", { cause: new Error(reason) });
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
