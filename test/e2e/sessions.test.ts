/**
 * End to end: logout, session list, revocation (own, others', revoke-others), expiry and idle
 * timeout, audit of session events — through the gateway against a real upstream process.
 */
import type { RunningGateway } from '../../src/app/start-gateway';
import { hashToken } from '../../src/domain/token-hash';
import { type TestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';
import { until } from '../support/wait';

const POLICIES = { IAM_POLICIES_DIR: E2E_POLICIES };
let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let db: TestDatabase;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream(POLICIES, { keepDatabase: true });
  ({ upstream, gateway } = fixture);
  db = fixture.db!;
});

afterAll(() => fixture?.close());

const get = (path: string, token?: string, base = gateway.url): Promise<Response> => fetch(`${base}${path}`, { headers: token ? bearer(token) : {} });
const post = (path: string, token?: string, base = gateway.url): Promise<Response> => fetch(`${base}${path}`, { method: 'POST', headers: token ? bearer(token) : {} });

interface SessionView {
  sessionId: string;
  state: string;
  current: boolean;
  revokedAt: string | null;
  logoutAt: string | null;
  revokeReason: string | null;
  clientType: string;
  activeProfileId: string | null;
  createdAt: string;
  expiresAt: string;
  lastSeenAt: string | null;
}

async function sessionsOf(token: string, base = gateway.url): Promise<SessionView[]> {
  const response = await get('/iam/sessions', token, base);
  expect(response.status).toBe(200);
  return (await response.json()) as SessionView[];
}

describe('logout', () => {
  it('answers 204, then the token is refused everywhere and the session shows logged_out', async () => {
    const keeper = await login(gateway.url, 'alice');
    const leaving = await login(gateway.url, 'alice', 'alice-password', 'API');
    expect((await get('/api/projects', leaving.accessToken)).status).toBe(200);

    expect((await post('/iam/auth/logout', leaving.accessToken)).status).toBe(204);
    expect((await get('/iam/auth/me', leaving.accessToken)).status).toBe(401);
    expect((await get('/api/projects', leaving.accessToken)).status).toBe(401);
    expect((await post('/iam/auth/logout', leaving.accessToken)).status).toBe(401);

    const view = (await sessionsOf(keeper.accessToken)).find((s) => s.sessionId === leaving.sessionId);
    expect(view).toMatchObject({ state: 'logged_out', current: false, clientType: 'API', revokedAt: null });
    expect(Date.parse(view!.logoutAt!)).toBeGreaterThan(0);
  });
});

describe('GET /iam/sessions', () => {
  it("lists only the caller's sessions in the documented shape, marking the current one", async () => {
    const mine = await login(gateway.url, 'alice');
    await login(gateway.url, 'bob');
    const list = await sessionsOf(mine.accessToken);
    expect(list.length).toBeGreaterThan(0);
    expect(list.filter((s) => s.current).map((s) => s.sessionId)).toEqual([mine.sessionId]);
    const current = list.find((s) => s.current)!;
    expect(Object.keys(current).sort()).toEqual(
      ['activeProfileId', 'clientType', 'createdAt', 'current', 'expiresAt', 'lastSeenAt', 'logoutAt', 'revokeReason', 'revokedAt', 'sessionId', 'state'].sort(),
    );
    expect(current).toMatchObject({ state: 'active', clientType: 'WEB', activeProfileId: 'p-alice-editor' });
    const bobSessions = await db.repository.listSessions('u-bob');
    for (const session of bobSessions) expect(list.map((s) => s.sessionId)).not.toContain(session.sessionId);
  });

  it('needs a token', async () => {
    expect((await get('/iam/sessions')).status).toBe(401);
  });
});

describe('POST /iam/sessions/{sessionId}/revoke', () => {
  it("revokes the caller's own session: its token gets 401 on every protected resource", async () => {
    const admin = await login(gateway.url, 'alice');
    const victim = await login(gateway.url, 'alice', 'alice-password', 'API');
    expect((await post(`/iam/sessions/${victim.sessionId}/revoke`, admin.accessToken)).status).toBe(204);
    expect((await get('/api/projects', victim.accessToken)).status).toBe(401);
    expect((await get('/iam/auth/me', victim.accessToken)).status).toBe(401);
    const view = (await sessionsOf(admin.accessToken)).find((s) => s.sessionId === victim.sessionId)!;
    expect(view.state).toBe('revoked');
    expect(view.revokeReason).toBe('revoked_by_user');
    expect(Date.parse(view.revokedAt!)).toBeGreaterThan(0);
    expect((await get('/api/projects', admin.accessToken)).status).toBe(200);
  });

  it("answers 404 IAM_SESSION_NOT_FOUND for another user's session and changes nothing", async () => {
    const alice = await login(gateway.url, 'alice');
    const bob = await login(gateway.url, 'bob');
    const response = await post(`/iam/sessions/${bob.sessionId}/revoke`, alice.accessToken);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { code: string }).code).toBe('IAM_SESSION_NOT_FOUND');
    expect((await get('/api/projects', bob.accessToken)).status).toBe(200);
    const row = await db.repository.getSession(bob.sessionId);
    expect(row).toMatchObject({ revokedAt: null, logoutAt: null });
  });

  it('answers 404 for an unknown session', async () => {
    const alice = await login(gateway.url, 'alice');
    const response = await post('/iam/sessions/00000000-0000-4000-8000-000000000000/revoke', alice.accessToken);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { code: string }).code).toBe('IAM_SESSION_NOT_FOUND');
  });
});

