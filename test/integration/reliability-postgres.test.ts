/**
 * Reliability: PostgreSQL goes down mid-run. A TCP relay of our own sits between the gateway and the
 * test database (the real PostgreSQL of DATABASE_URL, or the embedded PGlite socket of this jest run) and is
 * cut, so the driver sees real resets and refused connections; the shared server itself is never stopped.
 * This file always runs: without DATABASE_URL it relays to PGlite.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testDatabaseKind, testDatabaseUrl } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf, type TcpRelay } from '../support/tcp-relay';
import { timed as timedFetch, type Answer } from '../support/timed-fetch';
import { expectProblem } from '../support/problems';
import { until } from '../support/wait';

const POLICIES = join(ROOT, 'test/fixtures/e2e-policies');
/**
 * Users who log in for the first time in one fault case each (`newcomer-N`, alice's password hash): a returning
 * user's login only reads its principal, so the principal transaction's faults need a user it creates.
 */
const NEWCOMERS = ['newcomer-1', 'newcomer-2', 'newcomer-3', 'newcomer-4'];
const USERS = [
  { username: 'alice', userId: 'u-alice' },
  { username: 'bob', userId: 'u-bob' },
  { username: 'admin', userId: 'u-admin' },
  ...NEWCOMERS.map((username) => ({ username, userId: `u-${username}` })),
];

/** The example users plus the newcomers, written to `dir`; returns the file's path. */
function writeUsersFile(dir: string): string {
  const example = parse(readFileSync(join(ROOT, 'config/users.example.yaml'), 'utf8')) as { users: Array<Record<string, unknown>> };
  const alice = example.users.find((user) => user.username === 'alice')!;
  const newcomers = NEWCOMERS.map((username) => ({ ...alice, username, userId: `u-${username}`, identityId: `id-${username}`, displayName: username }));
  const path = join(dir, 'users.yaml');
  writeFileSync(path, stringify({ users: [...example.users, ...newcomers] }));
  return path;
}

const timed = (url: string, init: RequestInit = {}): Promise<Answer> => timedFetch(url, init, 15_000);

