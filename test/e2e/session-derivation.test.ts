/**
 * docs/threat-model.md #11.7: a profile switch derives a session from the caller's. The derived session never outlives
 * its origin (it inherits the absolute expiry; switching again renews nothing) and ending the origin
 * (logout, own revoke, admin revoke) ends every session derived from it, transitively, on every instance,
 * recorded in PostgreSQL. With REDIS_URL two instances share the store; without it one instance plays both.
 */
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { hashToken } from '../../src/domain/token-hash';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testRedisUrl, uniquePrefix } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

interface AuthResult {
  accessToken: string;
  sessionId: string;
  expiresAt: string;
}

let upstream: RecordingUpstream;
let a: RunningGateway;
let b: RunningGateway;
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
  const shared = { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), IAM_TOKEN_STORE_PREFIX: uniquePrefix('derived') };
  a = await startTestGateway(upstream.url, shared);
  b = testRedisUrl() ? await startTestGateway(upstream.url, shared) : a;
}, 30_000);

afterAll(async () => {
  if (b !== a) await b?.close();
  await a?.close();
  await upstream?.close();
  await db?.close();
});

async function switchTo(base: string, token: string, profileId: string): Promise<AuthResult> {
  const response = await fetch(`${base}/iam/authorization/profiles/${profileId}/switch`, { method: 'POST', headers: bearer(token) });
  expect(response.status).toBe(200);
  return (await response.json()) as AuthResult;
}

const projects = (base: string, token: string): Promise<number> => fetch(`${base}/api/projects`, { headers: bearer(token) }).then((r) => r.status);
const me = (base: string, token: string): Promise<number> => fetch(`${base}/iam/auth/me`, { headers: bearer(token) }).then((r) => r.status);

async function row(sessionId: string) {
  const found = await db.repository.getSession(sessionId);
  expect(found).not.toBeNull();
  return found!;
}

describe('#11.7 profile switch derives a session from the caller', () => {
  it('#11.7: a switched session inherits the origin absolute expiry; switching again never extends it', async () => {
    const origin = await login(a.url, 'alice');
    // The pauses are the scenario: time passes between the switches (over a second, so an expiry computed afresh
    // would differ); a slow machine only lengthens them.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const reader = await switchTo(a.url, origin.accessToken, 'p-alice-reader');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const back = await switchTo(b.url, reader.accessToken, 'p-alice-editor');
    expect(reader.expiresAt).toBe(origin.expiresAt);
    expect(back.expiresAt).toBe(origin.expiresAt);
    // The store and the table hold the same end.
    for (const derived of [reader, back]) {
      expect((await row(derived.sessionId)).expiresAt.toISOString()).toBe(origin.expiresAt);
      expect((await a.services!.store.getToken(hashToken(derived.accessToken)))?.expiresAt).toBe(origin.expiresAt);
    }
    expect((await row(back.sessionId)).originSessionId).toBe(reader.sessionId);
  });

  it('#11.7: logging out the origin ends the derived sessions transitively on every instance, recorded in the table', async () => {
    const origin = await login(a.url, 'alice');
    const other = await login(a.url, 'alice');
    const reader = await switchTo(a.url, origin.accessToken, 'p-alice-reader');
    const editor = await switchTo(b.url, reader.accessToken, 'p-alice-editor');
    // Both instances have every session cached.
    for (const gateway of [a, b]) for (const session of [origin, reader, editor, other]) expect(await projects(gateway.url, session.accessToken)).toBe(200);

    expect((await fetch(`${a.url}/iam/auth/logout`, { method: 'POST', headers: bearer(origin.accessToken) })).status).toBe(204);

    for (const gateway of [a, b]) {
      for (const session of [origin, reader, editor]) {
        expect({ gateway: gateway === a ? 'a' : 'b', proxied: await projects(gateway.url, session.accessToken), iam: await me(gateway.url, session.accessToken) }).toEqual({
          gateway: gateway === a ? 'a' : 'b',
          proxied: 401,
          iam: 401,
        });
      }
      expect(await projects(gateway.url, other.accessToken)).toBe(200);
    }
    for (const derived of [reader, editor]) {
      const ended = await row(derived.sessionId);
      expect({ revoked: ended.revokedAt !== null, reason: ended.revokeReason }).toEqual({ revoked: true, reason: 'origin_ended' });
    }
    expect((await row(other.sessionId)).revokedAt).toBeNull();
  });

  it.each([
    ['revoked by its user from another session', 'own'],
    ['revoked by an admin', 'admin'],
  ])('#11.7: an origin %s ends its derived sessions', async (_name, how) => {
    const keeper = await login(a.url, 'alice');
    const origin = await login(a.url, 'alice', 'alice-password', 'API');
    const derived = await switchTo(a.url, origin.accessToken, 'p-alice-reader');
    const grandchild = await switchTo(a.url, derived.accessToken, 'p-alice-editor');
    expect(await projects(b.url, grandchild.accessToken)).toBe(200);
    if (how === 'own') {
      expect((await fetch(`${b.url}/iam/sessions/${origin.sessionId}/revoke`, { method: 'POST', headers: bearer(keeper.accessToken) })).status).toBe(204);
    } else {
      await b.services!.sessions.revokeById(origin.sessionId, 'revoked_by_admin', 'u-admin', { requestId: 'test', clientAddress: null });
    }
    for (const gateway of [a, b]) {
      expect(await projects(gateway.url, derived.accessToken)).toBe(401);
      expect(await projects(gateway.url, grandchild.accessToken)).toBe(401);
      expect(await projects(gateway.url, keeper.accessToken)).toBe(200);
    }
    expect((await row(grandchild.sessionId)).revokeReason).toBe('origin_ended');
  });

  it('#11.7: a switch racing the end of its origin leaves no live derived session', async () => {
    const origin = await login(a.url, 'alice');
    const verified = await a.services!.sessions.verify(origin.accessToken);
    expect(verified).not.toBeNull();
    // The origin ends after the switch verified it but before the derived session exists.
    expect((await fetch(`${b.url}/iam/auth/logout`, { method: 'POST', headers: bearer(origin.accessToken) })).status).toBe(204);
    const principal = verified!.record.principal;
    await expect(a.services!.sessions.issue({ ...principal, activeProfileId: 'p-alice-reader' }, 'WEB', { requestId: 'race', clientAddress: null }, verified!.record.sessionEpoch ?? 0, verified!)).rejects.toMatchObject({
      code: 'IAM_UNAUTHENTICATED',
    });
    const live = await a.services!.store.listUserTokens(principal.userId);
    const rows = await db.repository.listSessions(principal.userId);
    for (const session of rows.filter((r) => r.originSessionId === origin.sessionId)) expect(live.has(session.sessionId)).toBe(false);
  });
});
