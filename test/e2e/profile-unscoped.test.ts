/**
 * #11.31: a profile applies to every resource only when it says so (`unscoped: true`). Removing the last
 * scope — through the admin API, provisioning or an authenticator's projection — leaves a scoped profile that
 * grants no resource; making a profile unscoped is an explicit, audited write, and only an unscoped admin
 * may do it (#11.4).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateProvisioningDocument } from '../../src/auth/provisioning-file';
import type { ProvisioningDocument, ScopeRecord } from '../../src/domain/records';
import type { RunningGateway } from '../../src/app/start-gateway';
import { type TestDatabase } from '../support/database';
import { bearer, login } from '../support/gateway';
import { startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';

let fixture: GatewayWithUpstream;
let gateway: RunningGateway;
let db: TestDatabase;
let admin: string;

const PROJECT_1: ScopeRecord = { scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' };

beforeAll(async () => {
  // A resource route without a resolver: the project id is checked as its own scope.
  const dir = mkdtempSync(join(tmpdir(), 'iam-unscoped-'));
  writeFileSync(
    join(dir, 'routes.yaml'),
    'version: 1\ndefault: deny\nroutes:\n  - path: /api/projects/:projectId\n    methods: [GET]\n    permission: project:read\n    resource: { type: PROJECT, id: projectId, access: READ }\n  - path: /api/stats\n    methods: [GET]\n    permission: project:read\n',
  );
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: dir }, { keepDatabase: true });
  ({ gateway } = fixture);
  db = fixture.db!;
  admin = (await login(gateway.url, 'admin')).accessToken;
});

afterAll(async () => {
  await fixture?.close();
});

async function call(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { ...bearer(token), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

/** Gives alice a profile on `permissions` with `scopes` and returns a token acting under it. */
async function aliceOn(profileId: string, permissions: string[], scopes: ScopeRecord[], extra: Partial<NonNullable<NonNullable<ProvisioningDocument['users']>[number]['profiles']>[number]> = {}): Promise<string> {
  await db.repository.applyProvisioning({
    templates: [{ versionId: `t-${profileId}`, name: profileId, permissions }],
    users: [{ userId: 'u-alice', profiles: [{ profileId, profileName: profileId, templateVersionId: `t-${profileId}`, clientTypes: ['WEB'], scopes, ...extra }] }],
  });
  const alice = (await login(gateway.url, 'alice')).accessToken;
  const switched = await call('POST', `/iam/authorization/profiles/${profileId}/switch`, alice);
  expect(switched.status).toBe(200);
  return switched.body.accessToken as string;
}

const projectStatus = async (token: string, id: string): Promise<number> => (await call('GET', `/api/projects/${id}`, token)).status;

