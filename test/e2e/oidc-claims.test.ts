/**
 * Profiles from the provider's groups and claims (`iam.oidc.profiles`) and who may sign in (`iam.oidc.allowed`),
 * against a real OpenID Provider (oidc-provider, test/support/oidc-op.ts) whose ID tokens carry `groups`.
 *
 * One user, three provider accounts: the userId is the `email` claim, and an admin linked the three accounts to
 * that user, so each login is the same user with other groups — what a change of groups at the provider does
 * between two logins. The console's sign-out goes through the provider (RP-initiated logout), in Chromium.
 */
import type { ProfileRecord } from '../../src/domain/records';
import { freePort } from '../support/front-proxy';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { CookieJar, startTestOp, type TestOp } from '../support/oidc-op';
import type { Browser } from 'playwright-core';
import { chromiumAvailable, launchBrowser } from '../support/browser';

const CLIENT = { id: 'iam-gateway', secret: 'gateway-secret-for-claims' };
const CAROL = 'carol@example.test';
const ACCOUNTS = {
  'carol-eng': { sub: 'carol-1', password: 'pw-1', claims: { email: CAROL, groups: ['engineering'] } },
  'carol-both': { sub: 'carol-2', password: 'pw-2', claims: { email: CAROL, groups: ['engineering', 'staff'] } },
  'carol-staff': { sub: 'carol-3', password: 'pw-3', claims: { email: CAROL, groups: ['staff'] } },
  dave: { sub: 'dave-1', password: 'pw-dave', claims: { email: 'dave@example.test', groups: ['contractors'] } },
  nogroups: { sub: 'erin-1', password: 'pw-erin', claims: { email: 'erin@example.test' } },
  // Rule staff + user admin-bob and rule staff-admin + user bob: one profile id while "-" joined the two.
  'admin-bob': { sub: 'admin-bob-1', password: 'pw-admin-bob', claims: { email: 'admin-bob', groups: ['staff'] } },
  bob: { sub: 'bob-1', password: 'pw-bob', claims: { email: 'bob', groups: ['staff-admins'] } },
  // Holds the staff profile under the id earlier releases gave it (provisioned below).
  frank: { sub: 'frank-1', password: 'pw-frank', claims: { email: 'frank@example.test', groups: ['staff'] } },
  // Meets the projects rule, whose scope claim the provider never releases.
  gina: { sub: 'gina-1', password: 'pw-gina', claims: { email: 'gina@example.test', groups: ['project-members'], project_ids: ['p1'] } },
  // The example provisioning's u-admin (iam-admin-v1), linked below: reads the console's Access page.
  admin: { sub: 'admin-1', password: 'pw-admin', claims: { email: 'u-admin', groups: ['project-members'] } },
};

const RULES = [
  { name: 'engineering', when: [{ claim: 'groups', values: ['engineering'] }], 'profile-name': 'Engineering', 'template-version': 'editor-v1', 'client-types': ['WEB'], scopes: [{ type: 'TEAM', claim: 'groups', access: 'WRITE' }] },
  { name: 'staff', when: [{ claim: 'groups', values: ['staff'] }], 'template-version': 'reader-v1', 'client-types': ['WEB'], unscoped: true },
  { name: 'staff-admin', when: [{ claim: 'groups', values: ['staff-admins'] }], 'template-version': 'reader-v1', 'client-types': ['WEB'], unscoped: true },
  { name: 'projects', when: [{ claim: 'groups', values: ['project-members'] }], 'template-version': 'reader-v1', 'client-types': ['WEB'], scopes: [{ type: 'PROJECT', claim: 'project_ids', access: 'READ' }] },
];
const FORMER_FRANK = 'oidc-staff-frank@example.test';

let op: TestOp;
let fixture: GatewayWithUpstream;

