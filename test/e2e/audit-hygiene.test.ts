/**
 * Audit hygiene (docs/threat-model.md) at the /iam edge and in the stored trail (in-process gateway, the run's database: PostgreSQL
 * with DATABASE_URL, else PGlite): #11.3 strings PostgreSQL cannot store are refused (400) in every /iam
 * body and query before any route runs, and a login with a NUL no longer poisons the trail; #11.15
 * anonymous denials store a bounded row and are rate-limited; #11.20 a malformed audit cursor is a 400.
 */
import type { RunningGateway } from '../../src/app/start-gateway';
import { type TestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';

const POLICIES = { IAM_POLICIES_DIR: E2E_POLICIES };
let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let db: TestDatabase;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ ...POLICIES, IAM_AUDIT_ANONYMOUS_DENIALS_PER_MINUTE: '5' }, { keepDatabase: true });
  ({ upstream, gateway } = fixture);
  db = fixture.db!;
});

// A test restarts the gateway: the one running at the end is closed too.
afterAll(async () => {
  await gateway?.close();
  await fixture?.close();
});

async function send(method: string, path: string, body?: string, token?: string): Promise<{ status: number; body: { code?: string; errors?: Array<{ pointer: string }>; decisionId?: string } }> {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(token ? bearer(token) : {}) },
    body,
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as never) : {} };
}

/** JSON text with a raw escape (JSON.stringify would keep a lone surrogate as an escape too; this is explicit). */
const loginBody = (usernameJson: string): string => `{"username":${usernameJson},"password":"x","clientType":"WEB"}`;

describe('#11.3 unstorable strings are refused at the /iam edge', () => {
  it.each([
    ['NUL', '"ali\\u0000ce"'],
    ['a C0 control', '"ali\\u0007ce"'],
    ['a newline', '"ali\\nce"'],
    ['DEL', '"ali\\u007fce"'],
    ['a lone high surrogate', '"ali\\ud800ce"'],
    ['a lone low surrogate', '"ali\\udc00ce"'],
  ])('#11.3: a login username with %s is 400 IAM_VALIDATION_FAILED naming /username', async (_name, username) => {
    const answer = await send('POST', '/iam/auth/login', loginBody(username));
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('IAM_VALIDATION_FAILED');
    expect(answer.body.errors).toEqual([expect.objectContaining({ pointer: '/username' })]);
  });

  it('#11.3: every /iam body is checked, keys and nested values included, before any route (admin and session bodies too)', async () => {
    // Not over-blocking: a valid surrogate pair (an emoji) is text like any other.
    expect((await send('POST', '/iam/auth/login', loginBody('"ali\\ud83d\\ude00ce"'))).status).toBe(401);
    const admin = await login(gateway.url, 'admin');
    const user = await send('PUT', '/iam/admin/users/u-new', '{"displayName":"x\\u0000y"}', admin.accessToken);
    expect(user.status).toBe(400);
    expect(user.body.errors).toEqual([expect.objectContaining({ pointer: '/displayName' })]);
    const nested = await send('PUT', '/iam/admin/profiles/p-x', '{"userId":"u-admin","label":{"k\\u0001":"v"}}', admin.accessToken);
    expect(nested.status).toBe(400);
    expect(nested.body.code).toBe('IAM_VALIDATION_FAILED');
    // A key that is a lone surrogate: named (as U+FFFD, percent-encoded) in a 400, not a 500.
    const surrogateKey = await send('PUT', '/iam/admin/profiles/p-x', '{"userId":"u-admin","label":{"\\ud800":"v"}}', admin.accessToken);
    expect(surrogateKey.status).toBe(400);
    expect(surrogateKey.body.errors).toEqual([expect.objectContaining({ pointer: '/label/%EF%BF%BD' })]);
    const revoke = await send('POST', `/iam/admin/users/u-alice/sessions/revoke`, '{"reason":"bye\\u0000"}', admin.accessToken);
    expect(revoke.status).toBe(400);
    expect(revoke.body.errors).toEqual([expect.objectContaining({ pointer: '/reason' })]);
    // Query parameters that reach the database too.
    const query = await send('GET', '/iam/admin/audit?userId=a%00b', undefined, admin.accessToken);
    expect(query.status).toBe(400);
    expect(query.body.errors).toEqual([expect.objectContaining({ pointer: '/userId' })]);
    expect((await send('GET', '/iam/admin/users?q=a%01b', undefined, admin.accessToken)).status).toBe(400);
  });

  it('#11.3: a body nested thousands of levels deep is 400 IAM_VALIDATION_FAILED, never a 500 (found by the fuzz test)', async () => {
    for (const body of ['['.repeat(5000) + ']'.repeat(5000), '{"a":'.repeat(3000) + '1' + '}'.repeat(3000)]) {
      const answer = await send('POST', '/iam/auth/login', body);
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('IAM_VALIDATION_FAILED');
    }
    // Ordinary nesting passes the check (and then fails on what it is: not a login body).
    expect((await send('POST', '/iam/auth/login', '[[["x"]]]')).status).toBe(400);
  });

  it('#11.3: after a login with a NUL, the trail keeps working: a denial is stored and its decision can be looked up', async () => {
    // The way the attack arrived before (a raw NUL in JSON): refused, nothing buffered.
    expect((await send('POST', '/iam/auth/login', loginBody('"evil\\u0000"'))).status).toBe(400);
    const alice = await login(gateway.url, 'alice');
    const denied = await send('GET', '/api/admin/stats', undefined, alice.accessToken);
    expect(denied.status).toBe(403);
    await gateway.services!.audit.flush();
    const lookup = await send('GET', `/iam/authorization/decisions/${denied.body.decisionId}`, undefined, alice.accessToken);
    expect(lookup.status).toBe(200);
  });
});

