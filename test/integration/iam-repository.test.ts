/**
 * MikroOrmIamRepository against the database of this run (embedded PGlite, or real PostgreSQL when
 * DATABASE_URL is set): every method of IamRepository, provisioning idempotency and integrity, and
 * the mapping of an unreachable database to DatabaseUnavailableError.
 */
import { createServer } from 'node:net';
import { DatabaseUnavailableError, IdentityLinkError, ProvisioningError, type IamRepository } from '../../src/domain/iam-repository';
import { MikroOrmIamRepository } from '../../src/adapters/postgres/mikro-orm-iam-repository';
import { createOrm } from '../../src/adapters/postgres/orm';
import type { AuditEventRecord, ProvisioningDocument, SessionRecord } from '../../src/domain/records';
import { createTestDatabase, type TestDatabase } from '../support/database';

/** A complete provisioning document (templates, users, identities, profiles, scopes). */
const EXAMPLE: ProvisioningDocument = {
  templates: [{ versionId: 'reader-v1', name: 'reader', permissions: ['project:list', 'project:read'] }],
  users: [
    {
      userId: 'u-alice',
      displayName: 'Alice',
      identities: [{ identityId: 'id-alice', identityDomain: 'example.com' }],
      profiles: [
        {
          profileId: 'p-alice-reader',
          profileName: 'Reader on project 1',
          templateVersionId: 'reader-v1',
          clientTypes: ['WEB', 'API'],
          enabled: true,
          scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }],
        },
      ],
    },
  ],
};

const clone = <T>(value: T): T => structuredClone(value);
const TABLES = [
  'iam_users',
  'iam_identities',
  'iam_permission_templates',
  'iam_template_permissions',
  'iam_profiles',
  'iam_resource_scopes',
  'iam_sessions',
  'iam_audit_events',
];

let db: TestDatabase;
let repository: IamRepository;

beforeAll(async () => {
  db = await createTestDatabase();
  repository = db.repository;
});
beforeEach(async () => {
  await db.reset();
});
afterAll(async () => {
  await db.close();
});

async function sql<T = Record<string, unknown>>(query: string): Promise<T[]> {
  return db.orm.em.fork().execute<T[]>(query);
}

async function rowCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    const [row] = await sql<{ count: string }>(`select count(*)::text as count from ${table}`);
    counts[table] = Number(row!.count);
  }
  return counts;
}

