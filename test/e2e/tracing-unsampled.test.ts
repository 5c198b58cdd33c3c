/**
 * Tracing on, but the sampler leaves requests out (`OTEL_TRACES_SAMPLER=always_off`): such a request is handled as with
 * tracing off — no span is exported and the host receives the client's own traceparent, untouched.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { recordedHeader } from '../support/recording-upstream';

let exportCalls = 0;
let receiver: Server;
let fixture: GatewayWithUpstream;
const saved = { ...process.env };

beforeAll(async () => {
  receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exportCalls++;
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  Object.assign(process.env, {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_TRACES_SAMPLER: 'always_off',
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await new Promise((resolve) => receiver.close(resolve));
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
  expect(exportCalls).toBe(0);
});
