/**
 * End to end: the admin API (/iam/admin/...) through the gateway — guards (401, 403 with no or a
 * neighbouring admin permission), upserts, validation, pagination, live effects on sessions (disable,
 * template and profile changes, authorization version), optimistic concurrency, revocation and the audit
 * trail written in the same transaction as each change.
 */
import { MikroOrmAdminRepository } from '../../src/adapters/postgres/admin-repository';
import { FULL_GRANT } from '../../src/domain/admin-repository';
import type { AuditEventRecord, ProvisioningDocument } from '../../src/domain/records';
import type { RunningGateway } from '../../src/app/start-gateway';
import { type TestDatabase } from '../support/database';
import { describeWithRedis, testRedisUrl, uniquePrefix } from '../support/env';
import { bearer, login, startTestGateway } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';

/**
 * Two tests change a template in the database behind the gateways' back and check that a live session still gets
 * its cached grant until the admin API raises the version. The change feed's poll (5 s by default) would deliver
 * that edit too, on a slow machine before the check: here it polls hourly, so only the admin API's own deliveries
 * and events move the gateways (both failed under `npm run test:stress` before).
 */
const POLICIES = { IAM_POLICIES_DIR: E2E_POLICIES, IAM_CHANGES_POLL_INTERVAL: '1h' };
const PAGED_USERS = 250;
let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let db: TestDatabase;
let adminToken: string;
let bobToken: string;

/** A user, template and profile that alice can switch to, so live-session tests never touch shared profiles. */
function aliceProfile(profileId: string, versionId: string, permissions: string[]): ProvisioningDocument {
  return {
    templates: [{ versionId, name: versionId, permissions }],
    users: [{ userId: 'u-alice', profiles: [{ profileId, profileName: profileId, templateVersionId: versionId, clientTypes: ['WEB'], enabled: true }] }],
  };
}

beforeAll(async () => {
  fixture = await startGatewayWithUpstream(POLICIES, { keepDatabase: true });
  ({ upstream, gateway } = fixture);
  db = fixture.db!;
  const users = Array.from({ length: PAGED_USERS }, (_, i) => {
    const n = String(i).padStart(3, '0');
    return { userId: `page-${n}`, displayName: `Paged User ${n}`, identities: [{ identityId: `id-page-${n}`, identityDomain: i % 5 === 0 ? 'five.example' : 'paged.example' }] };
  });
  await db.repository.applyProvisioning({
    users: [...users, { userId: 'wild%card_1', displayName: 'Literal 100% match' }, { userId: 'wildXcardY1', displayName: 'Not literal 1000 match' }],
  });
  adminToken = (await login(gateway.url, 'admin')).accessToken;
  bobToken = (await login(gateway.url, 'bob')).accessToken;
});

afterAll(() => fixture?.close());

interface Answer<T = Record<string, unknown>> {
  status: number;
  body: T;
  headers: Headers;
}

async function call<T = Record<string, unknown>>(
  method: string,
  path: string,
  token: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
  base = gateway.url,
): Promise<Answer<T>> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(token ? bearer(token) : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as T, headers: response.headers };
}

const codeOf = (answer: Answer): unknown => answer.body.code;
const pointersOf = (answer: Answer): string[] => ((answer.body.errors ?? []) as Array<{ pointer: string }>).map((e) => e.pointer);

async function auditByRequest(requestId: string | null): Promise<AuditEventRecord[]> {
  await gateway.services!.audit.flush();
  const rows = await db.orm.em.fork().execute<Array<{ action: string }>>('select * from iam_audit_events where request_id = ?', [requestId]);
  return rows as unknown as AuditEventRecord[];
}

const ENDPOINTS: Array<{ method: string; path: string; body?: unknown; permission: string }> = [
  { method: 'GET', path: '/iam/admin/templates', permission: 'iam.admin.templates:read' },
  { method: 'GET', path: '/iam/admin/templates/reader-v1', permission: 'iam.admin.templates:read' },
  { method: 'PUT', path: '/iam/admin/templates/t-guard', body: { name: 'g', permissions: [] }, permission: 'iam.admin.templates:write' },
  { method: 'GET', path: '/iam/admin/users', permission: 'iam.admin.users:read' },
  { method: 'PUT', path: '/iam/admin/users/u-guard', body: { enabled: true }, permission: 'iam.admin.users:write' },
  { method: 'GET', path: '/iam/admin/users/u-admin/identities', permission: 'iam.admin.users:read' },
  { method: 'PUT', path: '/iam/admin/identities/id-guard', body: { userId: 'u-admin', identityDomain: 'x', enabled: true }, permission: 'iam.admin.identities:write' },
  { method: 'GET', path: '/iam/admin/users/u-admin/profiles', permission: 'iam.admin.profiles:read' },
  { method: 'GET', path: '/iam/admin/profiles/p-admin', permission: 'iam.admin.profiles:read' },
  { method: 'PUT', path: '/iam/admin/profiles/p-guard', body: { userId: 'u-admin', profileName: 'g', templateVersionId: 'reader-v1', clientTypes: [], enabled: true, revoked: false }, permission: 'iam.admin.profiles:write' },
  { method: 'PUT', path: '/iam/admin/profiles/p-admin/scopes', body: [], permission: 'iam.admin.profiles:write' },
  { method: 'POST', path: '/iam/admin/users/u-admin/authorization-version', permission: 'iam.admin.users:write' },
  { method: 'POST', path: '/iam/admin/sessions/s-guard/revoke', permission: 'iam.admin.sessions:revoke' },
  { method: 'POST', path: '/iam/admin/users/u-admin/sessions/revoke', permission: 'iam.admin.sessions:revoke' },
  { method: 'GET', path: '/iam/admin/audit', permission: 'iam.admin.audit:read' },
];

