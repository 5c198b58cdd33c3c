/**
 * A change must take effect everywhere, and never come undone (docs/threat-model.md #11.25–#11.28, #11.33, #11.35):
 * two gateway instances on a real Redis and PostgreSQL. Instance A reaches both through TCP relays of its
 * own, which are cut (or cut at a chosen command) while B keeps working; B has the sessions cached, so only
 * an event — or the change feed read on its interval — can make it refuse them.
 */
import { join } from 'node:path';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { main } from '../../src/cli/main';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { describeWithRedis, testDatabaseKind, testDatabaseUrl, testRedisUrl, uniquePrefix } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf, type TcpRelay } from '../support/tcp-relay';
import { until } from '../support/wait';
import { hashToken } from '../../src/domain/token-hash';

const REDIS_URL = testRedisUrl();
/** `iam.changes.poll-interval` of both instances: the stated bound on stale state when an event is lost. */
const POLL_MS = 500;
/**
 * "Enforced, not stale forever": 20 poll intervals, room for a loaded machine. It is not a measure of how fast the
 * change feed is (that is the bench's job); it still proves the feed, since without it an instance that missed the
 * event keeps serving its cached session or grant for as long as the cache holds it.
 */
const STALE_NOT_HUNG_MS = 20 * POLL_MS;
/**
 * "Done, not hung": for what the gateway finishes by itself once a link is back (record a revocation, write its audit
 * row, reconnect). Far above a loaded machine's latency; it only turns "never" into a failure.
 */
const NOT_HUNG_MS = 15_000;
/** The same for what goes through the change feed once the database answers again (retried with a backoff). */
const DELIVERED_NOT_HUNG_MS = 20_000;
/** Pause between probes: each one is a request or a query, so not a busy loop. */
const EVERY_MS = 50;

const status = (url: string, token: string): Promise<number> => fetch(`${url}/api/projects`, { headers: bearer(token) }).then((r) => r.status);