describe('#11.31 unscoped is explicit', () => {
  it('#11.31: removing the last scope through the admin API leaves a profile that grants no resource', async () => {
    const token = await aliceOn('p-u-api', ['project:read'], [PROJECT_1]);
    expect(await projectStatus(token, '1')).toBe(200);
    expect(await projectStatus(token, '2')).toBe(403);
    const emptied = await call('PUT', '/iam/admin/profiles/p-u-api/scopes', admin, []);
    expect(emptied.status).toBe(200);
    expect(emptied.body).toMatchObject({ scopes: [], unscoped: false });
    for (const id of ['1', '2', '999']) {
      const denied = await call('GET', `/api/projects/${id}`, token);
      expect(denied.status).toBe(403);
      expect(denied.body.step).toBe('SCOPE_DENIED');
    }
    // Its permission still applies where no resource is named.
    expect((await call('GET', '/api/stats', token)).status).toBe(200);
  });

  it('#11.31: removing the last scope through provisioning or an authenticator projection does not widen the profile either', async () => {
    const token = await aliceOn('p-u-prov', ['project:read'], [PROJECT_1]);
    const summary = await db.repository.applyProvisioning({ users: [{ userId: 'u-alice', profiles: [{ profileId: 'p-u-prov', profileName: 'p', templateVersionId: 't-p-u-prov', clientTypes: ['WEB'], scopes: [] }] }] });
    expect(summary.affectedUserIds).toEqual(['u-alice']);
    expect(await db.repository.getProfile('p-u-prov')).toMatchObject({ scopes: [], unscoped: false });
    expect(await projectStatus(token, '1')).toBe(403);
    expect(await projectStatus(token, '2')).toBe(403);
  });

  it('#11.31: making a profile unscoped is an explicit write (unscoped: true), drops its scopes and is audited', async () => {
    const token = await aliceOn('p-u-explicit', ['project:read'], [PROJECT_1]);
    const body = { userId: 'u-alice', profileName: 'p', templateVersionId: 't-p-u-explicit', clientTypes: ['WEB'], enabled: true, revoked: false };
    const unchanged = await call('PUT', '/iam/admin/profiles/p-u-explicit', admin, body);
    expect(unchanged.body).toMatchObject({ unscoped: false, scopes: [PROJECT_1] });
    const widened = await call('PUT', '/iam/admin/profiles/p-u-explicit', admin, { ...body, unscoped: true });
    expect(widened.status).toBe(200);
    expect(widened.body).toMatchObject({ unscoped: true, scopes: [] });
    expect(await projectStatus(token, '2')).toBe(200);
    await gateway.services!.audit.flush();
    const rows = await db.orm.em.fork().execute<Array<{ details: { changed: string[] } }>>(
      "select details from iam_audit_events where action = 'admin.profile.update' and target_id = 'p-u-explicit' order by id desc limit 1",
    );
    expect(rows[0]!.details.changed).toEqual(expect.arrayContaining(['unscoped', 'scopes']));
    // Scopes make it scoped again; emptying them does not bring "every resource" back.
    expect((await call('PUT', '/iam/admin/profiles/p-u-explicit/scopes', admin, [PROJECT_1])).body).toMatchObject({ unscoped: false });
    expect((await call('PUT', '/iam/admin/profiles/p-u-explicit/scopes', admin, [])).body).toMatchObject({ unscoped: false });
    expect(await projectStatus(token, '2')).toBe(403);
  });

  it('#11.31: profiles created without scopes keep their meaning (every resource); unscoped: false creates a scoped one', async () => {
    const token = await aliceOn('p-u-new', ['project:read'], []);
    expect(await db.repository.getProfile('p-u-new')).toMatchObject({ unscoped: true, scopes: [] });
    expect(await projectStatus(token, '42')).toBe(200);
    const viaApi = await call('PUT', '/iam/admin/profiles/p-u-new-api', admin, { userId: 'u-bob', profileName: 'p', templateVersionId: 't-p-u-new', clientTypes: ['WEB'], enabled: true, revoked: false });
    expect(viaApi).toMatchObject({ status: 201, body: { unscoped: true } });
    const scopedEmpty = await aliceOn('p-u-new-scoped', ['project:read'], [], { unscoped: false });
    expect(await projectStatus(scopedEmpty, '42')).toBe(403);
  });

  it('#11.31: a provisioning file or projection cannot be unscoped and scoped at once', () => {
    expect(() =>
      validateProvisioningDocument(
        { users: [{ userId: 'u', profiles: [{ profileId: 'p', profileName: 'p', templateVersionId: 't', clientTypes: [], unscoped: true, scopes: [PROJECT_1] }] }] },
        'test',
      ),
    ).toThrow(/scopes/);
  });

  it('#11.31 with #11.4: only an unscoped admin may make a profile unscoped; a scoped admin may empty scopes within his own', async () => {
    const scopedAdmin = await aliceOn('p-u-admin', ['iam.admin.profiles:write', 'project:*'], [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'WRITE' }]);
    await db.repository.applyProvisioning({
      templates: [{ versionId: 't-u-read', name: 'r', permissions: ['project:read'] }],
      users: [{ userId: 'u-bob', profiles: [{ profileId: 'p-u-bob', profileName: 'b', templateVersionId: 't-u-read', clientTypes: ['WEB'], scopes: [PROJECT_1] }] }],
    });
    const body = { userId: 'u-bob', profileName: 'b', templateVersionId: 't-u-read', clientTypes: ['WEB'], enabled: true, revoked: false };
    const refused = await call('PUT', '/iam/admin/profiles/p-u-bob', scopedAdmin, { ...body, unscoped: true });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: 'IAM_ACCESS_DENIED', rule: 'ESCALATION_PREVENTION' });
    expect(refused.body.errors.map((e: { pointer: string }) => e.pointer)).toContain('/unscoped');
    expect(await db.repository.getProfile('p-u-bob')).toMatchObject({ unscoped: false, scopes: [PROJECT_1] });
    expect((await call('PUT', '/iam/admin/profiles/p-u-bob/scopes', scopedAdmin, [])).status).toBe(200);
    expect((await call('PUT', '/iam/admin/profiles/p-u-bob-2', scopedAdmin, { ...body, unscoped: false })).status).toBe(201);
    expect((await call('PUT', '/iam/admin/profiles/p-u-bob', admin, { ...body, unscoped: true })).status).toBe(200);
  });
});
