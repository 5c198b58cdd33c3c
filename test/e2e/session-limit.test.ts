/**
 * docs/threat-model.md #11.18: a user holds at most `iam.token.max-sessions-per-user` live sessions (the oldest beyond
 * it are revoked on every instance, with a revokeReason and an audit event), and `GET /iam/sessions` is
 * paginated (`limit`, `cursor`; the body stays the plain list, the next page is in `Link: <…>; rel="next"`). With REDIS_URL two instances
 * share the store; without it one instance plays both.
 */
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testRedisUrl, uniquePrefix } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { until } from '../support/wait';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const MAX = 3;

let upstream: RecordingUpstream;
let a: RunningGateway;
let b: RunningGateway;
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
  const shared = {
    IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
    IAM_TOKEN_STORE_PREFIX: uniquePrefix('cap'),
    IAM_TOKEN_MAX_SESSIONS_PER_USER: String(MAX),
  };
  a = await startTestGateway(upstream.url, shared);
  b = testRedisUrl() ? await startTestGateway(upstream.url, shared) : a;
}, 30_000);

afterAll(async () => {
  if (b !== a) await b?.close();
  await a?.close();
  await upstream?.close();
  await db?.close();
});

const projects = (base: string, token: string): Promise<number> => fetch(`${base}/api/projects`, { headers: bearer(token) }).then((r) => r.status);

async function auditOf(sessionId: string): Promise<Array<{ action: string; details: { reason?: string } }>> {
  const em = db.orm.em.fork();
  return em.execute<Array<{ action: string; details: { reason?: string } }>>('select action, details from iam_audit_events where target_id = ?', [sessionId]);
}

async function liveCount(userId: string): Promise<number> {
  return (await a.services!.store.listUserTokens(userId)).size;
}

describe('#11.18 sessions per user are capped', () => {
  it('#11.18: a login beyond the cap revokes the oldest live session on every instance, with a reason and an audit event', async () => {
    const first = await login(a.url, 'bob');
    const rest = [await login(a.url, 'bob'), await login(b.url, 'bob')];
    for (const gateway of [a, b]) expect(await projects(gateway.url, first.accessToken)).toBe(200);
    expect(await liveCount('u-bob')).toBe(MAX);

    const newest = await login(b.url, 'bob');
    expect(await liveCount('u-bob')).toBe(MAX);
    for (const gateway of [a, b]) {
      expect(await projects(gateway.url, first.accessToken)).toBe(401);
      for (const session of [...rest, newest]) expect(await projects(gateway.url, session.accessToken)).toBe(200);
    }
    expect((await db.repository.getSession(first.sessionId))?.revokeReason).toBe('session_limit');
    // The audit trail is written in batches: its line is there soon, not at once.
    const audit = await until('the session.revoke audit event', async () => {
      const revokes = (await auditOf(first.sessionId)).filter((event) => event.action === 'session.revoke');
      return revokes.length > 0 ? revokes : null;
    }, { every: 100 });
    expect(audit.map((event) => event.details.reason)).toEqual(['session_limit']);

    // Many more logins never grow the set beyond the cap.
    for (let i = 0; i < 4; i++) await login(i % 2 ? a.url : b.url, 'bob');
    expect(await liveCount('u-bob')).toBe(MAX);
  });

  it('#11.18: a profile switch beyond the cap never revokes the session it was switched from', async () => {
    const origin = await login(a.url, 'alice');
    const others = [await login(a.url, 'alice'), await login(a.url, 'alice')];
    const response = await fetch(`${a.url}/iam/authorization/profiles/p-alice-reader/switch`, { method: 'POST', headers: bearer(origin.accessToken) });
    expect(response.status).toBe(200);
    const derived = (await response.json()) as { accessToken: string };
    expect(await projects(b.url, origin.accessToken)).toBe(200);
    expect(await projects(b.url, derived.accessToken)).toBe(200);
    expect(await projects(b.url, others[0]!.accessToken)).toBe(401);
    expect(await liveCount('u-alice')).toBe(MAX);
  });
});

describe('#11.18 GET /iam/sessions is paginated', () => {
  /** The body is the plain list of sessions (the /iam contract); the next page is in `Link: <…>; rel="next"`. */
  interface Page {
    items: Array<{ sessionId: string; createdAt: string }>;
    nextCursor: string | null;
  }
  const page = async (token: string, query: string): Promise<{ status: number; body: Page & { code?: string } }> => {
    const response = await fetch(`${b.url}/iam/sessions${query}`, { headers: bearer(token) });
    const body = (await response.json()) as Page['items'] | { code?: string };
    if (!Array.isArray(body)) return { status: response.status, body: { items: [], nextCursor: null, ...body } };
    const next = /^<\/iam\/sessions\?limit=\d+&cursor=([^>]+)>; rel="next"$/.exec(response.headers.get('link') ?? '');
    return { status: response.status, body: { items: body, nextCursor: next ? decodeURIComponent(next[1]!) : null } };
  };

  it('#11.18: limit and cursor walk every session exactly once, newest first', async () => {
    const caller = await login(a.url, 'bob');
    const expected = (await db.repository.listSessions('u-bob')).map((row) => row.sessionId);
    expect(expected.length).toBeGreaterThan(5);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const answer: { status: number; body: Page } = await page(caller.accessToken, `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(answer.status).toBe(200);
      expect(answer.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...answer.body.items.map((item) => item.sessionId));
      cursor = answer.body.nextCursor;
    } while (cursor !== null);
    expect(seen).toEqual(expected);
    const whole = await page(caller.accessToken, '');
    expect(whole.body.items.map((item) => item.sessionId)).toEqual(expected.slice(0, 200));
    expect(whole.body.nextCursor).toBeNull();
  });

  it.each([
    ['limit=0', '/limit'],
    ['limit=abc', '/limit'],
    ['cursor=not-a-cursor', '/cursor'],
    ['limit=1&limit=2', '/limit'],
    ['page=2', '/page'],
  ])('#11.18: ?%s answers 400 IAM_VALIDATION_FAILED naming %s', async (query, pointer) => {
    const caller = await login(a.url, 'bob');
    const answer = await page(caller.accessToken, `?${query}`);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: 'IAM_VALIDATION_FAILED', errors: [expect.objectContaining({ pointer })] });
  });
});
