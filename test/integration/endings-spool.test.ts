/**
 * Round 3 (half-done endings): an ending answered during a PostgreSQL outage is durable whatever stops next.
 * A real gateway process (SIGTERM, as orchestrators stop it) whose database link goes through a TCP relay: the
 * link is cut, a logout and a "revoke other sessions" are answered 204, the process is stopped before the
 * database returns, then a new process starts with the link restored and the same spool directory. The
 * sessions must be recorded as ended (logout_at / revoked_at and their audit rows) before the new process
 * serves, and a token store restored from a snapshot taken before the endings (the token keys written back)
 * must not bring them back. Runs against PostgreSQL (DATABASE_URL) or the embedded PGlite, with Redis
 * (REDIS_URL: the snapshot restore is simulated on it) or the in-process store (whose tokens die with the process).
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { hashToken } from '../../src/domain/token-hash';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testDatabaseUrl, testRedisUrl, uniquePrefix } from '../support/env';
import { bearer, login, ROOT } from '../support/gateway';
import { ensureBuilt, startGatewayProcess, type GatewayProcess } from '../support/gateway-process';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf, type TcpRelay } from '../support/tcp-relay';

const REDIS_URL = testRedisUrl();

let upstream: RecordingUpstream;
let db: TestDatabase;
let relay: TcpRelay;
let spoolDir: string;
let redis: Redis | null = null;
const processes: GatewayProcess[] = [];

beforeAll(async () => {
  const built = ensureBuilt();
  if (built === 'built') console.log('endings-spool: dist was older than src, ran npm run build');
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
  const target = targetOf(testDatabaseUrl());
  relay = await startTcpRelay(target.host, target.port);
  spoolDir = mkdtempSync(join(tmpdir(), 'iam-endings-spool-'));
  if (REDIS_URL) {
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  }
}, 180_000);

afterAll(async () => {
  for (const gateway of processes) await gateway.kill();
  await relay?.close();
  await upstream?.close();
  redis?.disconnect();
  await db?.close();
  if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
});

const status = (gateway: GatewayProcess, token: string): Promise<number> => fetch(`${gateway.url}/api/projects`, { headers: bearer(token) }).then((r) => r.status);

const auditRows = (action: string, sessionId: string): Promise<Array<{ actor_user_id: string }>> =>
  db.orm.em.fork().execute<Array<{ actor_user_id: string }>>(`select actor_user_id from iam_audit_events where action = ? and target_id = ?`, [action, sessionId]);

const spooledEndings = (): string[] => readdirSync(spoolDir).filter((name) => name.startsWith('endings-'));

describe('R3 endings: an ending answered during a PostgreSQL outage survives a stop', () => {
  it('logout and revoke-others answered 204 while the database is cut, then SIGTERM: the next start records them (rows and audit rows) before it serves, and a restored token store does not bring the tokens back', async () => {
    const prefix = uniquePrefix('endings');
    const env = {
      IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
      DATABASE_URL: relayedUrl(testDatabaseUrl(), relay),
      IAM_AUDIT_SPOOL_DIR: spoolDir,
      IAM_TOKEN_STORE_PREFIX: prefix,
      SERVER_SHUTDOWN_TIMEOUT: '1s',
    };
    const first = await startGatewayProcess(upstream.url, env);
    processes.push(first);
    const loggedOut = await login(first.url, 'bob');
    const keeper = await login(first.url, 'alice');
    const revoked = await login(first.url, 'alice', 'alice-password', 'API');
    for (const session of [loggedOut, keeper, revoked]) expect(await status(first, session.accessToken)).toBe(200);
    // The token store's snapshot, taken before the endings: what a restore from it writes back.
    const tokenKeys = [loggedOut, revoked].map((session) => `${prefix}:token:${hashToken(session.accessToken)}`);
    const snapshot = redis ? await Promise.all(tokenKeys.map(async (key) => ({ key, value: await redis!.get(key), ttl: await redis!.pttl(key) }))) : [];
    for (const saved of snapshot) expect(saved.value).not.toBeNull();

    await relay.cut();
    try {
      expect((await fetch(`${first.url}/iam/auth/logout`, { method: 'POST', headers: bearer(loggedOut.accessToken) })).status).toBe(204);
      expect((await fetch(`${first.url}/iam/sessions/revoke-others`, { method: 'POST', headers: bearer(keeper.accessToken) })).status).toBe(204);
      expect(await status(first, loggedOut.accessToken)).toBe(401);
      expect(await status(first, revoked.accessToken)).toBe(401);
      first.child.kill('SIGTERM');
      expect((await first.exited).code).toBe(0);
      // Nothing reached the database: the endings are in the spool only.
      expect((await db.repository.getSession(loggedOut.sessionId))?.logoutAt ?? null).toBeNull();
      expect((await db.repository.getSession(revoked.sessionId))?.revokedAt ?? null).toBeNull();
      expect(spooledEndings()).toHaveLength(2);
    } finally {
      await relay.restore();
    }

    const second = await startGatewayProcess(upstream.url, env);
    processes.push(second);
    // Recorded before the new process listened: rows, and the audit row of each, written with them.
    expect((await db.repository.getSession(loggedOut.sessionId))?.logoutAt).not.toBeNull();
    const revokedRow = await db.repository.getSession(revoked.sessionId);
    expect({ revoked: revokedRow?.revokedAt != null, reason: revokedRow?.revokeReason }).toEqual({ revoked: true, reason: 'revoked_by_user' });
    expect((await db.repository.getSession(keeper.sessionId))?.revokedAt ?? null).toBeNull();
    expect(await auditRows('session.logout', loggedOut.sessionId)).toEqual([{ actor_user_id: 'u-bob' }]);
    expect(await auditRows('session.revoke', revoked.sessionId)).toEqual([{ actor_user_id: 'u-alice' }]);
    expect(spooledEndings()).toEqual([]);

    // A token store restored from the earlier snapshot holds the tokens again: still refused.
    for (const saved of snapshot) await redis!.set(saved.key, saved.value!, 'PX', Math.max(saved.ttl, 60_000));
    expect(await status(second, loggedOut.accessToken)).toBe(401);
    expect(await status(second, revoked.accessToken)).toBe(401);
    // The session nobody ended still works (the in-process store's tokens died with the first process).
    if (redis) expect(await status(second, keeper.accessToken)).toBe(200);

    second.child.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);
  }, 90_000);
});
