/**
 * The access log (docs/observability.md): one JSON line per request (`msg: "access"`) with the documented fields;
 * `iam.access-log: denied` (the default) writes denials and failures only, `all` every request (sampled), `off`
 * nothing; never a token, cookie or password, whatever the request carried. A real process writes its batched lines
 * to stdout within the flush interval, also when no further request comes.
 */
import type { DestinationStream } from 'pino';
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES } from '../support/gateway-fixture';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { createTestDatabase } from '../support/database';
import { ensureBuilt, startGatewayProcess, type GatewayProcess } from '../support/gateway-process';
import { until } from '../support/wait';

/** A pino destination keeping every line written. */
function capture(): { destination: DestinationStream; lines: () => Array<Record<string, unknown>>; raw: () => string } {
  let text = '';
  return {
    destination: { write: (chunk: string) => void (text += chunk) },
    raw: () => text,
    lines: () =>
      text
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

let upstream: RecordingUpstream;
const gateways: RunningGateway[] = [];

beforeAll(async () => {
  await (await createTestDatabase()).close();
  upstream = await startRecordingUpstream();
});
afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.close()));
  await upstream?.close();
});

async function gatewayWith(mode: string, extra: Record<string, string> = {}): Promise<{ gateway: RunningGateway; log: ReturnType<typeof capture> }> {
  const log = capture();
  const gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_ACCESS_LOG: mode, ...extra }, { accessLogDestination: log.destination });
  gateways.push(gateway);
  return { gateway, log };
}

/**
 * "Written, not hung": the access log is written in batches, flushed by a timer (within a second); far above that and
 * a loaded machine's latency, it only turns a line that is never written into a failure.
 */
const WRITTEN_NOT_HUNG_MS = 10_000;

/** The lines of a request, once the batch holding them was flushed (each awaited request has at least one). */
async function linesFor(gateway: RunningGateway, log: ReturnType<typeof capture>, requestId: string): Promise<Array<Record<string, unknown>>> {
  return until(
    `the access line of ${requestId} on ${gateway.url}`,
    () => {
      const found = log.lines().filter((line) => line.requestId === requestId);
      return found.length > 0 ? found : null;
    },
    { within: WRITTEN_NOT_HUNG_MS, every: 20 },
  );
}