describe('guards', () => {
  it.each(ENDPOINTS)('$method $path: 401 without a token, 403 IAM_ACCESS_DENIED without $permission; nothing changes', async ({ method, path, body }) => {
    const anonymous = await call(method, path, null, body);
    expect(anonymous.status).toBe(401);
    expect(codeOf(anonymous)).toBe('IAM_UNAUTHENTICATED');
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const denied = await call(method, path, bobToken, body);
    expect(denied.status).toBe(403);
    expect(codeOf(denied)).toBe('IAM_ACCESS_DENIED');
    expect(await auditByRequest(denied.headers.get('x-request-id'))).toEqual([]);
  });

  it('profiles:read reads profiles and templates are apart: neither write permission reads them', async () => {
    await db.repository.applyProvisioning(aliceProfile('p-alice-profwrite', 't-prof-write', ['iam.admin.profiles:write', 'iam.admin.templates:write']));
    const alice = await login(gateway.url, 'alice');
    const switched = await call<{ accessToken: string }>('POST', '/iam/authorization/profiles/p-alice-profwrite/switch', alice.accessToken);
    const token = switched.body.accessToken;
    for (const path of ['/iam/admin/profiles/p-admin', '/iam/admin/users/u-admin/profiles', '/iam/admin/templates', '/iam/admin/templates/reader-v1']) {
      const read = await call('GET', path, token);
      expect([path, read.status, codeOf(read)]).toEqual([path, 403, 'IAM_ACCESS_DENIED']);
    }
  });

  it('a neighbouring admin permission is not enough: users:read lists users but cannot write one', async () => {
    await db.repository.applyProvisioning(aliceProfile('p-alice-usersread', 't-users-read', ['iam.admin.users:read']));
    const alice = await login(gateway.url, 'alice');
    const switched = await call<{ accessToken: string }>('POST', '/iam/authorization/profiles/p-alice-usersread/switch', alice.accessToken);
    expect(switched.status).toBe(200);
    const token = switched.body.accessToken;
    expect((await call('GET', '/iam/admin/users?limit=1', token)).status).toBe(200);
    const write = await call('PUT', '/iam/admin/users/u-bob', token, { enabled: false });
    expect(write.status).toBe(403);
    expect(codeOf(write)).toBe('IAM_ACCESS_DENIED');
    expect((await db.repository.getUser('u-bob'))!.enabled).toBe(true);
  });
});

describe('PUT /iam/admin/templates/{versionId}', () => {
  it('creates (201), then updates (200) and answers the template', async () => {
    const created = await call('PUT', '/iam/admin/templates/t-new-v1', adminToken, { name: 'new', permissions: ['project:read', 'task:*'] });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ versionId: 't-new-v1', name: 'new', description: null, permissions: ['project:read', 'task:*'], version: 1 });
    const updated = await call('PUT', '/iam/admin/templates/t-new-v1', adminToken, { name: 'renamed', description: 'd', permissions: ['*:*'] });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({ versionId: 't-new-v1', name: 'renamed', description: 'd', permissions: ['*:*'], version: 2 });
    expect(await db.repository.getTemplate('t-new-v1')).toMatchObject({ name: 'renamed', permissions: ['*:*'] });
  });

  it('400 IAM_VALIDATION_FAILED naming every bad permission code and unknown property; nothing written', async () => {
    const bad = await call('PUT', '/iam/admin/templates/t-bad', adminToken, { name: 'bad', permissions: ['project:read', 'nocolon', 'a:b:c'] });
    expect(bad.status).toBe(400);
    expect(codeOf(bad)).toBe('IAM_VALIDATION_FAILED');
    expect(pointersOf(bad)).toEqual(['/permissions/1', '/permissions/2']);
    const unknown = await call('PUT', '/iam/admin/templates/t-bad', adminToken, { name: 'bad', permissions: [], extra: 1 });
    expect(unknown.status).toBe(400);
    expect(pointersOf(unknown)).toEqual(['/extra']);
    expect(await db.repository.getTemplate('t-bad')).toBeNull();
    expect(await auditByRequest(bad.headers.get('x-request-id'))).toEqual([]);
  });

  it("changing a template's permissions takes effect on the next request of live sessions using it", async () => {
    await db.repository.applyProvisioning(aliceProfile('p-alice-live', 't-live-v1', ['project:read']));
    const alice = await login(gateway.url, 'alice');
    const token = (await call<{ accessToken: string }>('POST', '/iam/authorization/profiles/p-alice-live/switch', alice.accessToken)).body.accessToken;
    expect((await call('GET', '/api/projects', token)).status).toBe(403);
    const before = (await db.repository.getUser('u-alice'))!.authorizationVersion;
    const put = await call('PUT', '/iam/admin/templates/t-live-v1', adminToken, { name: 't-live-v1', permissions: ['project:read', 'project:list'] });
    expect(put.status).toBe(200);
    expect((await call('GET', '/api/projects', token)).status).toBe(200);
    expect((await db.repository.getUser('u-alice'))!.authorizationVersion).toBe(before + 1);
  });
});

