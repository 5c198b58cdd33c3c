/**
 * Tracing on, but the sampler leaves requests out (`OTEL_TRACES_SAMPLER=always_off`): such a request is handled as with
 * tracing off — no span is exported and the host receives the client's own traceparent, untouched.
 */
import { randomBytes } from 'node:crypto';
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { OtlpReceiver } from '../support/otlp-receiver';
import { recordedHeader } from '../support/recording-upstream';

const receiver = new OtlpReceiver();
let fixture: GatewayWithUpstream;
const saved = { ...process.env };

beforeAll(async () => {
  await receiver.start();
  Object.assign(process.env, {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_TRACES_SAMPLER: 'always_off',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await receiver.close();
  process.env = saved;
});

it('exportCalls nothing and forwards the client traceparent untouched', async () => {
  const { accessToken } = await login(fixture.gateway.url, 'alice');
  await fixture.upstream.clear();
  const traceparent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`;
  expect((await fetch(`${fixture.gateway.url}/api/projects`, { headers: { ...bearer(accessToken), traceparent } })).status).toBe(200);
  const [seen] = await fixture.upstream.requests();
  expect(recordedHeader(seen!, 'traceparent')).toEqual([traceparent]);
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(receiver.exports).toBe(0);
});
