/**
 * Tracing on, but the sampler leaves requests out (`OTEL_TRACES_SAMPLER=always_off`): such a request is handled as with
 * tracing off — no span is exported and the host receives the client's own traceparent, untouched.
 */
import { randomBytes } from 'node:crypto';
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { OtlpReceiver, traceToReceiver } from '../support/otlp-receiver';
import { recordedHeader } from '../support/recording-upstream';

const receiver = new OtlpReceiver();
let fixture: GatewayWithUpstream;
let tracing: Awaited<ReturnType<typeof traceToReceiver>>;

beforeAll(async () => {
  tracing = await traceToReceiver(receiver, { OTEL_TRACES_SAMPLER: 'always_off' });
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await tracing?.restore();
});

it('exports nothing and forwards the client traceparent untouched', async () => {
  const { accessToken } = await login(fixture.gateway.url, 'alice');
  await fixture.upstream.clear();
  const traceparent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`;
  expect((await fetch(`${fixture.gateway.url}/api/projects`, { headers: { ...bearer(accessToken), traceparent } })).status).toBe(200);
  const [seen] = await fixture.upstream.requests();
  expect(recordedHeader(seen!, 'traceparent')).toEqual([traceparent]);
  // Closing the gateway flushes its span processor: a span that was going to be exported has been by then.
  await fixture.gateway.close();
  expect(receiver.exports).toBe(0);
});