/** Also with the in-process store and PGlite: a single instance whose database link is cut. */
describe('#11.35 a single instance (either token store)', () => {
  let upstream: RecordingUpstream;
  let db: TestDatabase;
  let relay: TcpRelay;
  let gateway: RunningGateway;

  beforeAll(async () => {
    db = await createTestDatabase();
    upstream = await startRecordingUpstream();
    const target = targetOf(testDatabaseUrl());
    relay = await startTcpRelay(target.host, target.port);
    gateway = await startTestGateway(upstream.url, {
      IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
      IAM_PROVISION_FILE: join(ROOT, 'config/provision.example.yaml'),
      IAM_AUTHENTICATOR_PATH: join(ROOT, 'config/users.example.yaml'),
      IAM_CHANGES_POLL_INTERVAL: `${POLL_MS}ms`,
      DATABASE_URL: relayedUrl(testDatabaseUrl(), relay),
    });
  }, 60_000);

  afterAll(async () => {
    await gateway?.close();
    await relay?.close();
    await upstream?.close();
    await db?.close();
  });

  it('#11.35: logout while the database is down answers 204, the token is refused, and logout_at and session.logout are written when it is back', async () => {
    const session = await login(gateway.url, 'alice');
    expect(await status(gateway.url, session.accessToken)).toBe(200);
    await relay.cut();
    try {
      expect((await fetch(`${gateway.url}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) })).status).toBe(204);
      expect(await status(gateway.url, session.accessToken)).toBe(401);
    } finally {
      await relay.restore();
    }
    await until('logout_at is recorded', async () => (await db.repository.getSession(session.sessionId))?.logoutAt != null, { within: NOT_HUNG_MS, every: EVERY_MS });
    const audit = async (): Promise<number> =>
      (await db.orm.em.fork().execute(`select 1 from iam_audit_events where action = 'session.logout' and target_id = ?`, [session.sessionId])).length;
    await until('the session.logout audit row is written', async () => (await audit()) === 1, { within: NOT_HUNG_MS, every: EVERY_MS });
    expect(await status(gateway.url, session.accessToken)).toBe(401);
  });

  it("#11.35/R3 endings: revoking one of the caller's own sessions while the database is down works for a session the token store lists as theirs (recorded when it is back), and is 503 for any other", async () => {
    const caller = await login(gateway.url, 'alice');
    const other = await login(gateway.url, 'alice', 'alice-password', 'API');
    const foreign = await login(gateway.url, 'bob');
    for (const session of [caller, other, foreign]) expect(await status(gateway.url, session.accessToken)).toBe(200);
    const revoke = (sessionId: string): Promise<Response> => fetch(`${gateway.url}/iam/sessions/${sessionId}/revoke`, { method: 'POST', headers: bearer(caller.accessToken) });
    await relay.cut();
    try {
      expect((await revoke(other.sessionId)).status).toBe(204);
      expect(await status(gateway.url, other.accessToken)).toBe(401);
      // Only the database could tell whether another user's session (or an unknown one) exists: not answered.
      expect((await revoke(foreign.sessionId)).status).toBe(503);
      expect(await status(gateway.url, foreign.accessToken)).toBe(200);
      expect(await status(gateway.url, caller.accessToken)).toBe(200);
    } finally {
      await relay.restore();
    }
    await until('the revocation is recorded', async () => (await db.repository.getSession(other.sessionId))?.revokeReason === 'revoked_by_user');
    expect((await db.repository.getSession(foreign.sessionId))?.revokedAt ?? null).toBeNull();
  });

  it('#11.35/R3 endings: admin revoke (one session, all of a user\'s) while the database is down answers as usual, the sessions are refused at once, and the record is written when it is back', async () => {
    const adminToken = (await login(gateway.url, 'admin')).accessToken;
    const adminCall = (path: string, body?: unknown): Promise<Response> =>
      fetch(`${gateway.url}/iam/admin${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { ...bearer(adminToken), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const one = await login(gateway.url, 'alice');
    const bobs = [await login(gateway.url, 'bob'), await login(gateway.url, 'bob', 'bob-password', 'API')];
    // The admin's grant and every session are warm: during the outage only the record needs the database.
    expect((await adminCall('/users/u-bob')).status).toBe(200);
    for (const session of [one, ...bobs]) expect(await status(gateway.url, session.accessToken)).toBe(200);
    await relay.cut();
    try {
      expect((await adminCall(`/sessions/${one.sessionId}/revoke`, { reason: 'outage_one' })).status).toBe(204);
      expect(await status(gateway.url, one.accessToken)).toBe(401);
      const all = await adminCall('/users/u-bob/sessions/revoke', { reason: 'outage_all' });
      expect(all.status).toBe(200);
      expect(((await all.json()) as { revoked: number }).revoked).toBeGreaterThanOrEqual(bobs.length);
      for (const session of bobs) expect(await status(gateway.url, session.accessToken)).toBe(401);
    } finally {
      await relay.restore();
    }
    await until('the revocations are recorded', async () => {
      const rows = await Promise.all([one, ...bobs].map((session) => db.repository.getSession(session.sessionId)));
      return rows.every((row) => row?.revokedAt != null) && rows.map((row) => row!.revokeReason);
    });
    expect((await db.repository.getSession(one.sessionId))?.revokeReason).toBe('outage_one');
    for (const session of bobs) expect((await db.repository.getSession(session.sessionId))?.revokeReason).toBe('outage_all');
    const ids = [one, ...bobs].map((session) => session.sessionId);
    await until('their audit rows are written, by the admin', async () => {
      const rows = await db.orm.em.fork().execute<Array<{ target_id: string; actor_user_id: string }>>(
        `select target_id, actor_user_id from iam_audit_events where action = 'session.revoke' and target_id in (?, ?, ?)`,
        ids,
      );
      return rows.length === ids.length && rows.every((row) => row.actor_user_id === 'u-admin');
    });
    // The revocation by id finished its token-store step once recorded: the token is gone from the store.
    await until('the token revoked by id is deleted from the token store', async () => (await gateway.services!.store.getToken(hashToken(one.accessToken))) === null);
    for (const session of [one, ...bobs]) expect(await status(gateway.url, session.accessToken)).toBe(401);
  });
});

describeWithRedis('changes reach every instance and are never undone', () => {
  let upstream: RecordingUpstream;
  let db: TestDatabase;
  let pgA: TcpRelay;
  let redisA: TcpRelay;
  let a: RunningGateway;
  let b: RunningGateway;
  let adminToken: string;
  const prefix = uniquePrefix('changes');
  const shared = {
    IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
    IAM_PROVISION_FILE: join(ROOT, 'config/provision.example.yaml'),
    IAM_AUTHENTICATOR_PATH: join(ROOT, 'config/users.example.yaml'),
    IAM_TOKEN_STORE_PREFIX: prefix,
    IAM_CHANGES_POLL_INTERVAL: `${POLL_MS}ms`,
    REDIS_URL: REDIS_URL!,
  };

  const sql = <T>(query: string, params: unknown[] = []): Promise<T[]> => db.orm.em.fork().execute<T[]>(query, params);
  const admin = (gateway: RunningGateway, method: string, path: string, body?: unknown): Promise<Response> =>
    fetch(`${gateway.url}/iam/admin${path}`, {
      method,
      headers: { ...bearer(adminToken), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const setEnabled = async (userId: string, enabled: boolean): Promise<void> => {
    expect((await admin(b, 'PUT', `/users/${userId}`, { enabled })).status).toBe(200);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    upstream = await startRecordingUpstream();
    const dbTarget = targetOf(testDatabaseUrl());
    pgA = await startTcpRelay(dbTarget.host, dbTarget.port);
    const redisTarget = targetOf(REDIS_URL!);
    redisA = await startTcpRelay(redisTarget.host, redisTarget.port);
    a = await startTestGateway(upstream.url, { ...shared, DATABASE_URL: relayedUrl(testDatabaseUrl(), pgA), REDIS_URL: relayedUrl(REDIS_URL!, redisA) });
    b = await startTestGateway(upstream.url, shared);
    adminToken = (await login(b.url, 'admin')).accessToken;
  }, 60_000);

  // Each test starts with A's links up again (a cut relay is restored at the end of the test that cut it).
  beforeEach(async () => {
    await until(
      "A ready with its events channel up",
      async () => {
        const ready = await fetch(`${a.managementUrl}/health/ready`).then((r) => r.status, () => 0);
        return ready === 200 && a.services!.subscription.connected;
      },
      { within: NOT_HUNG_MS, every: EVERY_MS },
    );
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await pgA?.close();
    await redisA?.close();
    await upstream?.close();
    await db?.close();
  });

  it('#11.33: "revoke other sessions" during a PostgreSQL outage ends them on every instance at once, and is recorded when the database is back', async () => {
    const keeper = await login(a.url, 'alice');
    const other = await login(b.url, 'alice', 'alice-password', 'API');
    expect(await status(b.url, other.accessToken)).toBe(200); // cached on B
    expect(await status(a.url, other.accessToken)).toBe(200); // cached on A
    await pgA.cut();
    try {
      const revoke = await fetch(`${a.url}/iam/sessions/revoke-others`, { method: 'POST', headers: bearer(keeper.accessToken) });
      // True answer: it is done (the database record follows), not a 503 that did half of it.
      expect(revoke.status).toBe(204);
      expect(await status(b.url, other.accessToken)).toBe(401);
      expect(await status(a.url, other.accessToken)).toBe(401);
      expect(await status(a.url, keeper.accessToken)).toBe(200);
    } finally {
      await pgA.restore();
    }
    await until('the revocation is recorded', async () => (await db.repository.getSession(other.sessionId))?.revokedAt != null, { within: NOT_HUNG_MS, every: EVERY_MS });
    await until('the session.revoke audit row is written', async () => (await sql(`select 1 from iam_audit_events where action = 'session.revoke' and target_id = ?`, [other.sessionId])).length === 1, { within: NOT_HUNG_MS, every: EVERY_MS });
    expect(await status(b.url, other.accessToken)).toBe(401);
  });

  it('#11.33: when both steps fail mid-way (tokens deleted, publish and database failed) the answer is 503, and what began is finished without waiting for the retry', async () => {
    const keeper = await login(a.url, 'alice');
    const other = await login(b.url, 'alice', 'alice-password', 'API');
    expect(await status(b.url, other.accessToken)).toBe(200); // cached on B
    expect(await status(a.url, keeper.accessToken)).toBe(200); // cached on A: the request needs neither store
    await pgA.cut();
    const armed = redisA.cutOnRequest('publish', { deliver: false });
    try {
      const revoke = await fetch(`${a.url}/iam/sessions/revoke-others`, { method: 'POST', headers: bearer(keeper.accessToken) });
      await armed;
      expect(revoke.status).toBe(503);
    } finally {
      await pgA.restore();
      await redisA.restore();
    }
    // The deletion that took effect is recorded as soon as the database answers, and then reaches B.
    await until('B refuses the token', async () => (await status(b.url, other.accessToken)) === 401, { within: DELIVERED_NOT_HUNG_MS, every: EVERY_MS });
    expect((await db.repository.getSession(other.sessionId))?.revokeReason).toBe('revoked_by_user');
    // The client's retry is answered truthfully.
    await until('the retry answered 204', async () => (await fetch(`${a.url}/iam/sessions/revoke-others`, { method: 'POST', headers: bearer(keeper.accessToken) })).status === 204, { within: NOT_HUNG_MS, every: EVERY_MS });
  });

  it('#11.35: logout during a PostgreSQL outage answers 204, is refused everywhere, and logout_at and its audit event are written once the database is back', async () => {
    const session = await login(a.url, 'bob');
    expect(await status(b.url, session.accessToken)).toBe(200);
    await pgA.cut();
    try {
      expect((await fetch(`${a.url}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) })).status).toBe(204);
      expect(await status(b.url, session.accessToken)).toBe(401);
      expect(await status(a.url, session.accessToken)).toBe(401);
    } finally {
      await pgA.restore();
    }
    await until('logout_at is recorded', async () => (await db.repository.getSession(session.sessionId))?.logoutAt != null, { within: NOT_HUNG_MS, every: EVERY_MS });
    await until('the session.logout audit row is written', async () => (await sql(`select 1 from iam_audit_events where action = 'session.logout' and target_id = ?`, [session.sessionId])).length === 1, { within: NOT_HUNG_MS, every: EVERY_MS });
  });

  it('#11.35/R3 endings: logout while the token store is down (PostgreSQL up) is recorded at once but answers 503 (not in effect everywhere yet); the other instance refuses the token through the change feed, this one once Redis is back', async () => {
    const session = await login(a.url, 'bob');
    expect(await status(b.url, session.accessToken)).toBe(200); // cached on B
    expect(await status(a.url, session.accessToken)).toBe(200); // cached on A
    const logout = (): Promise<Response> => fetch(`${a.url}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) });
    await redisA.cut();
    try {
      // Not 204: an instance whose token store comes back before the feed reaches it would still accept the token.
      const answered = await logout();
      expect(answered.status).toBe(503);
      expect(((await answered.json()) as { code: string }).code).toBe('IAM_STORE_UNAVAILABLE');
      // Recorded at once, with its audit row.
      expect((await db.repository.getSession(session.sessionId))?.logoutAt).not.toBeNull();
      expect(await sql(`select 1 from iam_audit_events where action = 'session.logout' and target_id = ?`, [session.sessionId])).toHaveLength(1);
      // A cannot read its token store: the record answers a second logout (401), and nothing is served with the token.
      expect((await logout()).status).toBe(401);
      expect(await status(a.url, session.accessToken)).not.toBe(200);
      // B hears it through the change feed (and a deliverer deletes the token from Redis), A still cut off.
      await until('B refuses the token', async () => (await status(b.url, session.accessToken)) === 401);
    } finally {
      await redisA.restore();
    }
    await until('A, back on Redis, refuses the token', async () => (await status(a.url, session.accessToken)) === 401);
    expect(await status(b.url, session.accessToken)).toBe(401);
    await until('the token is deleted from Redis', async () => (await b.services!.store.getToken(hashToken(session.accessToken))) === null);
  });

  it('#11.35/R3 endings: admin revoke by session id and of all of a user\'s sessions during a PostgreSQL outage is refused by every instance at once', async () => {
    const one = await login(b.url, 'alice', 'alice-password', 'API');
    const bob = await login(b.url, 'bob');
    for (const session of [one, bob]) {
      expect(await status(b.url, session.accessToken)).toBe(200); // cached on B
      expect(await status(a.url, session.accessToken)).toBe(200); // cached on A
    }
    expect((await admin(a, 'GET', '/users/u-bob')).status).toBe(200); // the admin's grant is cached on A
    await pgA.cut();
    try {
      expect((await admin(a, 'POST', `/sessions/${one.sessionId}/revoke`, {})).status).toBe(204);
      expect((await admin(a, 'POST', '/users/u-bob/sessions/revoke', {})).status).toBe(200);
      for (const session of [one, bob]) expect([await status(a.url, session.accessToken), await status(b.url, session.accessToken)]).toEqual([401, 401]);
    } finally {
      await pgA.restore();
    }
    await until('both are recorded', async () => (await db.repository.getSession(one.sessionId))?.revokedAt != null && (await db.repository.getSession(bob.sessionId))?.revokedAt != null);
    await until('the token revoked by id is deleted from Redis', async () => (await b.services!.store.getToken(hashToken(one.accessToken))) === null);
    expect(await status(b.url, one.accessToken)).toBe(401);
  });

  it('#11.33: a revocation whose token-store step fails is still enforced on every instance (through the change feed) and delivered later', async () => {
    const keeper = await login(b.url, 'alice');
    const victim = await login(b.url, 'alice', 'alice-password', 'API');
    expect(await status(b.url, victim.accessToken)).toBe(200);
    const aKeeper = await login(a.url, 'alice');
    expect(await status(a.url, aKeeper.accessToken)).toBe(200);
    // A's Redis link dies at the first deletion of the revocation; PostgreSQL still answers.
    const armed = redisA.cutOnRequest(victim.sessionId, { deliver: false });
    const revoke = fetch(`${a.url}/iam/admin/sessions/${victim.sessionId}/revoke`, { method: 'POST', headers: bearer(adminToken) });
    await armed;
    try {
      // Recorded but not in effect everywhere at once: 503 (a retry confirms it), and enforced through the change feed.
      expect((await revoke).status).toBe(503);
      await until('B refuses the token through the change feed', async () => (await status(b.url, victim.accessToken)) === 401, { within: STALE_NOT_HUNG_MS, every: EVERY_MS });
      expect(await status(b.url, keeper.accessToken)).toBe(200);
    } finally {
      await redisA.restore();
    }
    // Delivered until done: the token itself is deleted from Redis once a deliverer gets through.
    await until('every change is delivered', async () => (await sql(`select 1 from iam_changes where delivered_at is null`)).length === 0, { within: DELIVERED_NOT_HUNG_MS, every: EVERY_MS });
    expect((await b.services!.store.listUserTokens('u-alice')).has(victim.sessionId)).toBe(false);
  });

  it('#11.25: an admin change committed while the publish fails answers 200 and is enforced on every instance through the change feed', async () => {
    const bob = await login(b.url, 'bob');
    expect(await status(b.url, bob.accessToken)).toBe(200); // cached on B
    const armed = redisA.cutOnRequest('publish', { deliver: false });
    const disable = admin(a, 'PUT', '/users/u-bob', { enabled: false });
    await armed;
    try {
      expect((await disable).status).toBe(200);
      await until("B refuses the disabled user's token through the change feed", async () => (await status(b.url, bob.accessToken)) === 401, { within: STALE_NOT_HUNG_MS, every: EVERY_MS });
    } finally {
      await redisA.restore();
      await setEnabled('u-bob', true);
    }
    // Re-enabling the user never brings a revoked session back.
    expect(await status(b.url, bob.accessToken)).toBe(401);
    await until('A reconnected to Redis', async () => (await status(a.url, bob.accessToken)) !== 503, { within: NOT_HUNG_MS, every: EVERY_MS });
    expect(await status(a.url, bob.accessToken)).toBe(401);
    await until('every change is delivered', async () => (await sql(`select 1 from iam_changes where delivered_at is null`)).length === 0, { within: DELIVERED_NOT_HUNG_MS, every: EVERY_MS });
  });

  it('#11.25: a grant change whose publish fails is not served stale: the change feed reaches every instance', async () => {
    const alice = await login(b.url, 'alice');
    expect(await status(b.url, alice.accessToken)).toBe(200); // grant cached on B
    const editor = ['project:list', 'project:read', 'project:create', 'project:update', 'task:read', 'task:delete'];
    const armed = redisA.cutOnRequest('publish', { deliver: false });
    const narrow = admin(a, 'PUT', '/templates/editor-v1', { name: 'editor', permissions: editor.filter((code) => code !== 'project:list') });
    await armed;
    try {
      expect((await narrow).status).toBe(200);
      await until('B enforces the narrowed grant through the change feed', async () => (await status(b.url, alice.accessToken)) === 403, { within: STALE_NOT_HUNG_MS, every: EVERY_MS });
    } finally {
      await redisA.restore();
      expect((await admin(b, 'PUT', '/templates/editor-v1', { name: 'editor', permissions: editor })).status).toBe(200);
    }
    expect(await status(b.url, alice.accessToken)).toBe(200);
  });

  it('#11.27/#11.26: disabling a user in provisioning (provision FILE --overwrite) ends sessions like the admin API; start-time provisioning changes nothing existing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-changes-'));
    const file = (name: string, yaml: string): string => {
      const path = join(dir, name);
      writeFileSync(path, yaml);
      return path;
    };
    // `provision FILE --overwrite` (plain `provision FILE` only creates what is missing): bob disabled.
    const bob = await login(a.url, 'bob');
    expect(await status(a.url, bob.accessToken)).toBe(200);
    expect(await status(b.url, bob.accessToken)).toBe(200);
    const saved = { ...process.env };
    Object.assign(process.env, {
      DATABASE_URL: testDatabaseUrl(),
      DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '2',
      REDIS_URL: REDIS_URL!,
      IAM_TOKEN_STORE_PREFIX: prefix,
      IAM_CONFIG: join(ROOT, 'config/default.yaml'),
      LOG_LEVEL: 'silent',
    });
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await main(['provision', file('disable-bob.yaml', 'users:\n  - userId: u-bob\n    enabled: false\n'), '--overwrite'])).toBe(0);
    } finally {
      write.mockRestore();
      process.env = saved;
    }
    await until('both instances refuse the disabled user', async () => (await status(a.url, bob.accessToken)) === 401 && (await status(b.url, bob.accessToken)) === 401, { within: STALE_NOT_HUNG_MS, every: EVERY_MS });
    expect((await db.repository.getSession(bob.sessionId))?.revokeReason).toBe('user_disabled');
    // A profile switch is no way around it.
    const switched = await fetch(`${a.url}/iam/authorization/profiles/p-bob-editor/switch`, { method: 'POST', headers: bearer(bob.accessToken) });
    expect(switched.status).toBe(401);
    await setEnabled('u-bob', true);

    // Start-time provisioning of a new instance creates only what is missing: an existing identity is never
    // changed by it, so no running instance has anything to hear and alice's session stays.
    const alice = await login(a.url, 'alice');
    expect(await status(b.url, alice.accessToken)).toBe(200);
    const c = await startTestGateway(upstream.url, {
      ...shared,
      IAM_PROVISION_FILE: file('disable-identity.yaml', 'users:\n  - userId: u-alice\n    identities: [{ identityId: id-alice, identityDomain: example.com, enabled: false }]\n'),
    });
    try {
      expect(await status(c.url, alice.accessToken)).toBe(200);
      expect(await status(b.url, alice.accessToken)).toBe(200);
      expect((await db.repository.getIdentity('id-alice'))?.enabled).toBe(true);
      expect((await db.repository.getSession(alice.sessionId))?.revokedAt ?? null).toBeNull();
    } finally {
      await c.close();
      expect((await admin(b, 'PUT', '/identities/id-alice', { userId: 'u-alice', identityDomain: 'example.com', enabled: true })).status).toBe(200);
    }
  });

  it('#11.28: a login racing a disable leaves no usable token, and re-enabling the user brings nothing back', async () => {
    const store = a.services!.store;
    const original = store.putToken.bind(store);
    let reached!: () => void;
    const atPut = new Promise<void>((resolve) => (reached = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    store.putToken = async (hash, record) => {
      reached();
      await gate;
      return original(hash, record);
    };
    try {
      const racing = fetch(`${a.url}/iam/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'bob', password: 'bob-password', clientType: 'WEB' }),
      });
      // bob's login read him enabled and is about to write its token (or failed before: then say so).
      const early = racing.then((r) => Promise.reject(new Error(`login answered ${r.status} before writing its token`)));
      early.catch(() => undefined);
      await Promise.race([atPut, early]);
      await setEnabled('u-bob', false);
      release();
      const answer = await racing;
      const token = answer.status === 200 ? ((await answer.json()) as { accessToken: string }).accessToken : null;
      await setEnabled('u-bob', true);
      // Whatever the login answered, no token it may have handed out works, before or after the re-enable.
      if (token) expect([await status(a.url, token), await status(b.url, token)]).toEqual([401, 401]);
      expect(answer.status).toBe(401);
    } finally {
      store.putToken = original;
    }
    // Logins after the re-enable work as usual.
    expect(await status(b.url, (await login(a.url, 'bob')).accessToken)).toBe(200);
  });
});