describe('GET /iam/admin/users', () => {
  it(`walks all users (${PAGED_USERS}+) page by page in userId order, without gaps or repeats`, async () => {
    const all = await db.orm.em.fork().execute<Array<{ user_id: string }>>('select user_id from iam_users order by user_id');
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const answer: Answer<{ items: Array<{ userId: string }>; nextCursor: string | null }> = await call(
        'GET',
        `/iam/admin/users?limit=37${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        adminToken,
      );
      expect(answer.status).toBe(200);
      expect(answer.body.items.length).toBeLessThanOrEqual(37);
      seen.push(...answer.body.items.map((user) => user.userId));
      cursor = answer.body.nextCursor;
      pages++;
    } while (cursor !== null && pages < 50);
    expect(all.length).toBeGreaterThan(PAGED_USERS);
    expect(seen).toEqual(all.map((row) => row.user_id));
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('defaults to 50, caps the limit at 200, and answers the user fields', async () => {
    const first = await call<{ items: Array<Record<string, unknown>>; nextCursor: string }>('GET', '/iam/admin/users', adminToken);
    expect(first.body.items).toHaveLength(50);
    expect(typeof first.body.nextCursor).toBe('string');
    expect(Object.keys(first.body.items[0]!).sort()).toEqual(['authorizationVersion', 'createdAt', 'displayName', 'enabled', 'sessionEpoch', 'sessionsRevokedAt', 'updatedAt', 'userId', 'version']);
    const capped = await call<{ items: unknown[] }>('GET', '/iam/admin/users?limit=1000', adminToken);
    expect(capped.body.items).toHaveLength(200);
  });

  it('filters by text (case-insensitive, LIKE wildcards literal) and by identity domain', async () => {
    const byName = await call<{ items: Array<{ userId: string }> }>('GET', '/iam/admin/users?q=PAGED%20USER%20012', adminToken);
    expect(byName.body.items.map((u) => u.userId)).toEqual(['page-012']);
    const literal = await call<{ items: Array<{ userId: string }> }>('GET', `/iam/admin/users?q=${encodeURIComponent('%card_')}`, adminToken);
    expect(literal.body.items.map((u) => u.userId)).toEqual(['wild%card_1']);
    const percent = await call<{ items: Array<{ userId: string }> }>('GET', `/iam/admin/users?q=${encodeURIComponent('100%')}`, adminToken);
    expect(percent.body.items.map((u) => u.userId)).toEqual(['wild%card_1']);
    const domain = await call<{ items: Array<{ userId: string }> }>('GET', '/iam/admin/users?domain=five.example&limit=200', adminToken);
    expect(domain.body.items).toHaveLength(PAGED_USERS / 5);
    expect(domain.body.items.every((u) => Number(u.userId.slice(5)) % 5 === 0)).toBe(true);
    const both = await call<{ items: Array<{ userId: string }> }>('GET', '/iam/admin/users?domain=five.example&q=page-00', adminToken);
    expect(both.body.items.map((u) => u.userId)).toEqual(['page-000', 'page-005']);
  });

  it.each([
    ['limit=0', '/limit'],
    ['limit=abc', '/limit'],
    ['limit=-1', '/limit'],
    ['cursor=%25%25%25', '/cursor'],
    ['q=a&q=b', '/q'],
    ['sort=name', '/sort'],
  ])('400 IAM_VALIDATION_FAILED for %s', async (query, pointer) => {
    const answer = await call('GET', `/iam/admin/users?${query}`, adminToken);
    expect(answer.status).toBe(400);
    expect(codeOf(answer)).toBe('IAM_VALIDATION_FAILED');
    expect(pointersOf(answer)).toEqual([pointer]);
  });
});

describe('PUT /iam/admin/users/{userId}', () => {
  it('creates (201), updates (200), keeps the display name when omitted; 400 for a bad body', async () => {
    const created = await call('PUT', '/iam/admin/users/u-new', adminToken, { displayName: 'New', enabled: true });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ userId: 'u-new', displayName: 'New', enabled: true, authorizationVersion: 0 });
    const updated = await call('PUT', '/iam/admin/users/u-new', adminToken, { enabled: true });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ displayName: 'New' });
    const bad = await call('PUT', '/iam/admin/users/u-new', adminToken, { displayName: 5 });
    expect(bad.status).toBe(400);
    expect(pointersOf(bad).sort()).toEqual(['/displayName', '/enabled']);
  });

  it("disabling a user revokes every live session at once (next request 401) and audits before/after", async () => {
    const first = await login(gateway.url, 'bob');
    const second = await login(gateway.url, 'bob', 'bob-password', 'API');
    expect((await call('GET', '/api/projects', first.accessToken)).status).toBe(200);
    const disabled = await call('PUT', '/iam/admin/users/u-bob', adminToken, { enabled: false });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toMatchObject({ enabled: false });
    expect((await call('GET', '/api/projects', first.accessToken)).status).toBe(401);
    expect((await call('GET', '/iam/auth/me', second.accessToken)).status).toBe(401);
    expect((await db.repository.getSession(first.sessionId))!.revokeReason).toBe('user_disabled');
    const [row] = (await auditByRequest(disabled.headers.get('x-request-id'))).filter((r) => r.action === 'admin.user.update');
    expect(row).toMatchObject({ actor_user_id: 'u-admin', target_type: 'user', target_id: 'u-bob', outcome: 'success' });
    expect((row as unknown as { details: Record<string, { enabled: boolean }> }).details.before!.enabled).toBe(true);
    expect((row as unknown as { details: Record<string, { enabled: boolean }> }).details.after!.enabled).toBe(false);

    expect((await call('PUT', '/iam/admin/users/u-bob', adminToken, { enabled: true })).status).toBe(200);
    bobToken = (await login(gateway.url, 'bob')).accessToken;
  });
});

describe('identities', () => {
  it('lists a user\'s identities; 404 IAM_NOT_FOUND for an unknown user', async () => {
    const list = await call('GET', '/iam/admin/users/u-admin/identities', adminToken);
    expect(list.status).toBe(200);
    expect(list.body).toEqual([{ identityId: 'id-admin', userId: 'u-admin', identityDomain: 'example.com', enabled: true, version: 1 }]);
    const missing = await call('GET', '/iam/admin/users/u-nobody/identities', adminToken);
    expect(missing.status).toBe(404);
    expect(codeOf(missing)).toBe('IAM_NOT_FOUND');
  });

  it('creates (201) and updates (200) an identity; 404 for an unknown user; 409 when moving it to another user', async () => {
    await call('PUT', '/iam/admin/users/u-ident', adminToken, { enabled: true });
    const created = await call('PUT', '/iam/admin/identities/id-ident', adminToken, { userId: 'u-ident', identityDomain: 'a.example', enabled: true });
    expect(created.status).toBe(201);
    const updated = await call('PUT', '/iam/admin/identities/id-ident', adminToken, { userId: 'u-ident', identityDomain: 'b.example', enabled: false });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({ identityId: 'id-ident', userId: 'u-ident', identityDomain: 'b.example', enabled: false, version: 2 });
    const unknown = await call('PUT', '/iam/admin/identities/id-x', adminToken, { userId: 'u-nobody', identityDomain: 'a', enabled: true });
    expect(unknown.status).toBe(404);
    expect(codeOf(unknown)).toBe('IAM_NOT_FOUND');
    const moved = await call('PUT', '/iam/admin/identities/id-ident', adminToken, { userId: 'u-admin', identityDomain: 'b.example', enabled: true });
    expect(moved.status).toBe(409);
    expect(await db.repository.getIdentity('id-ident')).toMatchObject({ userId: 'u-ident', enabled: false });
  });

  it('disabling an identity ends the sessions opened through it at once and refuses its logins', async () => {
    const session = await login(gateway.url, 'alice');
    expect((await fetch(`${gateway.url}/iam/auth/me`, { headers: bearer(session.accessToken) })).status).toBe(200);
    const disabled = await call('PUT', '/iam/admin/identities/id-alice', adminToken, { userId: 'u-alice', identityDomain: 'example.com', enabled: false });
    expect(disabled.status).toBe(200);
    try {
      expect((await fetch(`${gateway.url}/iam/auth/me`, { headers: bearer(session.accessToken) })).status).toBe(401);
      expect((await db.repository.getSession(session.sessionId))?.revokeReason).toBe('identity_disabled');
      const refused = await fetch(`${gateway.url}/iam/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' }),
      });
      expect(refused.status).toBe(401);
    } finally {
      await call('PUT', '/iam/admin/identities/id-alice', adminToken, { userId: 'u-alice', identityDomain: 'example.com', enabled: true });
    }
  });
});