function tryLogin(gateway: RunningGateway, username: string): Promise<Answer> {
  const password = username.startsWith('newcomer-') ? 'alice-password' : `${username}-password`;
  return timed(`${gateway.url}/iam/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password, clientType: 'WEB' }),
  });
}

/** Polls `probe` until it holds (test/support/wait.ts); `withinMs` only turns a gateway that never gets there into a failure. */
function eventually(what: string, withinMs: number, probe: () => Promise<boolean>): Promise<true> {
  return until(what, () => probe().then((held) => held || null), { within: withinMs, every: 100 });
}

let upstream: RecordingUpstream;
let relay: TcpRelay;
let gateway: RunningGateway;
let db: TestDatabase;
let usersDir: string;

beforeAll(async () => {
  usersDir = mkdtempSync(join(tmpdir(), 'iam-reliability-users-'));
  db = await createTestDatabase();
  const url = testDatabaseUrl();
  const target = targetOf(url);
  relay = await startTcpRelay(target.host, target.port);
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: POLICIES, DATABASE_URL: relayedUrl(url, relay), IAM_AUTHENTICATOR_PATH: writeUsersFile(usersDir) });
  console.log(`reliability: PostgreSQL fault tests run against ${testDatabaseKind() === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : 'the embedded PGlite'} through a TCP relay`);
}, 30_000);

afterAll(async () => {
  await gateway?.close();
  await relay?.close();
  await upstream?.close();
  await db?.close();
  if (usersDir) rmSync(usersDir, { recursive: true, force: true });
});

/**
 * Nothing half-written: every token in the store belongs to a session row that says it is live, and every
 * live session row has its token in the store (the store decides "usable now", the table
 * keeps the history; both must tell the same story). Rows are checked from `rowsSince` on, so one test's
 * leftovers do not fail the next.
 */
async function expectStoreAndTableAgree(rowsSince = new Date(0)): Promise<void> {
  const store = gateway.services!.store;
  const now = Date.now();
  for (const { userId } of USERS) {
    const tokens = await store.listUserTokens(userId);
    const rows = await db.repository.listSessions(userId);
    const rowsById = new Map(rows.map((row) => [row.sessionId, row]));
    for (const [sessionId, tokenHash] of tokens) {
      const row = rowsById.get(sessionId);
      expect({ sessionId, row: row ? 'present' : 'missing' }).toEqual({ sessionId, row: 'present' });
      expect(row!.tokenHash).toBe(tokenHash);
      expect({ sessionId, revokedAt: row!.revokedAt, logoutAt: row!.logoutAt }).toEqual({ sessionId, revokedAt: null, logoutAt: null });
    }
    for (const row of rows) {
      if (row.createdAt < rowsSince) continue;
      const live = row.revokedAt === null && row.logoutAt === null && row.expiresAt.getTime() > now;
      if (live) expect({ sessionId: row.sessionId, token: tokens.get(row.sessionId) ?? 'missing' }).toEqual({ sessionId: row.sessionId, token: row.tokenHash });
    }
  }
}

/**
 * "Answered, not hung": a generous upper bound for an answer the gateway must give instead of waiting on a cut or
 * frozen connection (which would wait for minutes, or until the test's own timeout). It is far above the latency of a
 * machine kept busy by other work; how fast the answer comes is the bench's business, not this test's.
 */
const ANSWERED_NOT_HUNG_MS = 10_000;

describe('PostgreSQL goes down mid-run (relay cut), then comes back', () => {
  it('keeps proxying sessions whose grants are cached, answers 503 where the database is needed, and recovers', async () => {
    const api = `${gateway.url}/api/projects`;
    const alice = await login(gateway.url, 'alice');
    // One request warms alice's grant cache; bob logs in but makes none, so his grant is not cached.
    expect((await timed(api, { headers: bearer(alice.accessToken) })).status).toBe(200);
    const bob = await login(gateway.url, 'bob');
    expect((await timed(`${gateway.managementUrl}/health/ready`)).status).toBe(200);

    await relay.cut();
    try {
      // The hot path touches no database with a warm cache.
      await upstream.clear();
      for (let i = 0; i < 5; i++) {
        const answer = await timed(api, { headers: bearer(alice.accessToken) });
        // 200 is the proof: with the database cut, any database access on this path would answer 503.
        expect(answer.status).toBe(200);
      }
      expect(await upstream.requests()).toHaveLength(5);

      // A grant that must be loaded cannot be: 503, not 500, not 200.
      const bobAnswer = await timed(api, { headers: bearer(bob.accessToken) });
      expectProblem(bobAnswer, 503, 'IAM_DATABASE_UNAVAILABLE', { requestId: expect.any(String) });
      expect(Number(bobAnswer.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(bobAnswer.elapsedMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);

      // A host's check is decided as the proxy decides: alice's cached grant still answers (the same answer as
      // before the outage), bob's grant would need the database: 503, never `allowed: true` (docs/host-integration.md).
      const check = (token: string): Promise<Answer> =>
        timed(`${gateway.url}/iam/authorization/check`, {
          method: 'POST',
          headers: { ...bearer(token), 'content-type': 'application/json' },
          body: JSON.stringify({ checks: [{ permissionCode: 'project:list' }, { permissionCode: 'admin:write' }] }),
        });
      const aliceCheck = await check(alice.accessToken);
      expect(aliceCheck.status).toBe(200);
      expect((JSON.parse(aliceCheck.body) as { results: Array<{ allowed: boolean }> }).results.map((result) => result.allowed)).toEqual([true, false]);
      const bobCheck = await check(bob.accessToken);
      expectProblem(bobCheck, 503, 'IAM_DATABASE_UNAVAILABLE', { requestId: expect.any(String) });
      expect(bobCheck.elapsedMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);

      const loginAnswer = await tryLogin(gateway, 'alice');
      expectProblem(loginAnswer, 503, 'IAM_DATABASE_UNAVAILABLE', { requestId: expect.any(String) });
      expect(Number(loginAnswer.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(loginAnswer.elapsedMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);

      const notReady = await timed(`${gateway.managementUrl}/health/ready`);
      expect(notReady.status).toBe(503);
      expect(JSON.parse(notReady.body)).toMatchObject({ status: 'not ready', checks: { database: { ok: false } } });
      expect(notReady.elapsedMs).toBeLessThan(ANSWERED_NOT_HUNG_MS);
    } finally {
      await relay.restore();
    }

    // No restart: login and the uncached grant work again (the bound only turns a gateway that never recovers into a failure).
    await eventually('login after restore', 20_000, async () => (await tryLogin(gateway, 'alice')).status === 200);
    expect((await timed(api, { headers: bearer(bob.accessToken) })).status).toBe(200);
    await eventually('ready after restore', 20_000, async () => (await timed(`${gateway.managementUrl}/health/ready`)).status === 200);
    await expectStoreAndTableAgree();
  }, 90_000);

  // The login write path, broken at its worst moments: the statement reached the database, the answer
  // never came back (the client cannot know whether it took effect). A first login creates the user and identity
  // in one transaction; a returning user's login reads them (no transaction); every login inserts its session.
  it.each([
    ['as the principal transaction begins', 'newcomer-1', 'BEGIN', true],
    ['inside the principal transaction', 'newcomer-2', 'insert into "iam_users"', false],
    ['inside the principal transaction, after the server ran the statement', 'newcomer-3', 'insert into "iam_users"', true],
    ['inside the principal transaction, after the identity insert ran', 'newcomer-4', 'insert into "iam_identities"', true],
    ["as a returning user's principal is read", 'alice', 'from "iam_users"', false],
    ["after the server answered a returning user's principal read", 'alice', 'from "iam_users"', true],
    ["after the server answered a returning user's identity read", 'alice', 'from "iam_identities"', true],
    ['just before the session insert', 'alice', 'insert into "iam_sessions"', false],
    ['after the session insert committed, before its reply', 'alice', 'insert into "iam_sessions"', true],
  ])('a login cut %s answers 503 and leaves nothing half-written', async (_name, username, statement, deliver) => {
    const since = new Date();
    const firstLogin = username.startsWith('newcomer-');
    if (firstLogin) expect(await db.repository.getUser(`u-${username}`)).toBeNull();
    else expect((await tryLogin(gateway, username)).status).toBe(200);
    const armed = relay.cutOnRequest(statement, { deliver });
    let answer: Answer;
    try {
      answer = await tryLogin(gateway, username);
      await armed;
    } finally {
      await relay.restore();
    }
    expectProblem(answer, 503, 'IAM_DATABASE_UNAVAILABLE', { requestId: expect.any(String) });
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    await eventually('login after restore', 20_000, async () => (await tryLogin(gateway, username)).status === 200);
    // The principal is whole: the user and its identity, the identity the user's (a first login's transaction took
    // effect entirely or not at all, and the login after it completed it); a returning user's login, now a read, works.
    const user = await db.repository.getUser(`u-${username}`);
    const identity = await db.repository.getIdentity(`id-${username}`);
    expect({ user: user?.userId, identity: identity?.identityId, owner: identity?.userId }).toEqual({ user: `u-${username}`, identity: `id-${username}`, owner: `u-${username}` });
    if (firstLogin) expect((await tryLogin(gateway, username)).status).toBe(200);
    // Repairs the gateway makes in the background get a moment once the database is back.
    await eventually('store and table agree', 5000, async () => expectStoreAndTableAgree(since).then(() => true, () => false)).catch(() => undefined);
    await expectStoreAndTableAgree(since);
  }, 30_000);
});
