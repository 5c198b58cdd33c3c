/**
 * With real processes: two gateway processes on different ports sharing one Redis and one
 * PostgreSQL. A revocation through A is refused by B on its next request; and when B's Redis connections
 * (its events channel included) are cut and restored, a session revoked meanwhile stays refused by B.
 */
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { describeWithRedis, testRedisUrl, uniquePrefix } from '../support/env';
import { bearer, login, ROOT } from '../support/gateway';
import { ensureBuilt, startGatewayProcess, type GatewayProcess } from '../support/gateway-process';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf, type TcpRelay } from '../support/tcp-relay';
import { until } from '../support/wait';

const redisUrl = testRedisUrl();

describeWithRedis('two gateway processes sharing Redis and PostgreSQL', () => {
  let db: TestDatabase;
  let upstream: RecordingUpstream;
  let relay: TcpRelay;
  let a: GatewayProcess;
  let b: GatewayProcess;

  beforeAll(async () => {
    ensureBuilt();
    db = await createTestDatabase();
    upstream = await startRecordingUpstream();
    const target = targetOf(redisUrl!);
    relay = await startTcpRelay(target.host, target.port);
    const shared = { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), IAM_TOKEN_STORE_PREFIX: uniquePrefix('procs') };
    a = await startGatewayProcess(upstream.url, shared);
    b = await startGatewayProcess(upstream.url, { ...shared, REDIS_URL: relayedUrl(redisUrl!, relay) });
  }, 120_000);

  afterAll(async () => {
    await a?.kill();
    await b?.kill();
    await relay?.close();
    await upstream?.close();
    await db?.close();
  });

  const projects = (base: string, token: string): Promise<number> => fetch(`${base}/api/projects`, { headers: bearer(token) }).then((r) => r.status);
  const revoke = (base: string, token: string, sessionId: string): Promise<number> =>
    fetch(`${base}/iam/sessions/${sessionId}/revoke`, { method: 'POST', headers: bearer(token) }).then((r) => r.status);

  /** The shared poller (test/support/wait.ts), with a generous bound whatever the call names. */
  async function waitFor(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
    await until('the condition', condition, { within: Math.max(timeoutMs, 20_000), every: 100 });
  }

  it('a revocation through A is refused by B on its next request', async () => {
    const keeper = await login(a.url, 'alice');
    const victim = await login(a.url, 'alice', 'alice-password', 'API');
    expect(await projects(b.url, victim.accessToken)).toBe(200);
    expect(await projects(b.url, victim.accessToken)).toBe(200); // now cached in B
    expect(await revoke(a.url, keeper.accessToken, victim.sessionId)).toBe(204);
    expect(await projects(b.url, victim.accessToken)).toBe(401);
    expect(await projects(b.url, keeper.accessToken)).toBe(200);
  });

  it('B fails closed while its Redis connection is cut, and still refuses what was revoked meanwhile', async () => {
    const keeper = await login(a.url, 'bob');
    const victim = await login(a.url, 'bob', 'bob-password', 'API');
    expect(await projects(b.url, victim.accessToken)).toBe(200); // cached in B

    await relay.cut();
    // B learns of the cut within milliseconds; until then nothing was revoked, so a 200 would be right.
    await waitFor(async () => /^iam_store_events_connected 0$/m.test(await (await fetch(`${b.managementUrl}/metrics`)).text()));
    const down = await fetch(`${b.url}/api/projects`, { headers: bearer(victim.accessToken) });
    expect(down.status).toBe(503);
    expect(((await down.json()) as { code: string }).code).toBe('IAM_STORE_UNAVAILABLE');
    expect(await revoke(a.url, keeper.accessToken, victim.sessionId)).toBe(204); // B cannot hear this

    await relay.restore();
    await waitFor(async () => (await projects(b.url, keeper.accessToken)) === 200);
    expect(await projects(b.url, victim.accessToken)).toBe(401);

    // Events reach B again once its events channel is subscribed again (readiness says so).
    await waitFor(async () => /^iam_store_events_connected 1$/m.test(await (await fetch(`${b.managementUrl}/metrics`)).text()));
    const next = await login(a.url, 'bob', 'bob-password', 'API');
    expect(await projects(b.url, next.accessToken)).toBe(200);
    expect(await revoke(a.url, keeper.accessToken, next.sessionId)).toBe(204);
    expect(await projects(b.url, next.accessToken)).toBe(401);
  }, 60_000);
});