describe('round 3: If-Match on templates, users and identities', () => {
  /** Each writable object: its path, a body, and a change another admin makes meanwhile. */
  const OBJECTS = [
    {
      name: 'template',
      path: '/iam/admin/templates/t-ifmatch',
      read: '/iam/admin/templates/t-ifmatch',
      body: { name: 'ifmatch', permissions: ['project:read', 'admin:write'] },
      change: { name: 'ifmatch', permissions: ['project:read'] },
    },
    { name: 'user', path: '/iam/admin/users/u-ifmatch', read: '/iam/admin/users/u-ifmatch', body: { displayName: 'If Match', enabled: true }, change: { displayName: 'If Match', enabled: false } },
    {
      name: 'identity',
      path: '/iam/admin/identities/id-ifmatch',
      read: null,
      body: { userId: 'u-ifmatch', identityDomain: 'example.com', enabled: true },
      change: { userId: 'u-ifmatch', identityDomain: 'example.com', enabled: false },
    },
  ];

  it.each(OBJECTS)('$name: every GET and PUT answers an ETag; a stale If-Match is 409 and writes nothing; a current one wins', async ({ path, read, body, change }) => {
    const created = await call('PUT', path, adminToken, body, { 'if-match': '*' });
    // `*` needs an existing object.
    expect([created.status, codeOf(created)]).toEqual([409, 'IAM_CONFLICT']);
    const first = await call('PUT', path, adminToken, body);
    expect(first.status).toBe(201);
    const tag = first.headers.get('etag');
    expect(tag).toMatch(/^"[0-9]+"$/);
    expect(first.body.version).toBe(Number(JSON.parse(tag!)));
    if (read !== null) expect((await call('GET', read, adminToken)).headers.get('etag')).toBe(tag);

    // Another admin changes it (the version moves on) ...
    const other = await call('PUT', path, adminToken, change, { 'if-match': tag! });
    expect(other.status).toBe(200);
    expect(other.headers.get('etag')).not.toBe(tag);
    // ... and a save made from the first read puts nothing back: 409, the other admin's change stays.
    const stale = await call('PUT', path, adminToken, body, { 'if-match': tag! });
    expect([stale.status, codeOf(stale)]).toEqual([409, 'IAM_CONFLICT']);
    const invented = await call('PUT', path, adminToken, body, { 'if-match': '"999"' });
    expect([invented.status, codeOf(invented)]).toEqual([409, 'IAM_CONFLICT']);
    const current = read === null ? other.body : (await call('GET', read, adminToken)).body;
    expect(current).toMatchObject(change);
    // A malformed or weak tag is refused, never ignored.
    for (const malformed of ['W/"1"', '"1", "2"', 'abc']) {
      const answer = await call('PUT', path, adminToken, body, { 'if-match': malformed });
      expect([malformed, answer.status, codeOf(answer)]).toEqual([malformed, 400, 'IAM_VALIDATION_FAILED']);
    }
    // With the current tag the write goes through.
    const fresh = await call('PUT', path, adminToken, body, { 'if-match': other.headers.get('etag')! });
    expect(fresh.status).toBe(200);
  });

  it('the identity list carries each identity\'s version for If-Match', async () => {
    const listed = await call<Array<{ identityId: string; version: number }>>('GET', '/iam/admin/users/u-ifmatch/identities', adminToken);
    const identity = listed.body.find((entry) => entry.identityId === 'id-ifmatch')!;
    expect((await call('PUT', '/iam/admin/identities/id-ifmatch', adminToken, { userId: 'u-ifmatch', identityDomain: 'example.com', enabled: false }, { 'if-match': `"${identity.version}"` })).status).toBe(200);
  });

  it('If-None-Match: * creates only: concurrent creates of one id, one wins and the others 409 with nothing replaced', async () => {
    for (const [path, body] of [
      ['/iam/admin/templates/t-create-only', { name: 'create only', permissions: [] }],
      ['/iam/admin/users/u-create-only', { displayName: 'Create Only', enabled: true }],
      ['/iam/admin/identities/id-create-only', { userId: 'u-create-only', identityDomain: 'example.com', enabled: true }],
    ] as const) {
      const racing = await Promise.all([1, 2, 3].map(() => call('PUT', path, adminToken, body, { 'if-none-match': '*' })));
      expect([path, racing.map((answer) => answer.status).sort()]).toEqual([path, [201, 409, 409]]);
      // Refused by the precondition, or by the database's unique key when both passed it at the same moment.
      for (const refused of racing.filter((answer) => answer.status === 409)) expect(String(refused.body.detail)).toMatch(/^(If-None-Match \*: the .* already exists|The object was created concurrently)/);
      const sequential = await call('PUT', path, adminToken, body, { 'if-none-match': '*' });
      expect([sequential.status, String(sequential.body.detail)]).toEqual([409, expect.stringMatching(/^If-None-Match \*: the .* already exists/)]);
      // Without the header the same PUT replaces, as before.
      expect((await call('PUT', path, adminToken, body)).status).toBe(200);
    }
    const profile = await call('PUT', '/iam/admin/profiles/p-create-only', adminToken, profileBody({ userId: 'u-create-only' }), { 'if-none-match': '*' });
    expect(profile.status).toBe(201);
    const again = await call('PUT', '/iam/admin/profiles/p-create-only', adminToken, profileBody({ userId: 'u-create-only', profileName: 'replaced?' }), { 'if-none-match': '*' });
    expect([again.status, codeOf(again)]).toEqual([409, 'IAM_CONFLICT']);
    expect((await call('GET', '/iam/admin/profiles/p-create-only', adminToken)).body.profileName).not.toBe('replaced?');
  });

  it.each([
    ['a tag instead of *', { 'if-none-match': '"1"' }, '/iam/admin/users/u-create-bad'],
    ['both headers', { 'if-none-match': '*', 'if-match': '*' }, '/iam/admin/users/u-create-bad'],
  ])('If-None-Match: %s is a 400 naming the header, and writes nothing', async (_case, headers, path) => {
    const answer = await call('PUT', path, adminToken, { enabled: true }, headers);
    expect([answer.status, codeOf(answer), pointersOf(answer)]).toEqual([400, 'IAM_VALIDATION_FAILED', ['/If-None-Match']]);
    expect((await call('GET', path, adminToken)).status).toBe(404);
  });

  it('If-None-Match does not apply to replacing a profile\'s scopes (400)', async () => {
    const answer = await call('PUT', '/iam/admin/profiles/p-create-only/scopes', adminToken, [], { 'if-none-match': '*' });
    expect([answer.status, codeOf(answer), pointersOf(answer)]).toEqual([400, 'IAM_VALIDATION_FAILED', ['/If-None-Match']]);
  });

  it('concurrent template saves with the same If-Match: one wins, the others 409', async () => {
    const base = await call('PUT', '/iam/admin/templates/t-ifmatch-race', adminToken, { name: 'race', permissions: [] });
    const tag = base.headers.get('etag')!;
    const results = await Promise.all([1, 2, 3, 4].map((n) => call('PUT', '/iam/admin/templates/t-ifmatch-race', adminToken, { name: `race ${n}`, permissions: [] }, { 'if-match': tag })));
    expect(results.map((result) => result.status).sort()).toEqual([200, 409, 409, 409]);
  });
});