beforeAll(async () => {
  const port = await freePort();
  op = await startTestOp({
    clients: [{ client_id: CLIENT.id, client_secret: CLIENT.secret, redirect_uris: [`http://127.0.0.1:${port}/iam/auth/oidc/callback`], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' }],
    accounts: ACCOUNTS,
  });
  fixture = await startGatewayWithUpstream(
    {
      PORT: String(port),
      IAM_POLICIES_DIR: E2E_POLICIES,
      IAM_AUTHENTICATOR_TYPE: 'oidc',
      IAM_OIDC_ISSUER: op.issuer,
      IAM_OIDC_CLIENT_ID: CLIENT.id,
      IAM_OIDC_CLIENT_SECRET: CLIENT.secret,
      IAM_OIDC_REDIRECT_URI: `http://127.0.0.1:${port}/iam/auth/oidc/callback`,
      IAM_OIDC_SCOPES: 'openid,email,groups',
      IAM_OIDC_CLAIMS_USER_ID: 'email',
      IAM_OIDC_ALLOWED: JSON.stringify([{ claim: 'groups', values: ['engineering', 'staff', 'staff-admins', 'project-members'] }]),
      IAM_OIDC_PROFILES: JSON.stringify(RULES),
      // Plain http in the test, so Chromium keeps the cookie: `iam-session` without Secure.
      IAM_SESSION_COOKIE_SECURE: 'false',
    },
    { keepDatabase: true },
  );
  // An admin linked Carol's three provider accounts to her user (docs/oidc.md): each signs in as her.
  await fixture.gateway.services!.repository.applyProvisioning({
    users: [{ userId: CAROL, identities: ['carol-1', 'carol-2', 'carol-3'].map((sub) => ({ identityId: `oidc:${sub}`, identityDomain: op.issuer })) }],
  });
  await fixture.gateway.services!.repository.applyProvisioning({ users: [{ userId: 'u-admin', identities: [{ identityId: 'oidc:admin-1', identityDomain: op.issuer }] }] });
  // Frank signed in before the upgrade: his staff profile has the former id.
  await fixture.gateway.services!.repository.applyProvisioning({
    users: [{ userId: 'frank@example.test', identities: [{ identityId: 'oidc:frank-1', identityDomain: op.issuer }], profiles: [{ profileId: FORMER_FRANK, profileName: 'staff', templateVersionId: 'reader-v1', clientTypes: ['WEB'], unscoped: true }] }],
  });
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await op?.close();
});

const send = (url: string, init: RequestInit = {}): Promise<Response> => fetch(url, { redirect: 'manual', ...init });

async function signIn(account: keyof typeof ACCOUNTS): Promise<Response> {
  const gw = fixture.gateway.url;
  const started = await send(`${gw}/iam/auth/oidc/login?returnTo=%2Fapi%2Fprojects`);
  const stateCookie = /(?:^|\n)iam-oidc=([^;]+)/.exec(started.headers.getSetCookie().join('\n'))![1]!;
  const callback = await op.loginThrough(started.headers.get('location')!, account, ACCOUNTS[account].password, `${gw}/iam/auth/oidc/callback`, new CookieJar());
  return send(callback, { headers: { cookie: `iam-oidc=${stateCookie}` } });
}

/** Carol's rule profiles: id → what a decision reads of them. */
async function carolsProfiles(): Promise<Record<string, Pick<ProfileRecord, 'profileName' | 'templateVersionId' | 'revoked' | 'unscoped' | 'scopes'>>> {
  const profiles = await fixture.gateway.services!.repository.listProfiles(CAROL);
  return Object.fromEntries(
    profiles.map((profile) => [profile.profileId, { profileName: profile.profileName, templateVersionId: profile.templateVersionId, revoked: profile.revoked, unscoped: profile.unscoped, scopes: [...profile.scopes].sort((a, b) => a.scopeRefId.localeCompare(b.scopeRefId)) }]),
  );
}

async function auditRows(action: string, targetId: string): Promise<Array<{ actor_user_id: string; details: { source?: string; changed?: string[]; reason?: string } }>> {
  await fixture.gateway.services!.audit.flush();
  return fixture.db!.orm.em.fork().execute('select actor_user_id, details from iam_audit_events where action = ? and target_id = ? order by occurred_at', [action, targetId]);
}

const team = (id: string) => ({ scopeType: 'TEAM', scopeRefId: id, accessMode: 'WRITE' });

describe('iam.oidc.profiles: the provider\'s groups become profiles at every login', () => {
  it('adds the profile of each rule the claims meet, with scopes from a claim; the session can use it', async () => {
    const answer = await signIn('carol-eng');
    expect(answer.status).toBe(303);
    expect(await carolsProfiles()).toEqual({
      'oidc:engineering:carol@example.test': { profileName: 'Engineering', templateVersionId: 'editor-v1', revoked: false, unscoped: false, scopes: [team('engineering')] },
    });
    // No profile for the staff rule: a rule never creates a profile just to revoke it.
    const cookie = answer.headers.getSetCookie().find((line) => line.startsWith('iam-session='))!.split(';')[0]!;
    const me = await send(`${fixture.gateway.url}/iam/auth/me`, { headers: { cookie } });
    expect(((await me.json()) as { activeProfileId: string }).activeProfileId).toBe('oidc:engineering:carol@example.test');
    const created = await auditRows('provisioning.profile.create', 'oidc:engineering:carol@example.test');
    expect(created).toEqual([{ actor_user_id: 'oidc', details: expect.objectContaining({ source: 'iam.oidc.profiles' }) }]);
  });

  it('updates a profile whose claims changed and adds the one a new group brings, each change audited', async () => {
    expect((await signIn('carol-both')).status).toBe(303);
    expect(await carolsProfiles()).toEqual({
      'oidc:engineering:carol@example.test': { profileName: 'Engineering', templateVersionId: 'editor-v1', revoked: false, unscoped: false, scopes: [team('engineering'), team('staff')] },
      'oidc:staff:carol@example.test': { profileName: 'staff', templateVersionId: 'reader-v1', revoked: false, unscoped: true, scopes: [] },
    });
    expect(await auditRows('provisioning.profile.update', 'oidc:engineering:carol@example.test')).toHaveLength(1);
    expect(await auditRows('provisioning.profile.create', 'oidc:staff:carol@example.test')).toHaveLength(1);
  });

  it('revokes the profile whose group went away, and keeps the others', async () => {
    expect((await signIn('carol-staff')).status).toBe(303);
    const profiles = await carolsProfiles();
    expect(profiles['oidc:engineering:carol@example.test']!.revoked).toBe(true);
    expect(profiles['oidc:staff:carol@example.test']!.revoked).toBe(false);
    expect((await auditRows('provisioning.profile.update', 'oidc:engineering:carol@example.test')).at(-1)!.details.changed).toContain('revoked');
  });

  it('gives the profile back when the group returns', async () => {
    expect((await signIn('carol-eng')).status).toBe(303);
    const profiles = await carolsProfiles();
    expect(profiles['oidc:engineering:carol@example.test']).toEqual(expect.objectContaining({ revoked: false, scopes: [team('engineering')] }));
    // The staff profile is revoked now (carol-eng is not in staff).
    expect(profiles['oidc:staff:carol@example.test']!.revoked).toBe(true);
  });
});

describe('rule profile ids: one per rule and user, whatever the parts hold', () => {
  it('rule staff + user admin-bob and rule staff-admin + user bob both sign in, each with a profile of their own', async () => {
    const first = await signIn('admin-bob');
    const second = await signIn('bob');
    expect([first.status, second.status]).toEqual([303, 303]);
    const idsOf = async (userId: string) => (await fixture.gateway.services!.repository.listProfiles(userId)).map((profile) => profile.profileId);
    expect(await idsOf('admin-bob')).toEqual(['oidc:staff:admin-bob']);
    expect(await idsOf('bob')).toEqual(['oidc:staff-admin:bob']);
  });

  it('a profile held under the former id keeps it at sign-in: not lost, not duplicated, nothing revoked', async () => {
    for (let round = 0; round < 2; round++) expect((await signIn('frank')).status).toBe(303);
    const profiles = await fixture.gateway.services!.repository.listProfiles('frank@example.test');
    expect(profiles.map((profile) => [profile.profileId, profile.revoked])).toEqual([[FORMER_FRANK, false]]);
  });
});

describe('a rule that cannot apply says so', () => {
  it('a met rule whose scope claim is missing: the sign-in succeeds, and the audit trail names the rule and the claim', async () => {
    const answer = await signIn('gina');
    expect(answer.status).toBe(303);
    expect(await fixture.gateway.services!.repository.listProfiles('gina@example.test')).toEqual([]);
    await fixture.gateway.services!.audit.flush();
    const rows = await fixture.db!.orm.em.fork().execute<Array<{ actor_user_id: string; request_id: string; details: Record<string, unknown> }>>(
      "select actor_user_id, request_id, details from iam_audit_events where action = 'oidc.claim-rule.skipped' and target_id = ?",
      ['gina@example.test'],
    );
    expect(rows).toEqual([{ actor_user_id: 'gina@example.test', request_id: answer.headers.get('x-request-id'), details: expect.objectContaining({ rule: 'projects', claim: 'project_ids', reason: 'missing' }) }]);
  });
});

describe('iam.oidc.allowed: who may sign in', () => {
  it.each([
    ['a group outside the list', 'dave' as const, 'dave@example.test', 'holds none of engineering, staff'],
    ['no groups claim at all', 'nogroups' as const, 'erin@example.test', 'holds none of engineering, staff'],
  ])('refuses %s: 401 IAM_OIDC_LOGIN_FAILED naming the claim, audited, no user and no session', async (_case, account, userId, words) => {
    const answer = await signIn(account);
    expect(answer.status).toBe(401);
    expect(answer.headers.getSetCookie().some((line) => line.startsWith('iam-session='))).toBe(false);
    const problem = (await answer.json()) as { code: string; detail: string };
    expect(problem.code).toBe('IAM_OIDC_LOGIN_FAILED');
    expect(problem.detail).toContain('"groups" claim');
    expect(problem.detail).toContain(words);
    expect(await fixture.gateway.services!.repository.getUser(userId)).toBeNull();
    await fixture.gateway.services!.audit.flush();
    const rows = await fixture.db!.orm.em.fork().execute<Array<{ details: { reason: string; detail: string } }>>(
      "select details from iam_audit_events where action = 'auth.login.failed' and request_id = ?",
      [answer.headers.get('x-request-id')],
    );
    expect(rows.map((row) => row.details.reason)).toEqual(['IAM_OIDC_LOGIN_FAILED']);
  });
});

// Outside CI without /usr/bin/chromium this block is skipped (test/support/browser.ts says so in one line).
(chromiumAvailable() ? describe : describe.skip)('the console signs out through the provider (Chromium)', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('"Sign out" on the Me page ends the session here, then sends the browser to the provider\'s end_session_endpoint', async () => {
    const gw = fixture.gateway.url;
    const answer = await signIn('carol-staff');
    const token = answer.headers.getSetCookie().find((line) => line.startsWith('iam-session='))!.split(';')[0]!.slice('iam-session='.length);
    const context = await browser.newContext();
    try {
      await context.addCookies([{ name: 'iam-session', value: token, url: gw, httpOnly: true, sameSite: 'Lax' }]);
      const page = await context.newPage();
      await page.goto(`${gw}/iam/console/me`);
      await page.getByText('then at your identity provider').waitFor();
      const toProvider = page.waitForRequest((request) => request.url().startsWith(`${op.issuer}/`) && request.isNavigationRequest());
      await page.getByRole('button', { name: 'Sign out' }).click();
      const endSession = new URL((await toProvider).url());
      // The provider's end_session_endpoint, not its authorization endpoint (a sign-out that only ended the gateway
      // session would land on the login, which sends the browser to the provider to sign in again).
      const discovery = (await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json()) as { end_session_endpoint: string };
      expect(`${endSession.origin}${endSession.pathname}`).toBe(discovery.end_session_endpoint);
      expect(endSession.searchParams.get('client_id')).toBe(CLIENT.id);
      expect((await send(`${gw}/api/projects`, { headers: { cookie: `iam-session=${token}` } })).status).toBe(401);
    } finally {
      await context.close();
    }
  });

  it('the Access page shows the rules the user\'s last sign-in skipped, with the claim each missed', async () => {
    const gw = fixture.gateway.url;
    expect((await signIn('gina')).status).toBe(303);
    const answer = await signIn('admin');
    const token = answer.headers.getSetCookie().find((line) => line.startsWith('iam-session='))!.split(';')[0]!.slice('iam-session='.length);
    const context = await browser.newContext();
    try {
      await context.addCookies([{ name: 'iam-session', value: token, url: gw, httpOnly: true, sameSite: 'Lax' }]);
      const page = await context.newPage();
      await page.goto(`${gw}/iam/console/access?userId=${encodeURIComponent('gina@example.test')}`);
      const skipped = page.locator('.user-detail .skipped-rules li');
      await skipped.first().waitFor();
      expect(await skipped.allTextContents()).toEqual(['Rule projects, scope claim project_ids: missing']);
      expect(await page.locator('.user-detail').textContent()).toContain('Last sign-in');
      // A user whose last sign-in skipped nothing shows no such list.
      await page.goto(`${gw}/iam/console/access?userId=${encodeURIComponent(CAROL)}`);
      await page.getByRole('heading', { name: 'Last sign-in' }).waitFor();
      await page.locator('.user-detail dl.facts').last().waitFor();
      expect(await page.locator('.user-detail .skipped-rules').count()).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('the console page served with OpenID Connect names the provider sign-out', async () => {
    // The served page carries data-sign-out only when the gateway signs in through a provider (test/e2e/console.test.ts
    // signs out with POST /iam/auth/logout on a users-file gateway).
    const answer = await signIn('carol-staff');
    const cookie = answer.headers.getSetCookie().find((line) => line.startsWith('iam-session='))!.split(';')[0]!;
    const html = await (await send(`${fixture.gateway.url}/iam/console/me`, { headers: { cookie, accept: 'text/html' } })).text();
    expect(html).toContain('<body data-sign-out="/iam/auth/oidc/logout">');
  });
});