describe('ensurePrincipal', () => {
  const alice = { userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com', displayName: 'Alice' };

  it('creates a new user and identity', async () => {
    const { user, identity } = await repository.ensurePrincipal(alice);
    expect(user).toMatchObject({ userId: 'u-alice', displayName: 'Alice', enabled: true, authorizationVersion: 0 });
    expect(user.createdAt).toBeInstanceOf(Date);
    expect(identity).toEqual({ identityId: 'id-alice', userId: 'u-alice', identityDomain: 'example.com', enabled: true, version: 1 });
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ displayName: 'Alice' });
    await expect(repository.getIdentity('id-alice')).resolves.toEqual(identity);
  });

  it('keeps an existing user’s enabled flag, authorization version and display name', async () => {
    await repository.ensurePrincipal(alice);
    await sql("update iam_users set enabled = false, authorization_version = 3 where user_id = 'u-alice'");
    const { user } = await repository.ensurePrincipal({ ...alice, displayName: 'Someone else' });
    expect(user).toMatchObject({ enabled: false, authorizationVersion: 3, displayName: 'Alice' });
  });

  it('fills in a display name the user does not have yet', async () => {
    await repository.ensurePrincipal({ userId: 'u-bob', identityId: 'id-bob', identityDomain: 'example.com' });
    await expect(repository.getUser('u-bob')).resolves.toMatchObject({ displayName: null });
    const { user } = await repository.ensurePrincipal({ userId: 'u-bob', identityId: 'id-bob', identityDomain: 'example.com', displayName: 'Bob' });
    expect(user.displayName).toBe('Bob');
  });

  it('survives concurrent first logins of the same new user', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => repository.ensurePrincipal(alice)));
    for (const result of results) expect(result.user.userId).toBe('u-alice');
    const counts = await rowCounts();
    expect(counts.iam_users).toBe(1);
    expect(counts.iam_identities).toBe(1);
  });

  it('adds a second identity to an existing user and refuses an identity owned by another user', async () => {
    await repository.ensurePrincipal(alice);
    const second = await repository.ensurePrincipal({ ...alice, identityId: 'id-alice-sso', identityDomain: 'sso.example.com' });
    expect(second.identity).toMatchObject({ userId: 'u-alice', identityDomain: 'sso.example.com' });
    await expect(repository.ensurePrincipal({ ...alice, userId: 'u-mallory' })).rejects.toThrow(/belongs to user "u-alice"/);
    await expect(repository.getUser('u-mallory')).resolves.toBeNull();
  });

  it('refuses an existing user logging in with an identity owned by another user (the read-only path does not answer)', async () => {
    await repository.ensurePrincipal(alice);
    await repository.ensurePrincipal({ userId: 'u-mallory', identityId: 'id-mallory', identityDomain: 'example.com', displayName: 'Mallory' });
    await expect(repository.ensurePrincipal({ ...alice, userId: 'u-mallory' })).rejects.toThrow(/belongs to user "u-alice"/);
  });

  describe('attach: whether a new identity may join a user that already exists', () => {
    const linkRefusal = async (promise: Promise<unknown>): Promise<string> => {
      const error = await promise.then(() => null, (caught: unknown) => caught);
      return error instanceof IdentityLinkError ? error.reason : `not an IdentityLinkError: ${String(error)}`;
    };

    it('new-user: a new identity comes only with a new user; nothing is written for an existing one', async () => {
      await repository.ensurePrincipal(alice);
      const mallory = { userId: 'u-alice', identityId: 'oidc:mallory-sub', identityDomain: 'https://idp.example', attach: 'new-user' as const };
      expect(await linkRefusal(repository.ensurePrincipal(mallory))).toBe('identity-not-linked');
      // The refusal on the transaction's path too (the user has a display name to fill in: the read-only path steps aside).
      await sql("update iam_users set display_name = null where user_id = 'u-alice'");
      expect(await linkRefusal(repository.ensurePrincipal({ ...mallory, displayName: 'Mallory' }))).toBe('identity-not-linked');
      await expect(repository.getIdentity('oidc:mallory-sub')).resolves.toBeNull();
      await expect(repository.getUser('u-alice')).resolves.toMatchObject({ displayName: null });
      // A new user with its identity is created; a returning identity is answered.
      const created = await repository.ensurePrincipal({ userId: 'u-new', identityId: 'oidc:new-sub', identityDomain: 'https://idp.example', attach: 'new-user' });
      expect(created.identity).toMatchObject({ userId: 'u-new', identityId: 'oidc:new-sub' });
      await expect(repository.ensurePrincipal({ userId: 'u-new', identityId: 'oidc:new-sub', identityDomain: 'https://idp.example', attach: 'new-user' })).resolves.toEqual(created);
    });

    it('first-in-domain: joins a user without an identity in that domain, never a second one there', async () => {
      await repository.ensurePrincipal(alice);
      const first = await repository.ensurePrincipal({ userId: 'u-alice', identityId: 'oidc:alice-sub', identityDomain: 'https://idp.example', attach: 'first-in-domain' });
      expect(first.identity).toMatchObject({ userId: 'u-alice', identityDomain: 'https://idp.example' });
      expect(await linkRefusal(repository.ensurePrincipal({ userId: 'u-alice', identityId: 'oidc:mallory-sub', identityDomain: 'https://idp.example', attach: 'first-in-domain' }))).toBe('identity-not-linked');
      await expect(repository.getIdentity('oidc:mallory-sub')).resolves.toBeNull();
    });

    it('decides racing identities one at a time: one new user gets one identity, one existing user one per domain', async () => {
      const racers = (userId: string, attach: 'new-user' | 'first-in-domain') =>
        Promise.allSettled(Array.from({ length: 5 }, (_, index) => repository.ensurePrincipal({ userId, identityId: `oidc:${userId}-${index}`, identityDomain: 'https://idp.example', attach })));
      const outcome = (results: PromiseSettledResult<unknown>[]): Array<string> =>
        results.map((result) => (result.status === 'fulfilled' ? 'linked' : result.reason instanceof IdentityLinkError ? result.reason.reason : String(result.reason))).sort();
      expect(outcome(await racers('u-racer', 'new-user'))).toEqual(['identity-not-linked', 'identity-not-linked', 'identity-not-linked', 'identity-not-linked', 'linked']);
      await repository.ensurePrincipal(alice);
      expect(outcome(await racers('u-alice', 'first-in-domain'))).toEqual(['identity-not-linked', 'identity-not-linked', 'identity-not-linked', 'identity-not-linked', 'linked']);
      expect(await rowCounts()).toMatchObject({ iam_users: 2, iam_identities: 3 });
    });

    it('refuses an identity that is another user\'s as identity-of-another-user, whatever the attach rule', async () => {
      await repository.ensurePrincipal(alice);
      for (const attach of ['any', 'new-user', 'first-in-domain'] as const) {
        expect([attach, await linkRefusal(repository.ensurePrincipal({ ...alice, userId: 'u-mallory', attach }))]).toEqual([attach, 'identity-of-another-user']);
      }
      await expect(repository.getUser('u-mallory')).resolves.toBeNull();
    });
  });

  it('answers a returning user with the same records as the first login', async () => {
    const first = await repository.ensurePrincipal(alice);
    const again = await repository.ensurePrincipal(alice);
    expect(again).toEqual(first);
    expect(await rowCounts()).toMatchObject({ iam_users: 1, iam_identities: 1 });
  });

  it('returns null for unknown users and identities', async () => {
    await expect(repository.getUser('nobody')).resolves.toBeNull();
    await expect(repository.getIdentity('nobody')).resolves.toBeNull();
  });
});