const profileBody = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  userId: 'u-alice',
  profileName: 'Admin-made',
  templateVersionId: 'reader-v1',
  clientTypes: ['WEB'],
  enabled: true,
  revoked: false,
  ...overrides,
});

describe('profiles', () => {
  it('creates (201, ETag), updates with If-Match (200, new ETag), refuses a stale If-Match with 409', async () => {
    const created = await call('PUT', '/iam/admin/profiles/p-made', adminToken, profileBody());
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ profileId: 'p-made', userId: 'u-alice', templateVersionId: 'reader-v1', scopes: [], version: 1 });
    expect(created.headers.get('etag')).toBe('"1"');
    const updated = await call('PUT', '/iam/admin/profiles/p-made', adminToken, profileBody({ profileName: 'Renamed' }), { 'if-match': '"1"' });
    expect(updated.status).toBe(200);
    expect(updated.headers.get('etag')).toBe('"2"');
    const stale = await call('PUT', '/iam/admin/profiles/p-made', adminToken, profileBody({ enabled: false }), { 'if-match': '"1"' });
    expect(stale.status).toBe(409);
    expect(codeOf(stale)).toBe('IAM_CONFLICT');
    expect(await db.repository.getProfile('p-made')).toMatchObject({ profileName: 'Renamed', enabled: true, version: 2 });
    expect(await auditByRequest(stale.headers.get('x-request-id'))).toEqual([]);
  });

  it('422 IAM_VALIDATION_FAILED naming an unknown user and template; nothing written, no audit row', async () => {
    const answer = await call('PUT', '/iam/admin/profiles/p-orphan', adminToken, profileBody({ userId: 'u-nobody', templateVersionId: 't-nothing' }));
    expect(answer.status).toBe(422);
    expect(codeOf(answer)).toBe('IAM_VALIDATION_FAILED');
    expect(pointersOf(answer).sort()).toEqual(['/templateVersionId', '/userId']);
    expect(await db.repository.getProfile('p-orphan')).toBeNull();
    expect(await auditByRequest(answer.headers.get('x-request-id'))).toEqual([]);
  });

  it('concurrent writes never lose an update: same If-Match → one wins, the rest 409; no If-Match → all applied', async () => {
    await call('PUT', '/iam/admin/profiles/p-race', adminToken, profileBody());
    const racing = await Promise.all(
      [1, 2, 3, 4, 5].map((n) => call('PUT', '/iam/admin/profiles/p-race/scopes', adminToken, [{ scopeType: 'PROJECT', scopeRefId: String(n), accessMode: 'READ' }], { 'if-match': '"1"' })),
    );
    expect(racing.map((a) => a.status).sort()).toEqual([200, 409, 409, 409, 409]);
    const unguarded = await Promise.all(
      [1, 2, 3, 4].map((n) => call('PUT', '/iam/admin/profiles/p-race', adminToken, profileBody({ profileName: `name-${n}` }))),
    );
    expect(unguarded.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const versions = unguarded.map((a) => Number(a.headers.get('etag')!.replace(/"/g, ''))).sort();
    expect(versions).toEqual([3, 4, 5, 6]);
  });

  it('PUT scopes replaces the set (200 with the profile); 400 for duplicates or a bad access mode; 404 for an unknown profile', async () => {
    await call('PUT', '/iam/admin/profiles/p-scoped', adminToken, profileBody());
    const set = await call('PUT', '/iam/admin/profiles/p-scoped/scopes', adminToken, [
      { scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'WRITE' },
      { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' },
    ]);
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ profileId: 'p-scoped', scopes: [{ scopeRefId: '1' }, { scopeRefId: '2', accessMode: 'WRITE' }] });
    const replaced = await call('PUT', '/iam/admin/profiles/p-scoped/scopes', adminToken, [{ scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'READ' }]);
    expect((replaced.body as { scopes: unknown[] }).scopes).toEqual([{ scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'READ' }]);
    const dup = await call('PUT', '/iam/admin/profiles/p-scoped/scopes', adminToken, [
      { scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'READ' },
      { scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'WRITE' },
    ]);
    expect(dup.status).toBe(400);
    expect(pointersOf(dup)).toEqual(['/1']);
    const mode = await call('PUT', '/iam/admin/profiles/p-scoped/scopes', adminToken, [{ scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'ALL' }]);
    expect(mode.status).toBe(400);
    expect(pointersOf(mode)).toEqual(['/0/accessMode']);
    const missing = await call('PUT', '/iam/admin/profiles/p-none/scopes', adminToken, []);
    expect(missing.status).toBe(404);
    expect((await db.repository.getProfile('p-scoped'))!.scopes).toHaveLength(1);
  });

  it('disabling or revoking a profile takes effect on the next request of a live session using it', async () => {
    await db.repository.applyProvisioning(aliceProfile('p-alice-flag', 't-flag-v1', ['project:list', 'project:read']));
    const alice = await login(gateway.url, 'alice');
    const token = (await call<{ accessToken: string }>('POST', '/iam/authorization/profiles/p-alice-flag/switch', alice.accessToken)).body.accessToken;
    expect((await call('GET', '/api/projects', token)).status).toBe(200);
    const body = profileBody({ profileName: 'p-alice-flag', templateVersionId: 't-flag-v1' });
    expect((await call('PUT', '/iam/admin/profiles/p-alice-flag', adminToken, { ...body, enabled: false })).status).toBe(200);
    expect((await call('GET', '/api/projects', token)).status).toBe(403);
    expect((await call('PUT', '/iam/admin/profiles/p-alice-flag', adminToken, { ...body, enabled: true })).status).toBe(200);
    expect((await call('GET', '/api/projects', token)).status).toBe(200);
    expect((await call('PUT', '/iam/admin/profiles/p-alice-flag', adminToken, { ...body, revoked: true })).status).toBe(200);
    expect((await call('GET', '/api/projects', token)).status).toBe(403);
  });
});

describe('POST /iam/admin/users/{userId}/authorization-version', () => {
  it('raises the version by 1 and makes a live session pick up a template changed behind its back', async () => {
    await db.repository.applyProvisioning(aliceProfile('p-alice-av', 't-av-v1', ['project:read']));
    const alice = await login(gateway.url, 'alice');
    const token = (await call<{ accessToken: string }>('POST', '/iam/authorization/profiles/p-alice-av/switch', alice.accessToken)).body.accessToken;
    expect((await call('GET', '/api/projects', token)).status).toBe(403);
    // Changed directly in the database: no event is published, so the gateway still serves its cached grant.
    await db.repository.applyProvisioning(aliceProfile('p-alice-av', 't-av-v1', ['project:read', 'project:list']));
    expect((await call('GET', '/api/projects', token)).status).toBe(403);
    const version = (await db.repository.getUser('u-alice'))!.authorizationVersion;
    const raised = await call('POST', '/iam/admin/users/u-alice/authorization-version', adminToken);
    expect(raised.status).toBe(200);
    expect(raised.body).toEqual({ userId: 'u-alice', authorizationVersion: version + 1 });
    expect((await call('GET', '/api/projects', token)).status).toBe(200);
    const rows = await auditByRequest(raised.headers.get('x-request-id'));
    expect(rows.map((r) => r.action)).toEqual(['admin.user.authorization-version.raise']);
  });

  it('404 IAM_NOT_FOUND for an unknown user', async () => {
    const answer = await call('POST', '/iam/admin/users/u-nobody/authorization-version', adminToken);
    expect(answer.status).toBe(404);
    expect(codeOf(answer)).toBe('IAM_NOT_FOUND');
  });
});

describe('session revocation', () => {
  it('revokes any session (204, its token 401 next); 404 IAM_SESSION_NOT_FOUND for an unknown one', async () => {
    const victim = await login(gateway.url, 'alice');
    const answer = await call('POST', `/iam/admin/sessions/${victim.sessionId}/revoke`, adminToken, { reason: 'compromised laptop' });
    expect(answer.status).toBe(204);
    expect((await call('GET', '/iam/auth/me', victim.accessToken)).status).toBe(401);
    expect((await db.repository.getSession(victim.sessionId))!.revokeReason).toBe('compromised laptop');
    const unknown = await call('POST', '/iam/admin/sessions/no-such-session/revoke', adminToken);
    expect(unknown.status).toBe(404);
    expect(codeOf(unknown)).toBe('IAM_SESSION_NOT_FOUND');
    const bad = await call('POST', `/iam/admin/sessions/${victim.sessionId}/revoke`, adminToken, { reason: 5 });
    expect(bad.status).toBe(400);
  });

  it("revokes all of a user's sessions: 200 {revoked: n}; 404 for an unknown user", async () => {
    await call('POST', '/iam/admin/users/u-alice/sessions/revoke', adminToken);
    const a = await login(gateway.url, 'alice');
    const b = await login(gateway.url, 'alice', 'alice-password', 'API');
    const answer = await call('POST', '/iam/admin/users/u-alice/sessions/revoke', adminToken);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ revoked: 2 });
    expect((await call('GET', '/iam/auth/me', a.accessToken)).status).toBe(401);
    expect((await call('GET', '/iam/auth/me', b.accessToken)).status).toBe(401);
    expect((await call('POST', '/iam/admin/users/u-nobody/sessions/revoke', adminToken)).status).toBe(404);
  });
});

