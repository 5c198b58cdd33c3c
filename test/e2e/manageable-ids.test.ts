/**
 * Round 3: every id the gateway accepts is manageable. A user id containing `/` could log in (the authenticator's
 * answer was accepted) but every admin path answered 400: the path `/iam/admin/users/a%2Fb` is refused before routing
 * (an encoded `/`). The class: an identifier is accepted where it enters only if every admin path can name it.
 * For each visible ASCII character, ids made with it are either refused where they enter — the admin API, the
 * provisioning file, an authenticator's answer — or created and then read, updated and listed through the admin API.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadProvisioningFile } from '../../src/auth/provisioning-file';
import { checkAuthenticatedIdentity } from '../../src/auth/identity-validation';
import type { RunningGateway } from '../../src/app/start-gateway';
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';

let fixture: GatewayWithUpstream;
let gateway: RunningGateway;
let admin: string;
let dir: string;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  ({ gateway } = fixture);
  admin = (await login(gateway.url, 'admin')).accessToken;
  dir = mkdtempSync(join(tmpdir(), 'iam-ids-'));
});
afterAll(async () => {
  await fixture?.close();
  rmSync(dir, { recursive: true, force: true });
});

const VISIBLE_ASCII = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i));
/** Ids built with one character: inside, alone, doubled (`.` and `..` are path segments of their own). */
const idsWith = (c: string): string[] => [`u${c}x`, c, `${c}${c}`];

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const answer = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { ...bearer(admin), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await answer.text();
  return { status: answer.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Whether the provisioning file accepts a user with this id (the other place an id enters without a login). */
function provisioningAccepts(userId: string): boolean {
  const file = join(dir, 'provision.yaml');
  writeFileSync(file, JSON.stringify({ users: [{ userId, identities: [{ identityId: `id-${userId}`, identityDomain: 'example.com' }] }] }));
  try {
    loadProvisioningFile(file, { clientTypes: ['WEB'] });
    return true;
  } catch {
    return false;
  }
}

describe('an id the gateway accepts is one it can manage', () => {
  it.each(VISIBLE_ASCII.map((c) => [JSON.stringify(c), c]))('ids with %s', async (_shown, c) => {
    for (const userId of idsWith(c)) {
      const path = `/iam/admin/users/${encodeURIComponent(userId)}`;
      const created = await call('PUT', path, { displayName: `id ${userId}`, enabled: true });
      const entry = { fromLogin: 'error' in checkAuthenticatedIdentity({ userId, identityId: `id-${userId}`, identityDomain: 'example.com' }) ? 'refused' : 'accepted', fromFile: provisioningAccepts(userId) ? 'accepted' : 'refused' };
      if (created.status >= 400) {
        // Not creatable through its own path (400 from the path check or the front door; 404/405 when
        // normalization turned `/users/..` into another path): then refused by every other entrance too, and as a reference in a body.
        expect([userId, created.status < 500, entry]).toEqual([userId, true, { fromLogin: 'refused', fromFile: 'refused' }]);
        const named = await call('PUT', '/iam/admin/identities/id-named-elsewhere', { userId, identityDomain: 'example.com', enabled: true });
        expect([userId, named.status, named.body.code]).toEqual([userId, 400, 'IAM_VALIDATION_FAILED']);
        continue;
      }
      expect([userId, created.status, entry]).toEqual([userId, created.status === 201 ? 201 : 200, { fromLogin: 'accepted', fromFile: 'accepted' }]);
      // Accepted: every admin path names it.
      const read = await call('GET', path);
      expect([userId, read.status, read.body.userId]).toEqual([userId, 200, userId]);
      expect([userId, (await call('PUT', path, { displayName: 'renamed', enabled: true })).status]).toEqual([userId, 200]);
      expect([userId, (await call('GET', `${path}/identities`)).status]).toEqual([userId, 200]);
      expect([userId, (await call('GET', `${path}/profiles`)).status]).toEqual([userId, 200]);
      expect([userId, (await call('GET', `${path}/sessions`)).status]).toEqual([userId, 200]);
      expect([userId, (await call('POST', `${path}/authorization-version`)).status]).toEqual([userId, 200]);
      expect([userId, (await call('POST', `${path}/sessions/revoke`, {})).status]).toEqual([userId, 200]);
      const listed = await call('GET', `/iam/admin/users?q=${encodeURIComponent(userId)}&limit=200`);
      expect([userId, (listed.body.items as Array<{ userId: string }>).some((user) => user.userId === userId)]).toEqual([userId, true]);
    }
  });
});