describe('profiles and templates', () => {
  beforeEach(async () => {
    await repository.applyProvisioning({
      templates: [
        { versionId: 'writer-v1', name: 'writer', description: 'Writes', permissions: ['project:write', 'project:read'] },
        { versionId: 'reader-v1', name: 'reader', permissions: ['project:read'] },
      ],
      users: [
        {
          userId: 'u-alice',
          profiles: [
            {
              profileId: 'p-b',
              profileName: 'B',
              templateVersionId: 'writer-v1',
              clientTypes: ['WEB'],
              revoked: true,
              scopes: [
                { scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'WRITE' },
                { scopeType: 'DOCUMENT', scopeRefId: '9', accessMode: 'READ' },
                { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' },
              ],
            },
            { profileId: 'p-a', profileName: 'A', templateVersionId: 'reader-v1', clientTypes: ['API', 'WEB'], enabled: false },
          ],
        },
        { userId: 'u-bob', profiles: [{ profileId: 'p-bob', profileName: 'Bob', templateVersionId: 'reader-v1', clientTypes: ['WEB'] }] },
      ],
    });
  });

  it('lists every profile of the user ordered by id, with scopes ordered by type and id', async () => {
    const profiles = await repository.listProfiles('u-alice');
    expect(profiles.map((profile) => profile.profileId)).toEqual(['p-a', 'p-b']);
    expect(profiles[0]).toEqual({
      profileId: 'p-a',
      userId: 'u-alice',
      profileName: 'A',
      templateVersionId: 'reader-v1',
      clientTypes: ['API', 'WEB'],
      enabled: false,
      revoked: false,
      unscoped: true,
      scopes: [],
      version: 1,
    });
    expect(profiles[1]).toMatchObject({ templateVersionId: 'writer-v1', enabled: true, revoked: true, unscoped: false });
    expect(profiles[1]!.scopes).toEqual([
      { scopeType: 'DOCUMENT', scopeRefId: '9', accessMode: 'READ' },
      { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' },
      { scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'WRITE' },
    ]);
    await expect(repository.listProfiles('nobody')).resolves.toEqual([]);
  });

  it('gets one profile, or null', async () => {
    await expect(repository.getProfile('p-bob')).resolves.toMatchObject({ userId: 'u-bob', scopes: [] });
    await expect(repository.getProfile('p-none')).resolves.toBeNull();
  });

  it('gets templates with their permission codes, and lists them by version id', async () => {
    await expect(repository.getTemplate('writer-v1')).resolves.toEqual({
      versionId: 'writer-v1',
      name: 'writer',
      description: 'Writes',
      permissions: ['project:read', 'project:write'],
      version: expect.any(Number),
    });
    await expect(repository.getTemplate('none')).resolves.toBeNull();
    const templates = await repository.listTemplates();
    expect(templates.map((template) => template.versionId)).toEqual(['reader-v1', 'writer-v1']);
    expect(templates[0]).toMatchObject({ description: null, permissions: ['project:read'] });
  });
});

describe('sessions', () => {
  const base = (sessionId: string, createdAt: string, overrides: Partial<SessionRecord> = {}): SessionRecord => ({
    sessionId,
    userId: 'u-alice',
    identityId: 'id-alice',
    clientType: 'WEB',
    activeProfileId: null,
    tokenHash: `hash-${sessionId}`,
    createdAt: new Date(createdAt),
    expiresAt: new Date(Date.parse(createdAt) + 8 * 3600_000),
    lastSeenAt: null,
    revokedAt: null,
    logoutAt: null,
    revokeReason: null,
    idpSessionId: null,
    clientAddress: '203.0.113.7',
    userAgent: 'jest',
    originSessionId: null,
    ...overrides,
  });
  const now = new Date('2030-01-01T12:00:00.000Z');

  beforeEach(async () => {
    await repository.ensurePrincipal({ userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com' });
  });

  it('inserts and reads a session unchanged', async () => {
    const session = base('s-1', '2030-01-01T10:00:00.123Z', { activeProfileId: 'p-a' });
    await repository.insertSession(session);
    await expect(repository.getSession('s-1')).resolves.toEqual(session);
    await expect(repository.getSession('s-none')).resolves.toBeNull();
  });

  it('lists a user’s sessions newest first', async () => {
    await repository.insertSession(base('s-old', '2030-01-01T09:00:00Z'));
    await repository.insertSession(base('s-new', '2030-01-01T11:00:00Z'));
    await repository.insertSession(base('s-mid', '2030-01-01T10:00:00Z'));
    const sessions = await repository.listSessions('u-alice');
    expect(sessions.map((session) => session.sessionId)).toEqual(['s-new', 's-mid', 's-old']);
    await expect(repository.listSessions('nobody')).resolves.toEqual([]);
  });

  it('updates only the fields of the patch', async () => {
    await repository.insertSession(base('s-1', '2030-01-01T10:00:00Z'));
    const seen = new Date('2030-01-01T10:30:00Z');
    await repository.updateSession('s-1', { lastSeenAt: seen });
    await expect(repository.getSession('s-1')).resolves.toMatchObject({ lastSeenAt: seen, revokedAt: null });
    await repository.updateSession('s-1', { logoutAt: now });
    await expect(repository.getSession('s-1')).resolves.toMatchObject({ lastSeenAt: seen, logoutAt: now });
  });

  it('revokes every still-active session except the current one and returns those it changed', async () => {
    await repository.insertSession(base('s-current', '2030-01-01T11:00:00Z'));
    await repository.insertSession(base('s-a', '2030-01-01T10:00:00Z'));
    await repository.insertSession(base('s-b', '2030-01-01T10:30:00Z'));
    await repository.insertSession(base('s-out', '2030-01-01T09:00:00Z', { logoutAt: new Date('2030-01-01T09:30:00Z') }));
    await repository.insertSession(base('s-expired', '2029-12-31T00:00:00Z'));
    const changed = await repository.revokeUserSessions('u-alice', 'revoke-others', now, 's-current');
    expect(changed.map((session) => session.sessionId)).toEqual(['s-b', 's-a']);
    for (const session of changed) expect(session).toMatchObject({ revokedAt: now, revokeReason: 'revoke-others' });
    await expect(repository.getSession('s-current')).resolves.toMatchObject({ revokedAt: null });
    await expect(repository.getSession('s-out')).resolves.toMatchObject({ revokedAt: null });
    await expect(repository.getSession('s-expired')).resolves.toMatchObject({ revokedAt: null });
    await expect(repository.revokeUserSessions('u-alice', 'again', now, 's-current')).resolves.toEqual([]);
    const all = await repository.revokeUserSessions('u-alice', 'admin', now);
    expect(all.map((session) => session.sessionId)).toEqual(['s-current']);
  });
});

describe('#28 the revocation instant', () => {
  const T1 = new Date('2030-01-01T12:00:00.500Z');
  beforeEach(async () => {
    await repository.ensurePrincipal({ userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com' });
    await repository.ensurePrincipal({ userId: 'u-bob', identityId: 'id-bob', identityDomain: 'example.com' });
  });
  const userSessionsEnded = async () =>
    (await repository.listChanges(0, [], 100)).map((row) => row.event).filter((event) => event.type === 'user-sessions-ended');

  it('#28: is recorded with the raised epoch, in the same change-feed row, and loaded at start', async () => {
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ sessionEpoch: 0, sessionsRevokedAt: null });
    const result = await repository.endSessions({ userId: 'u-alice', reason: 'revoked_by_admin', allExcept: null, raiseEpoch: true, at: T1 });
    expect(result).toMatchObject({ sessionEpoch: 1, sessionsRevokedAt: T1 });
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ sessionEpoch: 1, sessionsRevokedAt: T1 });
    expect(await userSessionsEnded()).toEqual([{ type: 'user-sessions-ended', userId: 'u-alice', reason: 'revoked_by_admin', sessionEpoch: 1, revokedAt: T1.toISOString() }]);
    const state = await repository.loadRevocationState();
    expect(state.epochs).toEqual([{ userId: 'u-alice', sessionEpoch: 1, sessionsRevokedAt: T1 }]);
  });

  it('#28: never moves back (a record the retry queue writes late), and ending some sessions leaves it alone', async () => {
    await repository.endSessions({ userId: 'u-alice', reason: 'revoked_by_admin', allExcept: null, raiseEpoch: true, at: T1 });
    const late = await repository.endSessions({ userId: 'u-alice', reason: 'revoked_by_admin', allExcept: null, raiseEpoch: true, at: new Date('2030-01-01T11:00:00Z') });
    expect(late).toMatchObject({ sessionEpoch: 2, sessionsRevokedAt: T1 });
    const some = await repository.endSessions({ userId: 'u-alice', reason: 'revoked_by_user', sessionIds: [], at: new Date('2030-01-01T13:00:00Z') });
    expect(some).toMatchObject({ sessionEpoch: null, sessionsRevokedAt: null });
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ sessionEpoch: 2, sessionsRevokedAt: T1 });
    expect((await userSessionsEnded()).map((event) => 'revokedAt' in event && event.revokedAt)).toEqual([T1.toISOString(), T1.toISOString()]);
    await expect(repository.getUser('u-bob')).resolves.toMatchObject({ sessionEpoch: 0, sessionsRevokedAt: null });
  });
});