describe('GET /iam/admin/audit', () => {
  it('lists admin changes newest first with actor, target, before/after and request id; cursor pages never repeat', async () => {
    const put = await call('PUT', '/iam/admin/users/u-audited', adminToken, { displayName: 'One', enabled: true });
    await call('PUT', '/iam/admin/users/u-audited', adminToken, { displayName: 'Two', enabled: true });
    const answer = await call<{ items: Array<AuditEventRecord & { occurredAt: string }>; nextCursor: string | null }>(
      'GET',
      '/iam/admin/audit?userId=u-audited&limit=1',
      adminToken,
    );
    expect(answer.status).toBe(200);
    expect(answer.body.items[0]).toMatchObject({
      action: 'admin.user.update',
      actorUserId: 'u-admin',
      targetType: 'user',
      targetId: 'u-audited',
      outcome: 'success',
      details: { before: { displayName: 'One' }, after: { displayName: 'Two' }, changed: ['displayName'] },
    });
    const next = await call<{ items: AuditEventRecord[] }>('GET', `/iam/admin/audit?userId=u-audited&limit=1&cursor=${answer.body.nextCursor}`, adminToken);
    expect(next.body.items[0]).toMatchObject({ action: 'admin.user.create', requestId: put.headers.get('x-request-id') });
    expect(Number(next.body.items[0]!.id)).toBeLessThan(Number(answer.body.items[0]!.id));
  });

  it('filters by action and since; 400 for a bad since', async () => {
    const since = new Date(Date.now() - 60_000).toISOString();
    const answer = await call<{ items: AuditEventRecord[] }>('GET', `/iam/admin/audit?action=admin.profile.update&since=${since}&limit=200`, adminToken);
    expect(answer.body.items.length).toBeGreaterThan(0);
    expect(answer.body.items.every((item) => item.action === 'admin.profile.update' && Date.parse(String(item.occurredAt)) >= Date.parse(since))).toBe(true);
    const future = await call<{ items: unknown[] }>('GET', '/iam/admin/audit?since=2999-01-01T00:00:00Z', adminToken);
    expect(future.body.items).toEqual([]);
    const bad = await call('GET', '/iam/admin/audit?since=yesterday', adminToken);
    expect(bad.status).toBe(400);
    expect(pointersOf(bad)).toEqual(['/since']);
  });

  it('every kind of admin change left an audit row with before/after', async () => {
    const rows = await db.orm.em.fork().execute<Array<{ action: string; details: Record<string, unknown> }>>(
      "select action, details from iam_audit_events where action like 'admin.%'",
    );
    const actions = new Set(rows.map((row) => row.action));
    for (const action of [
      'admin.template.create',
      'admin.template.update',
      'admin.user.create',
      'admin.user.update',
      'admin.identity.create',
      'admin.identity.update',
      'admin.profile.create',
      'admin.profile.update',
      'admin.profile.scopes.update',
      'admin.user.authorization-version.raise',
      'admin.user.sessions.revoke',
    ]) {
      expect(actions).toContain(action);
    }
    for (const row of rows.filter((r) => r.action !== 'admin.user.sessions.revoke')) expect(row.details).toHaveProperty('after');
  });

  it('is atomic with the change: if the audit row cannot be written, the change is rolled back', async () => {
    const admin = new MikroOrmAdminRepository(db.orm);
    // PostgreSQL refuses NUL in text: the audit insert, the last statement of the transaction, fails.
    await expect(admin.upsertUser('u-atomic', { enabled: true }, { actorUserId: 'u-admin', requestId: 'bad\u0000id', clientAddress: null, holds: FULL_GRANT })).rejects.toThrow();
    expect(await db.repository.getUser('u-atomic')).toBeNull();
    await expect(admin.raiseAuthorizationVersion('u-admin', { actorUserId: 'u-admin', requestId: 'bad\u0000id', clientAddress: null, holds: FULL_GRANT })).rejects.toThrow();
    const version = (await db.repository.getUser('u-admin'))!.authorizationVersion;
    await admin.raiseAuthorizationVersion('u-admin', { actorUserId: 'u-admin', requestId: 'ok', clientAddress: null, holds: FULL_GRANT });
    expect((await db.repository.getUser('u-admin'))!.authorizationVersion).toBe(version + 1);
  });
});