describe('#11.15 anonymous denials are bounded in the trail', () => {
  it('#11.15: an anonymous 403 for an 8 KB path stores a target of at most 512 characters', async () => {
    const path = `/scan/${'x'.repeat(7900)}`;
    expect((await send('GET', path)).status).toBe(403);
    await gateway.services!.audit.flush();
    const rows = await db.orm.em.fork().execute<Array<{ target_id: string; size: number }>>(
      "select target_id, octet_length(details::text) as size from iam_audit_events where action = 'authz.deny' and target_id like 'GET /scan/%'",
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.target_id.length).toBeLessThanOrEqual(512);
    expect(Number(rows[0]!.size)).toBeLessThan(4096);
  });

  it('#11.15: beyond iam.audit.anonymous-denials-per-minute, anonymous undeclared-route denials are only counted', async () => {
    for (let i = 0; i < 40; i++) expect((await send('GET', `/probe/${i}`)).status).toBe(403);
    await gateway.services!.audit.flush();
    const rows = await db.orm.em.fork().execute<Array<{ n: number }>>("select count(*)::int as n from iam_audit_events where action = 'authz.deny' and actor_user_id is null");
    expect(rows[0]!.n).toBeLessThanOrEqual(5);
    // A known user's denials are never suppressed.
    const bob = await login(gateway.url, 'bob');
    for (let i = 0; i < 8; i++) expect((await send('GET', `/api/admin/bob-${i}`, undefined, bob.accessToken)).status).toBe(403);
    await gateway.services!.audit.flush();
    const own = await db.orm.em.fork().execute<Array<{ n: number }>>("select count(*)::int as n from iam_audit_events where action = 'authz.deny' and target_id like 'GET /api/admin/bob-%'");
    expect(own[0]!.n).toBe(8);
    // The suppressed ones are counted in one summary row (written when their minute ends, or at stop).
    await gateway.close();
    const summary = await db.orm.em.fork().execute<Array<{ details: { suppressed: number } }>>("select details from iam_audit_events where action = 'authz.deny.suppressed'");
    expect(summary.reduce((sum, row) => sum + row.details.suppressed, 0)).toBeGreaterThanOrEqual(35);
    gateway = await startTestGateway(upstream.url, POLICIES);
  });
});

describe('#11.20 audit cursors', () => {
  it.each([
    ['beyond a bigint', Buffer.from('9999999999999999999').toString('base64url')],
    ['not base64url of a number', 'not-a-cursor'],
    ['oversized', 'A'.repeat(5000)],
    ['a NUL', Buffer.from('12\u00003').toString('base64url')],
  ])('#11.20: a cursor %s is 400 IAM_VALIDATION_FAILED, never 500', async (_name, cursor) => {
    const admin = await login(gateway.url, 'admin');
    const answer = await send('GET', `/iam/admin/audit?cursor=${cursor}`, undefined, admin.accessToken);
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('IAM_VALIDATION_FAILED');
    const users = await send('GET', `/iam/admin/users?cursor=${Buffer.from('u\u0000').toString('base64url')}`, undefined, admin.accessToken);
    expect(users.status).toBe(400);
  });
});
