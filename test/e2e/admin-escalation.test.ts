/**
 * #11.4 end to end: delegated admins cannot escalate (Kubernetes RBAC's escalation prevention). Every admin
 * kind (profiles:write, templates:write, users:write + identities:write, a scoped admin, the full admin) tries
 * every way of granting what it does not hold — to itself (then switching to it) and to others — and gets
 * 403 IAM_ACCESS_DENIED `rule: ESCALATION_PREVENTION` with nothing written; what it holds it can still grant.
 */
import { openApiDocument } from '../../src/api/openapi-document';
import { MikroOrmAdminRepository } from '../../src/adapters/postgres/admin-repository';
import { FULL_GRANT, type HeldGrant } from '../../src/domain/admin-repository';
import type { ProvisioningDocument } from '../../src/domain/records';
import type { RunningGateway } from '../../src/app/start-gateway';
import { type TestDatabase } from '../support/database';
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { createResponseValidator } from '../support/openapi-validator';

const validator = createResponseValidator(openApiDocument);
let fixture: GatewayWithUpstream;
let gateway: RunningGateway;
let db: TestDatabase;
let fullAdmin: string;
const tokens: Record<string, string> = {};

interface Answer {
  status: number;
  body: Record<string, any>;
}

async function call(method: string, path: string, token: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { ...bearer(token), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : {};
  const match = validator.operationFor(method, path);
  if (match) validator.assertMatches(method, match.pathTemplate, response.status, response.headers.get('content-type'), parsed, response.headers);
  return { status: response.status, body: parsed };
}

/** The answer of the rule: 403 IAM_ACCESS_DENIED naming ESCALATION_PREVENTION and what was not held. */
function expectEscalation(answer: Answer, pointer?: string): void {
  expect(answer.status).toBe(403);
  expect(answer.body.code).toBe('IAM_ACCESS_DENIED');
  expect(answer.body.rule).toBe('ESCALATION_PREVENTION');
  if (pointer !== undefined) expect(answer.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer);
}

/** Alice's admin profiles: each is one kind of delegated admin, switched to for its token. */
const ACTORS: ProvisioningDocument = {
  templates: [
    { versionId: 't-esc-pw', name: 'profiles admin', permissions: ['iam.admin.profiles:write', 'project:read'] },
    { versionId: 't-esc-tw', name: 'templates admin', permissions: ['iam.admin.templates:write', 'project:read'] },
    { versionId: 't-esc-uw', name: 'users admin', permissions: ['iam.admin.users:write', 'iam.admin.identities:write', 'project:read'] },
    { versionId: 't-esc-scoped', name: 'scoped admin', permissions: ['iam.admin.profiles:write', 'iam.admin.templates:write', 'project:*'] },
    { versionId: 't-esc-read', name: 'reader', permissions: ['project:read'] },
    { versionId: 't-esc-shared', name: 'shared', permissions: ['project:read'] },
  ],
  users: [
    {
      userId: 'u-alice',
      profiles: [
        { profileId: 'p-esc-pw', profileName: 'pw', templateVersionId: 't-esc-pw', clientTypes: ['WEB'], scopes: [] },
        { profileId: 'p-esc-tw', profileName: 'tw', templateVersionId: 't-esc-tw', clientTypes: ['WEB'], scopes: [] },
        { profileId: 'p-esc-uw', profileName: 'uw', templateVersionId: 't-esc-uw', clientTypes: ['WEB'], scopes: [] },
        {
          profileId: 'p-esc-scoped',
          profileName: 'scoped',
          templateVersionId: 't-esc-scoped',
          clientTypes: ['WEB'],
          scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' }],
        },
      ],
    },
    // A disabled user with an active full-admin profile, and an unscoped profile on the shared template.
    { userId: 'u-esc-dormant', enabled: false, profiles: [{ profileId: 'p-esc-dormant', profileName: 'admin', templateVersionId: 'iam-admin-v1', clientTypes: ['WEB'] }] },
    { userId: 'u-bob', profiles: [{ profileId: 'p-esc-shared-bob', profileName: 'shared', templateVersionId: 't-esc-shared', clientTypes: ['WEB'], scopes: [] }] },
  ],
};

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES }, { keepDatabase: true });
  ({ gateway } = fixture);
  db = fixture.db!;
  await db.repository.applyProvisioning(ACTORS);
  fullAdmin = (await login(gateway.url, 'admin')).accessToken;
  const alice = (await login(gateway.url, 'alice')).accessToken;
  for (const kind of ['pw', 'tw', 'uw', 'scoped']) {
    const switched = await call('POST', `/iam/authorization/profiles/p-esc-${kind}/switch`, alice);
    expect(switched.status).toBe(200);
    tokens[kind] = switched.body.accessToken as string;
  }
});