describe('audit', () => {
  const event = (overrides: Partial<AuditEventRecord>): AuditEventRecord => ({
    occurredAt: new Date('2030-01-01T10:00:00.000Z'),
    actorUserId: 'u-alice',
    action: 'authz.deny',
    targetType: 'route',
    targetId: 'GET /projects/1',
    outcome: 'denied',
    requestId: 'req-1',
    decisionId: null,
    clientAddress: null,
    details: null,
    ...overrides,
  });

  it('inserts events and finds one by decision id', async () => {
    const details = { decision: { steps: [{ code: 'SCOPE_DENIED', passed: false, reason: 'no scope' }] }, count: 2 };
    await repository.insertAudit([
      event({ action: 'auth.login', outcome: 'success' }),
      event({ decisionId: 'd-1', details }),
      event({ actorUserId: null, action: 'auth.login.failed', outcome: 'failure', decisionId: 'd-2' }),
    ]);
    const found = await repository.findAuditByDecisionId('d-1');
    expect(found).toEqual({ ...event({ decisionId: 'd-1', details }), id: expect.any(String) });
    expect(Number(found!.id)).toBe(2);
    await expect(repository.findAuditByDecisionId('d-2')).resolves.toMatchObject({ actorUserId: null, outcome: 'failure' });
    await expect(repository.findAuditByDecisionId('d-none')).resolves.toBeNull();
  });

  it('finds each decision of a check call\'s row by its own id (decision_ids), through the index', async () => {
    const decisions = ['c-1', 'c-2', 'c-3'].map((decisionId) => ({ decisionId, allowed: false }));
    await repository.insertAudit([event({ action: 'authz.check', details: { decisions } }), event({ decisionId: 'c-9' })]);
    for (const { decisionId } of decisions) await expect(repository.findAuditByDecisionId(decisionId)).resolves.toMatchObject({ action: 'authz.check', details: { decisions } });
    await expect(repository.findAuditByDecisionId('c-9')).resolves.toMatchObject({ decisionId: 'c-9' });
    await expect(repository.findAuditByDecisionId('c-4')).resolves.toBeNull();
    // The lookup reads the GIN index, not every row's details (the planner is told to avoid a scan it could choose on a tiny table).
    const em = db.orm.em.fork();
    const plan = await em.transactional(async (tx) => {
      await tx.execute('set local enable_seqscan = off');
      return tx.execute<Array<{ 'QUERY PLAN': string }>>("explain select id from iam_audit_events where decision_id = 'c-2' or decision_ids @> array['c-2']::text[]");
    });
    expect(plan.map((line) => line['QUERY PLAN']).join('\n')).toContain('iam_audit_events_decision_ids_index');
  });

  it('accepts an empty batch', async () => {
    await expect(repository.insertAudit([])).resolves.toBeUndefined();
  });
});

