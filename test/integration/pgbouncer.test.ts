/**
 * PostgreSQL behind PgBouncer in transaction pooling mode (a server connection per transaction; no prepared
 * statement, session `SET`, advisory session lock or LISTEN survives between them): logins, admin writes with their
 * audit rows, the session list, logout, provisioning at start (a transaction-scoped advisory lock) and the change
 * feed all work through it. Migrations run directly against PostgreSQL (the test database is migrated by the setup).
 */
import type { RunningGateway } from '../../src/app/start-gateway';
import { notRun, testDatabaseKind, testDatabaseUrl } from '../support/env';
import { binaryAvailable } from '../support/front-proxy';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES } from '../support/gateway-fixture';
import { createTestDatabase } from '../support/database';
import { startPgBouncer, type RunningPgBouncer } from '../support/pgbouncer';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const runnable = testDatabaseKind() === 'postgres' && (binaryAvailable('pgbouncer') || process.env.CI !== undefined);
if (!runnable) notRun('pgbouncer: PostgreSQL behind PgBouncer (needs DATABASE_URL and the pgbouncer binary; CI has both)');
const describeWithPgBouncer = runnable ? describe : describe.skip;

describeWithPgBouncer('the gateway on PostgreSQL behind PgBouncer (transaction pooling)', () => {
  let bouncer: RunningPgBouncer;
  let upstream: RecordingUpstream;
  let gateway: RunningGateway;

  beforeAll(async () => {
    await (await createTestDatabase()).close();
    bouncer = await startPgBouncer(testDatabaseUrl());
    upstream = await startRecordingUpstream();
    const database = new URL(testDatabaseUrl()).pathname.slice(1);
    gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: E2E_POLICIES, DATABASE_URL: bouncer.urlFor(database), DATABASE_POOL_SIZE: '8' });
  }, 60_000);
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    await bouncer?.close();
  });

  it('logs in (users provisioned at start), authorizes, lists sessions and logs out', async () => {
    const alice = await login(gateway.url, 'alice');
    expect((await fetch(`${gateway.url}/api/projects`, { headers: bearer(alice.accessToken) })).status).toBe(200);
    const sessions = (await (await fetch(`${gateway.url}/iam/sessions`, { headers: bearer(alice.accessToken) })).json()) as Array<{ current: boolean }>;
    expect(sessions.some((session) => session.current)).toBe(true);
    expect((await fetch(`${gateway.url}/iam/auth/logout`, { method: 'POST', headers: bearer(alice.accessToken) })).status).toBe(204);
    expect((await fetch(`${gateway.url}/api/projects`, { headers: bearer(alice.accessToken) })).status).toBe(401);
  });

  it('takes admin writes, concurrently, and writes and reads their audit rows', async () => {
    const admin = (await login(gateway.url, 'admin')).accessToken;
    const headers = { ...bearer(admin), 'content-type': 'application/json' };
    const writes = await Promise.all(
      Array.from({ length: 12 }, (_, index) => fetch(`${gateway.url}/iam/admin/users/u-pgb-${index}`, { method: 'PUT', headers, body: JSON.stringify({ displayName: `User ${index}`, enabled: true }) })),
    );
    expect(writes.map((answer) => answer.status)).toEqual(Array(12).fill(201));
    const disabled = await fetch(`${gateway.url}/iam/admin/users/u-pgb-0`, { method: 'PUT', headers, body: JSON.stringify({ enabled: false }) });
    expect(disabled.status).toBe(200);
    const page = (await (await fetch(`${gateway.url}/iam/admin/audit?userId=u-admin&limit=50`, { headers: bearer(admin) })).json()) as { items: Array<{ targetId: string }> };
    const targets = new Set(page.items.map((item) => item.targetId));
    for (let index = 0; index < 12; index++) expect(targets.has(`u-pgb-${index}`)).toBe(true);
  });

  it('denies and records the denial, and revokes everywhere through the change feed', async () => {
    const alice = (await login(gateway.url, 'alice')).accessToken;
    const denied = await fetch(`${gateway.url}/api/admin/stats`, { headers: bearer(alice) });
    const { decisionId } = (await denied.json()) as { decisionId: string };
    const decision = await fetch(`${gateway.url}/iam/authorization/decisions/${decisionId}`, { headers: bearer(alice) });
    expect(decision.status).toBe(200);
    const admin = (await login(gateway.url, 'admin')).accessToken;
    const revoked = await fetch(`${gateway.url}/iam/admin/users/u-alice/sessions/revoke`, { method: 'POST', headers: bearer(admin) });
    expect(revoked.status).toBe(200);
    expect((await fetch(`${gateway.url}/api/projects`, { headers: bearer(alice) })).status).toBe(401);
  });
});