describe('the access log', () => {
  it('all: one line per request with the documented fields; never the token, the cookie or the password', async () => {
    const { gateway, log } = await gatewayWith('all');
    const { accessToken } = await login(gateway.url, 'alice');
    const allowed = await fetch(`${gateway.url}/api/projects?secret=shh`, { headers: { ...bearer(accessToken), cookie: `theme=dark; __Host-iam-session=${accessToken}` } });
    expect(allowed.status).toBe(200);
    await allowed.arrayBuffer();
    const [line] = await linesFor(gateway, log, allowed.headers.get('x-request-id')!);
    expect(line).toMatchObject({
      msg: 'access',
      level: 30,
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      requestId: allowed.headers.get('x-request-id'),
      traceId: null,
      clientAddress: '127.0.0.1',
      method: 'GET',
      path: '/api/projects',
      route: '/api/projects',
      status: 200,
      decision: 'allow',
      step: null,
      userId: 'u-alice',
      profileId: 'p-alice-editor',
      clientType: 'WEB',
      decisionId: expect.any(String),
      durationMs: expect.any(Number),
      upstreamMs: expect.any(Number),
    });
    expect(line!.upstreamMs as number).toBeLessThanOrEqual(line!.durationMs as number);
    const denied = await fetch(`${gateway.url}/api/admin/stats`, { headers: bearer(accessToken) });
    const [deniedLine] = await linesFor(gateway, log, denied.headers.get('x-request-id')!);
    expect(deniedLine).toMatchObject({ status: 403, decision: 'deny', step: 'PERMISSION_DENIED', route: '/api/admin/**', userId: 'u-alice', upstreamMs: null });
    const anonymous = await fetch(`${gateway.url}/api/projects`, { headers: { authorization: 'Bearer iamt_not-a-live-token-for-the-log-test-xxxxxxxx' } });
    const [anonymousLine] = await linesFor(gateway, log, anonymous.headers.get('x-request-id')!);
    expect(anonymousLine).toMatchObject({ status: 401, decision: 'deny', userId: null, profileId: null, clientType: null, route: '/api/projects' });
    // Nothing secret, anywhere in the log: not the live token, not the session cookie, not the query, not the password.
    for (const secret of [accessToken, 'iamt_not-a-live-token', 'alice-password', 'shh', 'theme=dark']) expect(log.raw()).not.toContain(secret);
  });

  it("denied (the default, see config.test.ts): the gateway's own refusals and failures only, not the host's answers", async () => {
    const { gateway, log } = await gatewayWith('denied');
    const { accessToken } = await login(gateway.url, 'alice');
    const allowed = await fetch(`${gateway.url}/api/projects`, { headers: bearer(accessToken) });
    const denied = await fetch(`${gateway.url}/api/admin/stats`, { headers: bearer(accessToken) });
    expect(await linesFor(gateway, log, denied.headers.get('x-request-id')!)).toHaveLength(1);
    // A browser without a session is sent to the login: a refusal too.
    const redirected = await fetch(`${gateway.url}/api/projects`, { headers: { accept: 'text/html' }, redirect: 'manual' });
    expect(redirected.status).toBe(302);
    expect(await linesFor(gateway, log, redirected.headers.get('x-request-id')!)).toEqual([expect.objectContaining({ status: 302, decision: 'deny', route: '/api/projects' })]);
    expect(log.lines().filter((line) => line.requestId === allowed.headers.get('x-request-id'))).toEqual([]);
  });

  it('denied: a host that cannot be reached is logged (502), as the gateway failed to forward', async () => {
    const log = capture();
    const down = await startTestGateway('http://127.0.0.1:1', { IAM_POLICIES_DIR: E2E_POLICIES, IAM_ACCESS_LOG: 'denied' }, { accessLogDestination: log.destination });
    gateways.push(down);
    const { accessToken } = await login(down.url, 'alice');
    const failed = await fetch(`${down.url}/api/projects`, { headers: bearer(accessToken) });
    expect(failed.status).toBe(502);
    expect(await linesFor(down, log, failed.headers.get('x-request-id')!)).toEqual([expect.objectContaining({ status: 502, decision: 'allow', userId: 'u-alice' })]);
  });

  it('off: nothing; all with a sample of 0: denials only', async () => {
    const off = await gatewayWith('off');
    const { accessToken } = await login(off.gateway.url, 'alice');
    await fetch(`${off.gateway.url}/api/admin/stats`, { headers: bearer(accessToken) });
    // Closing flushes whatever the gateway batched: after it, a line that was going to be written has been.
    await off.gateway.close();
    expect(off.log.raw()).toBe('');
    const sampled = await gatewayWith('all', { IAM_ACCESS_LOG_SAMPLE: '0' });
    const token = (await login(sampled.gateway.url, 'alice')).accessToken;
    const allowed = await fetch(`${sampled.gateway.url}/api/projects`, { headers: bearer(token) });
    const denied = await fetch(`${sampled.gateway.url}/api/admin/stats`, { headers: bearer(token) });
    expect(await linesFor(sampled.gateway, sampled.log, denied.headers.get('x-request-id')!)).toHaveLength(1);
    expect(sampled.log.lines().filter((line) => line.requestId === allowed.headers.get('x-request-id'))).toEqual([]);
  });
});

describe('the access log of a gateway process (stdout, batched)', () => {
  let gateway: GatewayProcess | undefined;
  afterAll(() => gateway?.kill());

  it('a single line reaches stdout without further traffic (flushed within a second, not at the next 4 KiB)', async () => {
    ensureBuilt();
    gateway = await startGatewayProcess(upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, IAM_ACCESS_LOG: 'denied' });
    const denied = await fetch(`${gateway.url}/api/admin/stats`);
    expect(denied.status).toBe(401);
    const requestId = denied.headers.get('x-request-id');
    // Nothing else is sent: the one short line is far below the batch size, so only the flush timer writes it.
    const line = await until('the access line on stdout', () => gateway!.logs().find((entry) => entry.msg === 'access' && entry.requestId === requestId), { within: 15_000 });
    expect(line).toMatchObject({ status: 401, decision: 'deny', path: '/api/admin/stats' });
  }, 120_000);
});