afterAll(() => fixture?.close());

const profileBody = (userId: string, templateVersionId: string, enabled = true) => ({ userId, profileName: 'x', templateVersionId, clientTypes: ['WEB'], enabled, revoked: false });

describe('#11.4 delegated admins cannot escalate', () => {
  /** Every escalation, tried by every admin kind: each is refused (by the endpoint guard or the rule) and changes nothing. */
  const ATTEMPTS: Array<{ name: string; run: (token: string, kind: string) => Promise<Answer>; unchanged: () => Promise<void> }> = [
    {
      name: 'a full-admin profile for themselves',
      run: (token, kind) => call('PUT', `/iam/admin/profiles/p-esc-self-${kind}`, token, profileBody('u-alice', 'iam-admin-v1')),
      unchanged: async () => {
        for (const kind of ['pw', 'tw', 'uw', 'scoped']) expect(await db.repository.getProfile(`p-esc-self-${kind}`)).toBeNull();
      },
    },
    {
      name: '*:* added to a template in use (their own)',
      run: (token) => call('PUT', '/iam/admin/templates/t-esc-tw', token, { name: 'templates admin', permissions: ['iam.admin.templates:write', 'project:read', '*:*'] }),
      unchanged: async () => expect((await db.repository.getTemplate('t-esc-tw'))!.permissions.sort()).toEqual(['iam.admin.templates:write', 'project:read']),
    },
    {
      name: 'a disabled full admin re-enabled',
      run: (token) => call('PUT', '/iam/admin/users/u-esc-dormant', token, { enabled: true }),
      unchanged: async () => expect((await db.repository.getUser('u-esc-dormant'))!.enabled).toBe(false),
    },
    {
      name: "an identity of their own on the full admin's user",
      run: (token) => call('PUT', '/iam/admin/identities/id-esc-backdoor', token, { userId: 'u-admin', identityDomain: 'example.com', enabled: true }),
      unchanged: async () => expect(await db.repository.getIdentity('id-esc-backdoor')).toBeNull(),
    },
  ];

  for (const kind of ['pw', 'tw', 'uw', 'scoped']) {
    it.each(ATTEMPTS)(`#11.4: the ${kind} admin cannot grant $name`, async ({ run, unchanged }) => {
      const answer = await run(tokens[kind]!, kind);
      expect(answer.status).toBe(403);
      expect(answer.body.code).toBe('IAM_ACCESS_DENIED');
      await unchanged();
    });
  }

  it('#11.4: a profiles:write admin cannot give himself a full-admin profile and switch to it, by create or by update', async () => {
    const created = await call('PUT', '/iam/admin/profiles/p-esc-mine', tokens.pw!, profileBody('u-alice', 'iam-admin-v1'));
    expectEscalation(created, '/templateVersionId');
    expect(created.body.errors.map((e: { message: string }) => e.message).join(' ')).toContain('*:*');
    const alice = (await login(gateway.url, 'alice')).accessToken;
    expect((await call('POST', '/iam/authorization/profiles/p-esc-mine/switch', alice)).status).toBe(404);
    // His own profile, re-pointed at the admin template.
    expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-pw', tokens.pw!, profileBody('u-alice', 'iam-admin-v1')), '/templateVersionId');
    expect((await db.repository.getProfile('p-esc-pw'))!.templateVersionId).toBe('t-esc-pw');
    // project:* is not covered by project:read.
    await call('PUT', '/iam/admin/templates/t-esc-projall', fullAdmin, { name: 'all projects', permissions: ['project:*'] });
    expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-bob-all', tokens.pw!, profileBody('u-bob', 't-esc-projall')), '/templateVersionId');
    // An inactive profile grants nothing: creating it disabled is allowed, enabling it is not.
    expect((await call('PUT', '/iam/admin/profiles/p-esc-bob-off', tokens.pw!, profileBody('u-bob', 'iam-admin-v1', false))).status).toBe(201);
    expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-bob-off', tokens.pw!, profileBody('u-bob', 'iam-admin-v1', true)));
    expect((await db.repository.getProfile('p-esc-bob-off'))!.enabled).toBe(false);
  });

  it('#11.4: what an admin holds he can grant, to others and to himself; taking away is never refused', async () => {
    expect((await call('PUT', '/iam/admin/profiles/p-esc-bob-read', tokens.pw!, profileBody('u-bob', 't-esc-read'))).status).toBe(201);
    expect((await call('PUT', '/iam/admin/profiles/p-esc-bob-pw', tokens.pw!, profileBody('u-bob', 't-esc-pw'))).status).toBe(201);
    expect((await call('PUT', '/iam/admin/profiles/p-esc-alice-read', tokens.pw!, profileBody('u-alice', 't-esc-read'))).status).toBe(201);
    // Disabling the full admin's profile is a loss, not a grant.
    await call('PUT', '/iam/admin/profiles/p-esc-admin-spare', fullAdmin, profileBody('u-admin', 'iam-admin-v1'));
    expect((await call('PUT', '/iam/admin/profiles/p-esc-admin-spare', tokens.pw!, { ...profileBody('u-admin', 'iam-admin-v1'), enabled: false })).status).toBe(200);
    // A template admin removes codes from a template in use, and adds only codes he holds.
    expect((await call('PUT', '/iam/admin/templates/t-esc-shared', tokens.tw!, { name: 'shared', permissions: [] })).status).toBe(200);
    expect((await call('PUT', '/iam/admin/templates/t-esc-shared', tokens.tw!, { name: 'shared', permissions: ['project:read'] })).status).toBe(200);
    expectEscalation(await call('PUT', '/iam/admin/templates/t-esc-shared', tokens.tw!, { name: 'shared', permissions: ['project:read', 'project:delete'] }), '/permissions/1');
    // An unused template is inert: any codes; binding it needs holding them.
    expect((await call('PUT', '/iam/admin/templates/t-esc-inert', tokens.tw!, { name: 'inert', permissions: ['*:*'] })).status).toBe(201);
    expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-inert', tokens.pw!, profileBody('u-bob', 't-esc-inert')));
    // A users admin disables anyone and re-enables users whose profiles he covers.
    expect((await call('PUT', '/iam/admin/users/u-esc-plain', tokens.uw!, { enabled: true })).status).toBe(201);
    expect((await call('PUT', '/iam/admin/users/u-esc-dormant', tokens.uw!, { enabled: false })).status).toBe(200);
    expect((await call('PUT', '/iam/admin/identities/id-esc-plain', tokens.uw!, { userId: 'u-esc-plain', identityDomain: 'example.com', enabled: true })).status).toBe(201);
  });

  it('round 3: escalation prevention covers client types: an admin serving only WEB cannot hand out an API profile', async () => {
    // The pw admin (WEB only) holds iam.admin.profiles:write and project:read: the codes are his, the API client is not.
    const forBob = await call('PUT', '/iam/admin/profiles/p-esc-ct-bob', tokens.pw!, { ...profileBody('u-bob', 't-esc-read'), clientTypes: ['WEB', 'API'] });
    expectEscalation(forBob, '/clientTypes/1');
    expect(await db.repository.getProfile('p-esc-ct-bob')).toBeNull();
    // The reproduction: his own admin profile for API, MOBILE and DESKTOP logins, then an API login to the admin API.
    const forHimself = await call('PUT', '/iam/admin/profiles/p-esc-ct-self', tokens.pw!, { ...profileBody('u-alice', 't-esc-pw'), clientTypes: ['API', 'MOBILE', 'DESKTOP'] });
    expectEscalation(forHimself, '/clientTypes/0');
    expect(forHimself.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/clientTypes/0', '/clientTypes/1', '/clientTypes/2']);
    expect(await db.repository.getProfile('p-esc-ct-self')).toBeNull();
    const apiLogin = await login(gateway.url, 'alice', 'alice-password', 'API');
    expect((await call('POST', '/iam/authorization/profiles/p-esc-ct-self/switch', apiLogin.accessToken)).status).toBe(404);
    // An existing WEB profile widened to API by update: refused, unchanged.
    expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-pw', tokens.pw!, { ...profileBody('u-alice', 't-esc-pw'), clientTypes: ['WEB', 'API'] }), '/clientTypes/1');
    expect((await db.repository.getProfile('p-esc-pw'))!.clientTypes).toEqual(['WEB']);
    // What he serves he grants; a disabled draft grants nothing, whatever its client types.
    expect((await call('PUT', '/iam/admin/profiles/p-esc-ct-bob', tokens.pw!, profileBody('u-bob', 't-esc-read'))).status).toBe(201);
    expect((await call('PUT', '/iam/admin/profiles/p-esc-ct-draft', tokens.pw!, { ...profileBody('u-bob', 't-esc-read', false), clientTypes: ['API'] })).status).toBe(201);
    // The full admin's profile serves every client type: he grants MOBILE; the pw admin does not.
    expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-ct-mobile', tokens.pw!, { ...profileBody('u-bob', 't-esc-read'), clientTypes: ['MOBILE'] }), '/clientTypes/0');
    expect((await call('PUT', '/iam/admin/profiles/p-esc-ct-mobile', fullAdmin, { ...profileBody('u-bob', 't-esc-read'), clientTypes: ['MOBILE'] })).status).toBe(201);
    // The template escalation covers them too: codes added to a template reach its profiles' client types.
    expect((await call('PUT', '/iam/admin/templates/t-esc-ct', fullAdmin, { name: 'ct', permissions: [] })).status).toBe(201);
    expect((await call('PUT', '/iam/admin/profiles/p-esc-ct-api', fullAdmin, { ...profileBody('u-bob', 't-esc-ct'), clientTypes: ['API'] })).status).toBe(201);
    expectEscalation(await call('PUT', '/iam/admin/templates/t-esc-ct', tokens.tw!, { name: 'ct', permissions: ['project:read'] }), '/permissions');
  });

  it('round 3: a profile names only configured client types (400, as provisioning), whoever writes it', async () => {
    for (const clientTypes of [['TOASTER'], ['WEB', 'web'], ['WEB', 'API', 'SMART-FRIDGE']]) {
      const answer = await call('PUT', '/iam/admin/profiles/p-esc-ct-unknown', fullAdmin, { ...profileBody('u-bob', 't-esc-read'), clientTypes });
      expect([clientTypes, answer.status, answer.body.code]).toEqual([clientTypes, 400, 'IAM_VALIDATION_FAILED']);
    }
    expect(await db.repository.getProfile('p-esc-ct-unknown')).toBeNull();
  });

  it('#11.4: a scoped admin grants only within his scopes, never unscoped, and cannot widen a template used outside them', async () => {
    const scoped = tokens.scoped!;
    // A new profile has no scopes (every resource): only as a disabled draft.
    expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-sc-bob', scoped, profileBody('u-bob', 't-esc-read')), '/unscoped');
    expect((await call('PUT', '/iam/admin/profiles/p-esc-sc-bob', scoped, profileBody('u-bob', 't-esc-read', false))).status).toBe(201);
    expect((await call('PUT', '/iam/admin/profiles/p-esc-sc-bob/scopes', scoped, [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }])).status).toBe(200);
    expect((await call('PUT', '/iam/admin/profiles/p-esc-sc-bob', scoped, profileBody('u-bob', 't-esc-read'))).status).toBe(200);
    // Outside his scopes: another project, every project, or a second scope next to a held one.
    for (const scopes of [
      [{ scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' }],
      [{ scopeType: 'PROJECT', scopeRefId: '*', accessMode: 'READ' }],
      [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' }, { scopeType: 'TASK', scopeRefId: '1', accessMode: 'READ' }],
    ]) {
      expectEscalation(await call('PUT', '/iam/admin/profiles/p-esc-sc-bob/scopes', scoped, scopes), `/scopes/${scopes.length - 1}`);
    }
    expect((await db.repository.getProfile('p-esc-sc-bob'))!.scopes).toEqual([{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' }]);
    // WRITE on project 1 is his; bob gets it.
    expect((await call('PUT', '/iam/admin/profiles/p-esc-sc-bob/scopes', scoped, [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' }])).status).toBe(200);
    // He holds project:*, but the shared template is used by bob's unscoped profile: adding a code reaches every project.
    expectEscalation(await call('PUT', '/iam/admin/templates/t-esc-shared', scoped, { name: 'shared', permissions: ['project:read', 'project:update'] }), '/permissions');
    expect((await db.repository.getTemplate('t-esc-shared'))!.permissions).toEqual(['project:read']);
  });

  it('#11.4: the full admin (*:* on every resource) grants everything the others may not', async () => {
    expect((await call('PUT', '/iam/admin/profiles/p-esc-full-bob', fullAdmin, profileBody('u-bob', 'iam-admin-v1'))).status).toBe(201);
    expect((await call('PUT', '/iam/admin/templates/t-esc-shared', fullAdmin, { name: 'shared', permissions: ['project:read', '*:*'] })).status).toBe(200);
    expect((await call('PUT', '/iam/admin/profiles/p-esc-full-bob/scopes', fullAdmin, [{ scopeType: 'PROJECT', scopeRefId: '*', accessMode: 'WRITE' }])).status).toBe(200);
    expect((await call('PUT', '/iam/admin/users/u-esc-dormant', fullAdmin, { enabled: true })).status).toBe(200);
    expect((await call('PUT', '/iam/admin/identities/id-esc-dormant', fullAdmin, { userId: 'u-esc-dormant', identityDomain: 'example.com', enabled: true })).status).toBe(201);
  });
});

describe('#11.4 escalation prevention under concurrency', () => {
  it('#11.4: a template edit and a profile bind racing each other never let a grant through that neither actor holds', async () => {
    const repository = new MikroOrmAdminRepository(db.orm);
    const holds: HeldGrant = { permissions: ['project:read', 'iam.admin.templates:write', 'iam.admin.profiles:write'], unscoped: true, scopes: [], clientTypes: null };
    const audit = { actorUserId: 'u-alice', requestId: null, clientAddress: null, holds };
    let bothWritten = 0;
    for (let i = 0; i < 12; i++) {
      const versionId = `t-esc-race-${i}`;
      await repository.upsertTemplate(versionId, { name: versionId, permissions: ['project:read'] }, { ...audit, holds: FULL_GRANT });
      // Unused, the template may take a code the actor lacks; bound, it may not. Binding it needs holding all its codes.
      const results = await Promise.allSettled([
        repository.upsertTemplate(versionId, { name: versionId, permissions: ['project:read', 'project:delete'] }, audit),
        repository.upsertProfile(`p-esc-race-${i}`, { userId: 'u-bob', profileName: 'race', templateVersionId: versionId, clientTypes: ['WEB'], enabled: true, revoked: false }, null, audit),
      ]);
      if (results.every((result) => result.status === 'fulfilled')) bothWritten++;
      for (const result of results) if (result.status === 'rejected') expect(result.reason).toMatchObject({ kind: 'forbidden' });
    }
    expect(bothWritten).toBe(0);
  });
});
