import type { Logger } from '../observability/logger';
import { RequestTracer } from '../observability/tracing';

/** What starting tracing left: the per-request tracer (null when off) and how to flush and stop the exporter. */
export interface TracingState {
  tracer: RequestTracer | null;
  /** Exports what is buffered and stops (at shutdown). */
  shutdown(): Promise<void>;
}

const OFF: TracingState = { tracer: null, shutdown: () => Promise.resolve() };

/** One provider per process (the OpenTelemetry API is global): later gateways in the same process share it. */
let shared: Promise<TracingState> | null = null;

/**
 * Tracing is configured only by the standard OpenTelemetry variables (docs/observability.md):
 * `OTEL_TRACES_EXPORTER=otlp` switches it on (unset or `none`: off, and the SDK is never loaded);
 * `OTEL_EXPORTER_OTLP_PROTOCOL` is `http/protobuf` (the OpenTelemetry default) or `http/json`;
 * `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_SERVICE_NAME`,
 * `OTEL_TRACES_SAMPLER[_ARG]` and the other standard variables are read by the SDK itself.
 */
export function startTracing(env: NodeJS.ProcessEnv, logger: Logger): Promise<TracingState> {
  const exporter = (env.OTEL_TRACES_EXPORTER ?? 'none').trim().toLowerCase();
  if (exporter === '' || exporter === 'none') return Promise.resolve(OFF);
  if (exporter !== 'otlp') throw new Error(`OTEL_TRACES_EXPORTER: "${exporter}" is not supported (otlp or none)`);
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim();
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL: "${protocol}" is not supported (http/protobuf or http/json)`);
  shared ??= registerProvider(protocol, logger);
  return shared;
}

async function registerProvider(protocol: 'http/protobuf' | 'http/json', logger: Logger): Promise<TracingState> {
  // Loaded only now: with tracing off none of this is ever required.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { NodeTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-node') as typeof import('@opentelemetry/sdk-trace-node');
  const { W3CTraceContextPropagator } = require('@opentelemetry/core') as typeof import('@opentelemetry/core');
  const { resourceFromAttributes, defaultResource } = require('@opentelemetry/resources') as typeof import('@opentelemetry/resources');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const exporter = protocol === 'http/json' ? jsonExporter() : protobufExporter();
  // process.pid: the spans of each worker of `serve --workers N` (a process each) can be told apart.
  const resource = defaultResource().merge(resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME ?? 'iam-gateway', 'process.pid': process.pid }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  // The async-hooks context manager, so spans started inside a request nest under it (resolvers, logins).
  provider.register({ propagator: new W3CTraceContextPropagator() });
  logger.info({ protocol }, 'tracing: on (OTEL_TRACES_EXPORTER=otlp)');
  return {
    tracer: new RequestTracer(),
    shutdown: async () => {
      await provider.forceFlush().catch(() => undefined);
    },
  };
}

/* eslint-disable @typescript-eslint/no-require-imports */
function jsonExporter(): import('@opentelemetry/sdk-trace-node').SpanExporter {
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http');
  return new OTLPTraceExporter();
}

/** OTLP/HTTP with protobuf bodies: the JSON exporter's delegate with the protobuf serializer (what the -proto package does). */
function protobufExporter(): import('@opentelemetry/sdk-trace-node').SpanExporter {
  const { OTLPExporterBase } = require('@opentelemetry/otlp-exporter-base') as typeof import('@opentelemetry/otlp-exporter-base');
  const { createOtlpHttpExportDelegate, convertLegacyHttpOptions } = require('@opentelemetry/otlp-exporter-base/node-http') as typeof import('@opentelemetry/otlp-exporter-base/build/src/index-node-http');
  const { ProtobufTraceSerializer, TraceExporterMetricsHelper } = require('@opentelemetry/otlp-transformer') as typeof import('@opentelemetry/otlp-transformer');
  class OTLPProtobufTraceExporter extends OTLPExporterBase<import('@opentelemetry/sdk-trace-node').ReadableSpan[]> {
    constructor() {
      super(
        createOtlpHttpExportDelegate(convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }), ProtobufTraceSerializer, 'otlp_http_span_exporter', TraceExporterMetricsHelper, undefined),
      );
    }
  }
  return new OTLPProtobufTraceExporter();
}
/* eslint-enable @typescript-eslint/no-require-imports */