describe('applyProvisioning', () => {
  it('applies the provisioning example, and a second run changes nothing', async () => {
    const first = await repository.applyProvisioning(clone(EXAMPLE));
    expect(first).toEqual({
      created: 4,
      updated: 0,
      unchanged: 0,
      changes: [
        'template reader-v1: created',
        'user u-alice: created',
        'identity id-alice: created',
        'profile p-alice-reader: created',
      ],
      affectedUserIds: [],
    });
    const counts = await rowCounts();
    const second = await repository.applyProvisioning(clone(EXAMPLE));
    expect(second).toEqual({ created: 0, updated: 0, unchanged: 4, changes: [], affectedUserIds: [] });
    await expect(rowCounts()).resolves.toEqual(counts);
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ displayName: 'Alice', authorizationVersion: 0 });
    await expect(repository.getIdentity('id-alice')).resolves.toMatchObject({ userId: 'u-alice', identityDomain: 'example.com' });
    await expect(repository.getProfile('p-alice-reader')).resolves.toMatchObject({ clientTypes: ['WEB', 'API'], version: 1 });
  });

  it('serializes concurrent runs of the same document: one creates, the other finds everything unchanged', async () => {
    const summaries = await Promise.all([repository.applyProvisioning(clone(EXAMPLE)), repository.applyProvisioning(clone(EXAMPLE))]);
    expect(summaries.map((summary) => [summary.created, summary.unchanged]).sort()).toEqual([
      [0, 4],
      [4, 0],
    ]);
  });

  it('replaces scopes as a set, reports the profile updated and raises the user’s authorization version', async () => {
    await repository.applyProvisioning(clone(EXAMPLE));
    const changed = clone(EXAMPLE);
    changed.users![0]!.profiles![0]!.scopes = [
      { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' },
      { scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' },
    ];
    const summary = await repository.applyProvisioning(changed);
    expect(summary).toEqual({
      created: 0,
      updated: 1,
      unchanged: 3,
      changes: ['profile p-alice-reader: updated (scopes)'],
      affectedUserIds: ['u-alice'],
    });
    const profile = await repository.getProfile('p-alice-reader');
    expect(profile!.scopes).toEqual(changed.users![0]!.profiles![0]!.scopes);
    expect(profile!.version).toBe(2);
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ authorizationVersion: 1 });
    await expect(repository.applyProvisioning(clone(changed))).resolves.toMatchObject({ updated: 0, affectedUserIds: [] });

    changed.users![0]!.profiles![0]!.scopes = [{ scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' }];
    await expect(repository.applyProvisioning(clone(changed))).resolves.toMatchObject({ updated: 1, affectedUserIds: ['u-alice'] });
    await expect(repository.getProfile('p-alice-reader')).resolves.toMatchObject({
      scopes: [{ scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' }],
      version: 3,
    });
    await expect(rowCounts()).resolves.toMatchObject({ iam_resource_scopes: 1 });
  });

  it('marks users affected when an existing user gets a profile or a template’s permissions change', async () => {
    await repository.ensurePrincipal({ userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com' });
    const first = await repository.applyProvisioning(clone(EXAMPLE));
    expect(first.affectedUserIds).toEqual(['u-alice']);
    expect(first.changes).toContain('user u-alice: updated (displayName)');
    expect(first.changes).toContain('profile p-alice-reader: created');

    const summary = await repository.applyProvisioning({
      templates: [{ versionId: 'reader-v1', name: 'reader', permissions: ['project:list', 'project:read', 'report:read'] }],
    });
    expect(summary).toEqual({
      created: 0,
      updated: 1,
      unchanged: 0,
      changes: ['template reader-v1: updated (permissions)'],
      affectedUserIds: ['u-alice'],
    });
    await expect(repository.getTemplate('reader-v1')).resolves.toMatchObject({ permissions: ['project:list', 'project:read', 'report:read'] });
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ authorizationVersion: 2 });

    const narrowed = await repository.applyProvisioning({
      templates: [{ versionId: 'reader-v1', name: 'reader', description: 'Reads projects', permissions: ['project:read'] }],
    });
    expect(narrowed.changes).toEqual(['template reader-v1: updated (description, permissions)']);
    await expect(repository.getTemplate('reader-v1')).resolves.toEqual({
      versionId: 'reader-v1',
      name: 'reader',
      description: 'Reads projects',
      permissions: ['project:read'],
      version: expect.any(Number),
    });
  });

  it('keeps fields the document omits, so re-applying a file does not undo an admin’s revocation', async () => {
    await repository.applyProvisioning(clone(EXAMPLE));
    await repository.applyProvisioning({
      users: [
        {
          userId: 'u-alice',
          profiles: [
            { profileId: 'p-alice-reader', profileName: 'Reader on project 1', templateVersionId: 'reader-v1', clientTypes: ['API', 'WEB'], revoked: true },
          ],
        },
      ],
    });
    const again = await repository.applyProvisioning(clone(EXAMPLE));
    expect(again).toMatchObject({ updated: 0, unchanged: 4 });
    await expect(repository.getProfile('p-alice-reader')).resolves.toMatchObject({ revoked: true, scopes: EXAMPLE.users![0]!.profiles![0]!.scopes });
  });

  it('rejects an unknown template with a JSON pointer and changes nothing', async () => {
    await repository.applyProvisioning(clone(EXAMPLE));
    const before = await rowCounts();
    const bad: ProvisioningDocument = {
      templates: [{ versionId: 'writer-v1', name: 'writer', permissions: ['project:write'] }],
      users: [
        { userId: 'u-alice', displayName: 'Alice Changed' },
        {
          userId: 'u-carol',
          identities: [{ identityId: 'id-carol', identityDomain: 'example.com' }],
          profiles: [{ profileId: 'p-carol', profileName: 'Carol', templateVersionId: 'missing-v9', clientTypes: ['WEB'] }],
        },
      ],
    };
    const error = await repository.applyProvisioning(bad).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProvisioningError);
    expect((error as ProvisioningError).problems).toEqual([
      { pointer: '/users/1/profiles/0/templateVersionId', message: expect.stringContaining('missing-v9') },
    ]);
    await expect(rowCounts()).resolves.toEqual(before);
    await expect(repository.getUser('u-alice')).resolves.toMatchObject({ displayName: 'Alice' });
  });

  it('reports every referential problem at once', async () => {
    await repository.applyProvisioning(clone(EXAMPLE));
    const error = await repository
      .applyProvisioning({
        templates: [
          { versionId: 't-1', name: 'a', permissions: ['a:b'] },
          { versionId: 't-1', name: 'b', permissions: ['a:b'] },
        ],
        users: [
          {
            userId: 'u-bob',
            identities: [{ identityId: 'id-alice', identityDomain: 'example.com' }],
            profiles: [
              {
                profileId: 'p-alice-reader',
                profileName: 'x',
                templateVersionId: 't-1',
                clientTypes: ['WEB'],
                scopes: [
                  { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' },
                  { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' },
                ],
              },
            ],
          },
          { userId: 'u-bob' },
        ],
      })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProvisioningError);
    expect((error as ProvisioningError).problems.map((problem) => problem.pointer)).toEqual([
      '/templates/1/versionId',
      '/users/0/identities/0/identityId',
      '/users/0/profiles/0/profileId',
      '/users/0/profiles/0/scopes/1',
      '/users/1/userId',
    ]);
  });
});

describe('an unreachable database', () => {
  it('rejects with DatabaseUnavailableError', async () => {
    const port = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const orm = await createOrm({
      url: `postgresql://postgres@127.0.0.1:${port}/nothing`,
      poolSize: 1,
      historyTable: 'iam_mikro_orm_schema_history',
      embedded: false,
      connectTimeoutMs: 1000,
    });
    try {
      const unreachable = new MikroOrmIamRepository(orm);
      await expect(unreachable.ping()).rejects.toBeInstanceOf(DatabaseUnavailableError);
      await expect(unreachable.getUser('u-alice')).rejects.toBeInstanceOf(DatabaseUnavailableError);
      await expect(unreachable.applyProvisioning(clone(EXAMPLE))).rejects.toBeInstanceOf(DatabaseUnavailableError);
    } finally {
      await orm.close(true);
    }
  });

  it('passes other errors through unchanged', async () => {
    await expect(repository.ensurePrincipal({ userId: 'u-x', identityId: 'id-x', identityDomain: 'd' })).resolves.toBeDefined();
    await expect(
      repository.insertSession({
        sessionId: 's-1',
        userId: 'u-unknown',
        identityId: 'id-x',
        clientType: 'WEB',
        activeProfileId: null,
        tokenHash: 'h',
        createdAt: new Date(),
        expiresAt: new Date(),
        lastSeenAt: null,
        revokedAt: null,
        logoutAt: null,
        revokeReason: null,
        clientAddress: null,
        userAgent: null,
      }),
    ).rejects.not.toBeInstanceOf(DatabaseUnavailableError);
  });
});
