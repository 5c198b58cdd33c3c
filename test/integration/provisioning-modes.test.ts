/**
 * #11.22: start-time provisioning and a plain `provision FILE` only create what is missing (a restart never
 * reverts an admin API edit); `provision FILE --overwrite` syncs the database to the file, with one audit row
 * per change (actor `provisioning`).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { runCli } from '../support/cli';

const EXAMPLE = join(ROOT, 'config/provision.example.yaml');
let db: TestDatabase;
let upstream: RecordingUpstream;
let gateway: RunningGateway | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await db?.close();
});

async function put(path: string, token: string, body: unknown): Promise<number> {
  const response = await fetch(`${gateway!.url}${path}`, { method: 'PUT', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await response.text();
  return response.status;
}

const run = runCli;

async function provisioningAudit(): Promise<Array<{ action: string; target_id: string; actor_user_id: string; details: { changed: string[]; overwrite: boolean } }>> {
  return db.orm.em.fork().execute(`select action, target_id, actor_user_id, details from iam_audit_events where action like 'provisioning.%' order by id`);
}

/** The state the admin edits below leave behind. */
async function expectEditsKept(): Promise<void> {
  expect((await db.repository.getTemplate('reader-v1'))!.permissions).toEqual(['project:read']);
  expect((await db.repository.getUser('u-bob'))!.displayName).toBe('Robert');
  expect((await db.repository.getProfile('p-alice-reader'))!.enabled).toBe(false);
  expect((await db.repository.getProfile('p-carol-reader'))!.scopes).toEqual([{ scopeType: 'PROJECT', scopeRefId: '7', accessMode: 'READ' }]);
  expect((await db.repository.getIdentity('id-carol'))!.identityDomain).toBe('moved.example');
}

describe('#11.22 provisioning creates what is missing and overwrites only when asked', () => {
  it('#11.22: admin API edits survive a restart with start-time provisioning; objects missing from the database are still created', async () => {
    gateway = await startTestGateway(upstream.url, { IAM_PROVISION_FILE: EXAMPLE });
    const admin = (await login(gateway.url, 'admin')).accessToken;
    expect(await put('/iam/admin/templates/reader-v1', admin, { name: 'reader', permissions: ['project:read'] })).toBe(200);
    expect(await put('/iam/admin/users/u-bob', admin, { displayName: 'Robert', enabled: true })).toBe(200);
    const profile = { userId: 'u-alice', profileName: 'Reader on project 1', templateVersionId: 'reader-v1', clientTypes: ['WEB', 'API', 'MOBILE'], enabled: false, revoked: false };
    expect(await put('/iam/admin/profiles/p-alice-reader', admin, profile)).toBe(200);
    expect(await put('/iam/admin/profiles/p-carol-reader/scopes', admin, [{ scopeType: 'PROJECT', scopeRefId: '7', accessMode: 'READ' }])).toBe(200);
    expect(await put('/iam/admin/identities/id-carol', admin, { userId: 'u-carol', identityDomain: 'moved.example', enabled: true })).toBe(200);
    await gateway.close();

    // The next start applies the example file plus one user it does not know yet.
    const file = join(mkdtempSync(join(tmpdir(), 'iam-provision-')), 'provision.yaml');
    writeFileSync(file, `${readFileSync(EXAMPLE, 'utf8')}\n  - userId: u-late\n    identities: [{ identityId: id-late, identityDomain: example.com }]\n`);
    gateway = await startTestGateway(upstream.url, { IAM_PROVISION_FILE: file });
    await expectEditsKept();
    expect(await db.repository.getUser('u-late')).not.toBeNull();
    expect(await db.repository.getIdentity('id-late')).toMatchObject({ userId: 'u-late', enabled: true });
    const audit = await provisioningAudit();
    expect(audit.filter((row) => row.action.endsWith('.update'))).toEqual([]);
    expect(audit.filter((row) => ['u-late', 'id-late'].includes(row.target_id))).toEqual([
      expect.objectContaining({ action: 'provisioning.user.create', actor_user_id: 'provisioning' }),
      expect.objectContaining({ action: 'provisioning.identity.create', actor_user_id: 'provisioning' }),
    ]);
    await gateway.close();
    gateway = undefined;
  });

  it('#11.22: provision FILE keeps existing objects; provision FILE --overwrite syncs them, one audit row per change (actor provisioning)', async () => {
    const plain = await run(['provision', EXAMPLE]);
    expect(plain).toMatchObject({ code: 0, err: '' });
    expect(plain.out).toMatch(/nothing changed/);
    await expectEditsKept();
    const before = (await provisioningAudit()).length;

    const synced = await run(['provision', EXAMPLE, '--overwrite']);
    expect(synced).toMatchObject({ code: 0, err: '' });
    expect((await db.repository.getTemplate('reader-v1'))!.permissions.sort()).toEqual(['project:list', 'project:read', 'task:read']);
    expect((await db.repository.getUser('u-bob'))!.displayName).toBe('Bob');
    expect((await db.repository.getProfile('p-alice-reader'))!.enabled).toBe(true);
    expect((await db.repository.getProfile('p-carol-reader'))!.scopes).toEqual([{ scopeType: 'PROJECT', scopeRefId: '*', accessMode: 'READ' }]);
    expect((await db.repository.getIdentity('id-carol'))!.identityDomain).toBe('example.com');
    const rows = (await provisioningAudit()).slice(before);
    expect(rows.map((row) => `${row.action} ${row.target_id} ${row.details.changed.join(',')}`).sort()).toEqual([
      'provisioning.identity.update id-carol identityDomain',
      'provisioning.profile.update p-alice-reader enabled',
      'provisioning.profile.update p-carol-reader scopes',
      'provisioning.template.update reader-v1 permissions',
      'provisioning.user.update u-bob displayName',
    ]);
    expect(rows.every((row) => row.actor_user_id === 'provisioning' && row.details.overwrite === true)).toBe(true);

    const again = await run(['provision', EXAMPLE, '--overwrite']);
    expect(again.out).toMatch(/nothing changed/);
    expect((await provisioningAudit()).length).toBe(before + rows.length);
    expect((await run(['provision', '--overwrite'])).code).toBe(2);
  });
});
