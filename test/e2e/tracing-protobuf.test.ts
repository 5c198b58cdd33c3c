/**
 * Tracing over OTLP/HTTP with protobuf bodies (`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`, the OpenTelemetry
 * default): the receiver gets `application/x-protobuf` exports carrying the request's spans (protobuf keeps strings
 * as UTF-8 bytes, so the span names and the trace id's bytes are found in the body). The JSON protocol and the span
 * tree are checked in tracing.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { OtlpReceiver, traceToReceiver } from '../support/otlp-receiver';
import { until } from '../support/wait';

const receiver = new OtlpReceiver();
let fixture: GatewayWithUpstream;
let tracing: Awaited<ReturnType<typeof traceToReceiver>>;

beforeAll(async () => {
  tracing = await traceToReceiver(receiver, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' });
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await tracing?.restore();
});

it('exports the spans of a request as OTLP protobuf', async () => {
  const { accessToken } = await login(fixture.gateway.url, 'alice');
  const traceId = randomBytes(16);
  await fetch(`${fixture.gateway.url}/api/projects`, { headers: { ...bearer(accessToken), traceparent: `00-${traceId.toString('hex')}-${randomBytes(8).toString('hex')}-01` } });
  // The batch processor may export the request's spans in different bodies (they end at different times).
  const carries = (): boolean => ['authorize', 'forward'].every((name) => receiver.protobufBodies.some((body) => body.includes(traceId) && body.includes(name)));
  await until('the authorize and forward spans of the request exported', carries, { every: 50 });
  expect(new Set(receiver.contentTypes)).toEqual(new Set(['application/x-protobuf']));
});