const redisUrl = testRedisUrl();

describeWithRedis('two instances sharing Redis', () => {
  let a: RunningGateway;
  let b: RunningGateway;

  beforeAll(async () => {
    const shared = { ...POLICIES, IAM_TOKEN_STORE_PREFIX: uniquePrefix('admin-multi'), REDIS_URL: redisUrl! };
    a = await startTestGateway(upstream.url, shared);
    b = await startTestGateway(upstream.url, shared);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('disabling a user through A ends their live session on B at once', async () => {
    const admin = (await login(a.url, 'admin')).accessToken;
    const victim = await login(b.url, 'bob');
    expect((await call('GET', '/api/projects', victim.accessToken, undefined, {}, b.url)).status).toBe(200);
    expect((await call('PUT', '/iam/admin/users/u-bob', admin, { enabled: false }, {}, a.url)).status).toBe(200);
    expect((await call('GET', '/api/projects', victim.accessToken, undefined, {}, b.url)).status).toBe(401);
    expect((await call('PUT', '/iam/admin/users/u-bob', admin, { enabled: true }, {}, a.url)).status).toBe(200);
  });

  it('raising the authorization version through A makes B recompile the permissions of a live session', async () => {
    await db.repository.applyProvisioning(aliceProfile('p-alice-multi', 't-multi-v1', ['project:read']));
    const admin = (await login(a.url, 'admin')).accessToken;
    const alice = await login(b.url, 'alice');
    const token = (await call<{ accessToken: string }>('POST', '/iam/authorization/profiles/p-alice-multi/switch', alice.accessToken, undefined, {}, b.url)).body.accessToken;
    expect((await call('GET', '/api/projects', token, undefined, {}, b.url)).status).toBe(403);
    await db.repository.applyProvisioning(aliceProfile('p-alice-multi', 't-multi-v1', ['project:read', 'project:list']));
    expect((await call('GET', '/api/projects', token, undefined, {}, b.url)).status).toBe(403);
    expect((await call('POST', '/iam/admin/users/u-alice/authorization-version', admin, undefined, {}, a.url)).status).toBe(200);
    expect((await call('GET', '/api/projects', token, undefined, {}, b.url)).status).toBe(200);
  });
});