describe('POST /iam/sessions/revoke-others', () => {
  it('revokes every other session of the user; the current one keeps working', async () => {
    const a = await login(gateway.url, 'bob');
    const b = await login(gateway.url, 'bob', 'bob-password', 'API');
    const c = await login(gateway.url, 'bob', 'bob-password', 'WEB');
    const otherUser = await login(gateway.url, 'alice');
    expect((await post('/iam/sessions/revoke-others', a.accessToken)).status).toBe(204);
    expect((await get('/api/projects', a.accessToken)).status).toBe(200);
    expect((await get('/api/projects', b.accessToken)).status).toBe(401);
    expect((await get('/api/projects', c.accessToken)).status).toBe(401);
    expect((await get('/api/projects', otherUser.accessToken)).status).toBe(200);
    const states = Object.fromEntries((await sessionsOf(a.accessToken)).map((s) => [s.sessionId, s.state]));
    expect(states[a.sessionId]).toBe('active');
    expect(states[b.sessionId]).toBe('revoked');
    expect(states[c.sessionId]).toBe('revoked');
  });
});

describe('expiry', () => {
  it('refuses a token after iam.token.ttl and its store key is gone', async () => {
    const short = await startTestGateway(upstream.url, { ...POLICIES, IAM_TOKEN_TTL: '1s' });
    try {
      const session = await login(short.url, 'alice');
      expect((await get('/api/projects', session.accessToken, short.url)).status).toBe(200);
      // A session without an idle timeout: asking again does not extend it, so the refusal is polled for.
      await until('the 1 s session to be refused', async () => (await get('/api/projects', session.accessToken, short.url)).status === 401);
      expect(await short.services!.store.getToken(hashToken(session.accessToken))).toBeNull();
      const other = await login(short.url, 'alice');
      const view = (await sessionsOf(other.accessToken, short.url)).find((s) => s.sessionId === session.sessionId);
      expect(view?.state).toBe('expired');
    } finally {
      await short.close();
    }
  });

  it('slides with iam.token.idle-timeout while used, and expires when idle', async () => {
    // Uses 400 ms apart, for longer than the idle timeout: each gap leaves a slow machine 1.6 s before the session
    // would idle out, so only a session that does not slide expires. The pauses are the scenario, not waits.
    const idleTimeoutMs = 2000;
    const idle = await startTestGateway(upstream.url, { ...POLICIES, IAM_TOKEN_IDLE_TIMEOUT: `${idleTimeoutMs}ms` });
    try {
      const session = await login(idle.url, 'alice');
      const usedFrom = Date.now();
      while (Date.now() - usedFrom < 1.5 * idleTimeoutMs) {
        await new Promise((resolve) => setTimeout(resolve, 400));
        expect((await get('/api/projects', session.accessToken, idle.url)).status).toBe(200);
      }
      // Then idle for longer than the timeout (a lower bound, which a slow machine only lengthens).
      await new Promise((resolve) => setTimeout(resolve, idleTimeoutMs + 300));
      expect((await get('/api/projects', session.accessToken, idle.url)).status).toBe(401);
    } finally {
      await idle.close();
    }
  });
});

describe('audit trail', () => {
  it('records login, logout and revoke with who, when, address and request id', async () => {
    const a = await login(gateway.url, 'bob');
    const b = await login(gateway.url, 'bob', 'bob-password', 'API');
    await post(`/iam/sessions/${b.sessionId}/revoke`, a.accessToken);
    await post('/iam/auth/logout', a.accessToken);
    await gateway.services!.audit.flush();
    const rows = (await db.orm.em.fork().execute(
      `select action, actor_user_id, target_id, request_id, client_address, occurred_at from iam_audit_events where target_id in (?, ?) order by id`,
      [a.sessionId, b.sessionId],
    )) as Array<Record<string, unknown>>;
    const actions = rows.map((r) => `${String(r.action)}:${String(r.target_id)}`);
    expect(actions).toEqual(expect.arrayContaining([`auth.login:${a.sessionId}`, `auth.login:${b.sessionId}`, `session.revoke:${b.sessionId}`, `session.logout:${a.sessionId}`]));
    for (const row of rows) {
      expect(row.actor_user_id).toBe('u-bob');
      expect(String(row.request_id)).toMatch(/^[0-9a-f-]{36}$/);
      expect(String(row.client_address)).toMatch(/127\.0\.0\.1/);
    }
  });

  it('records failed logins', async () => {
    await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'alice', password: 'wrong', clientType: 'WEB' }) });
    await gateway.services!.audit.flush();
    const rows = (await db.orm.em.fork().execute(`select outcome, details from iam_audit_events where action = 'auth.login.failed'`)) as Array<{ outcome: string }>;
    expect(rows.length).toBeGreaterThan(0);
    expect(rows[0]!.outcome).toBe('failure');
  });
});
