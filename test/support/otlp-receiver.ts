/**
 * A real OTLP/HTTP trace receiver for the tracing tests: a loopback server that answers the exporter like a collector,
 * decodes JSON exports into spans, and keeps protobuf exports as raw bodies.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { until } from './wait';

export interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

/** An OTLP/HTTP receiver: keeps every span of every JSON export, and the raw bodies of protobuf ones. */
export class OtlpReceiver {
  readonly spans: ExportedSpan[] = [];
  readonly protobufBodies: Buffer[] = [];
  /** Every JSON export as received (span events, such as recorded exceptions, are only here). */
  readonly jsonBodies: string[] = [];
  readonly contentTypes: string[] = [];
  /** Export requests received, whatever their format. */
  exports = 0;
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const type = req.headers['content-type'] ?? '';
        this.exports++;
        this.contentTypes.push(type);
        if (req.url === '/v1/traces' && type.startsWith('application/json')) {
          this.jsonBodies.push(body.toString('utf8'));
          this.collect(JSON.parse(body.toString('utf8')));
        }
        else if (req.url === '/v1/traces') this.protobufBodies.push(body);
        res.writeHead(200, { 'content-type': type.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' });
        res.end(type.startsWith('application/json') ? '{}' : undefined);
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** OTLP JSON: resourceSpans[].scopeSpans[].spans[], attributes as [{key, value: {stringValue|intValue|…}}]. */
  private collect(payload: { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> }> }): void {
    for (const resource of payload.resourceSpans ?? []) {
      for (const scope of resource.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          const attributes: Record<string, unknown> = {};
          for (const { key, value } of (span.attributes as Array<{ key: string; value: Record<string, unknown> }>) ?? []) attributes[key] = Object.values(value)[0];
          this.spans.push({ traceId: span.traceId as string, spanId: span.spanId as string, parentSpanId: (span.parentSpanId as string) || undefined, name: span.name as string, kind: span.kind as number, attributes });
        }
      }
    }
  }

  /** Waits until `predicate` holds for the spans received (the batch processor exports every 100 ms here). */
  async waitFor(predicate: (spans: ExportedSpan[]) => boolean, what: string): Promise<ExportedSpan[]> {
    try {
      return await until(what, () => predicate(this.spans) && this.spans, { every: 50 });
    } catch (error) {
      throw new Error(`no ${what} among ${this.spans.length} spans: ${JSON.stringify(this.spans.map((span) => span.name))}`, { cause: error });
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * For a tracing test file: starts `receiver`, switches tracing on for this process with `env` (OTEL_* variables, the
 * receiver as the endpoint, exports every 50 ms) and restores the environment in `restore()`. Tracing is
 * process-wide (the OpenTelemetry API is global): each tracing test file sets it up once, before its gateways start.
 */
export async function traceToReceiver(receiver: OtlpReceiver, env: Record<string, string>): Promise<{ restore: () => Promise<void> }> {
  const saved = { ...process.env };
  await receiver.start();
  Object.assign(process.env, { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50', ...env });
  return {
    restore: async () => {
      await receiver.close();
      process.env = saved;
    },
  };
}
