import type { IncomingHttpHeaders } from 'node:http';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type TextMapGetter, type Tracer } from '@opentelemetry/api';

/** The instrumentation scope of every span the gateway makes. */
export const TRACER_NAME = 'iam-gateway';

const headerGetter: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key.toLowerCase()],
};

/**
 * The gateway's spans (docs/observability.md). One {@link RequestTracer} exists only while tracing is on
 * (`OTEL_TRACES_EXPORTER`); with it off the request path holds `null` and pays one null check, and the SDK is not
 * even loaded. Uses the global OpenTelemetry API: the SDK registered by app/tracing.ts records and exports.
 */
export class RequestTracer {
  private readonly tracer: Tracer = trace.getTracer(TRACER_NAME);

  /** The server span of one request, continuing the client's W3C `traceparent`/`tracestate` when it sent them. */
  startRequest(method: string, path: string, headers: IncomingHttpHeaders, clientAddress: string | null): RequestSpan {
    const parent = headers.traceparent === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, headers, headerGetter);
    const span = this.tracer.startSpan(
      `${method} ${path.startsWith('/iam/') || path === '/iam' ? path : 'proxy'}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': method, 'url.path': path, ...(clientAddress ? { 'client.address': clientAddress } : {}) },
      },
      parent,
    );
    return new RequestSpan(this.tracer, span, trace.setSpan(parent, span));
  }

  /** {@link startRequest}, or null when the sampler does not record this request (then nothing else is traced). */
  startSampled(method: string, path: string, headers: IncomingHttpHeaders, clientAddress: string | null): RequestSpan | null {
    const request = this.startRequest(method, path, headers, clientAddress);
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

  get traceId(): string {
    return this.span.spanContext().traceId;
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
  if (error !== undefined) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** The trace id of the active span (a request being decided, a login, an admin write), or null (tracing off). */
export function activeTraceId(): string | null {
  const span = trace.getActiveSpan();
  return span === undefined || !span.isRecording() ? null : span.spanContext().traceId;
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
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  });
}
