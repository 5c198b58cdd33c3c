import type { IncomingHttpHeaders } from 'node:http';
import { context, createContextKey, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type TextMapGetter, type Tracer } from '@opentelemetry/api';
import { scrubbedException, scrubText } from './redaction';

/** The instrumentation scope of every span the gateway makes. */
export const TRACER_NAME = 'iam-gateway';

const headerGetter: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key.toLowerCase()],
};

/** The trace id a request records (or null), kept in the context of its server span for everything decided under it. */
const RECORDED_TRACE_ID = createContextKey('iam-gateway.recorded-trace-id');
/** The server span of the request, in its context: code deeper down (the /iam app) names it after its route. */
const SERVER_SPAN = createContextKey('iam-gateway.server-span');

/** What a server span is started from. */
export interface RequestStart {
  method: string;
  /**
   * What the span is named after (`METHOD route`): a route pattern, or a fixed placeholder until one is known
   * (`proxy`, `/iam/*`, `refused`); never the raw path, which the client chooses and which carries ids.
   */
  route: string;
  /** The normalized path (the `url.path` attribute, scrubbed), or what a refused request's target was. */
  path: string;
  headers: IncomingHttpHeaders;
  clientAddress: string | null;
  /**
   * The connection comes from a trusted proxy (`iam.forward.trusted-proxies`): the trace context it sends is vouched
   * for, and its trace id may be recorded (audit rows, decisions, the access log).
   */
  trustedPeer: boolean;
}

/**
 * The gateway's spans (docs/observability.md). One {@link RequestTracer} exists only while tracing is on
 * (`OTEL_TRACES_EXPORTER`); with it off the request path holds `null` and pays one null check, and the SDK is not
 * even loaded. Uses the global OpenTelemetry API: the SDK registered by app/tracing.ts records and exports.
 */
export class RequestTracer {
  private readonly tracer: Tracer = trace.getTracer(TRACER_NAME);

  /**
   * The server span of one request, continuing the client's W3C `traceparent`/`tracestate` when it sent them (the
   * host's spans join the client's trace). The trace id the gateway records for it is its own when it started the
   * trace, the proxy's when a trusted proxy sent the context, and none when anyone else did: a client never chooses
   * the `traceId` of an audit row, a decision or an access-log line.
   */
  startRequest(start: RequestStart): RequestSpan {
    const { method, route, path, headers, clientAddress, trustedPeer } = start;
    const parent = headers.traceparent === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, headers, headerGetter);
    const span = this.tracer.startSpan(
      `${method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': method, 'url.path': scrubText(path), ...(clientAddress ? { 'client.address': clientAddress } : {}) },
      },
      parent,
    );
    const continued = trace.getSpanContext(parent) !== undefined;
    const recorded = !continued || trustedPeer ? span.spanContext().traceId : null;
    return new RequestSpan(this.tracer, span, trace.setSpan(parent, span).setValue(RECORDED_TRACE_ID, recorded).setValue(SERVER_SPAN, span));
  }

  /** {@link startRequest}, or null when the sampler does not record this request (then nothing else is traced). */
  startSampled(start: RequestStart): RequestSpan | null {
    const request = this.startRequest(start);
    return request.span.isRecording() ? request : null;
  }
}

/** The server span of one request and what its children need. */
export class RequestSpan {
  constructor(
    private readonly tracer: Tracer,
    readonly span: Span,
    /** The context whose active span is the server span: children and `run()` use it. */
    readonly context: Context,
  ) {}

  /** The trace id to record for this request (see {@link RequestTracer.startRequest}), or null. */
  get recordedTraceId(): string | null {
    return (this.context.getValue(RECORDED_TRACE_ID) as string | null | undefined) ?? null;
  }

  /** Names the server span after the route that was matched (`METHOD pattern`) and sets `http.route`. */
  nameRoute(method: string, route: string): void {
    nameServerSpan(this.span, method, route);
  }

  /** A child of the server span (authenticate, authorize, forward). */
  child(name: string, attributes: Attributes = {}, kind: SpanKind = SpanKind.INTERNAL): Span {
    return this.tracer.startSpan(name, { kind, attributes }, this.context);
  }

  /**
   * Runs `fn` with the server span active (or `child`, one of its children), so spans made inside (resolvers,
   * logins, admin writes) nest under it.
   */
  run<T>(fn: () => T, child?: Span): T {
    return context.with(child === undefined ? this.context : trace.setSpan(this.context, child), fn);
  }

  /** The W3C `traceparent` (and `tracestate`) naming `span` as the parent: what the host receives. */
  propagationHeaders(span: Span): Record<string, string> {
    const carrier: Record<string, string> = {};
    propagation.inject(trace.setSpan(this.context, span), carrier);
    return carrier;
  }

  /** Ends the server span with the response status. */
  end(status: number): void {
    this.span.setAttribute('http.response.status_code', status);
    if (status >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
    this.span.end();
  }
}

/** Ends a child span, marking it failed when `error` is set. */
export function endSpan(span: Span, error?: unknown): void {
  if (error !== undefined) recordFailure(span, error);
  span.end();
}

/** Records `error` on `span` through the redaction layer (a message may carry a URL with its password) and marks it failed. */
function recordFailure(span: Span, error: unknown): void {
  span.recordException(scrubbedException(error));
  span.setStatus({ code: SpanStatusCode.ERROR });
}

function nameServerSpan(span: Span, method: string, route: string): void {
  span.setAttribute('http.route', route);
  span.updateName(`${method} ${route}`);
}

/**
 * Names the server span of the request being handled (the active context's) after the route pattern it matched;
 * nothing when there is none (tracing off, the request not sampled).
 */
export function nameActiveRequest(method: string, route: string): void {
  const span = context.active().getValue(SERVER_SPAN) as Span | undefined;
  if (span !== undefined) nameServerSpan(span, method, route);
}

/**
 * The trace id to record for the request being handled (a decision, its audit row), or null: tracing off, no request
 * span, or a trace context an untrusted client sent ({@link RequestTracer.startRequest}).
 */
export function activeTraceId(): string | null {
  return (context.active().getValue(RECORDED_TRACE_ID) as string | null | undefined) ?? null;
}

/**
 * Runs `run` in a span under the active one (a login, an admin write, a resolver call). With tracing off the global
 * API is a no-op: this costs a function call on paths that are not per-request anyway.
 */
export function withSpan<T>(name: string, attributes: Attributes, run: (span: Span) => Promise<T>): Promise<T> {
  return trace.getTracer(TRACER_NAME).startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await run(span);
    } catch (error) {
      recordFailure(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}
