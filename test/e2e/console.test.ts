/**
 * The web console (/iam/console, console/ at the repository root) in headless Debian Chromium, against a running
 * gateway with real stores in front of the example host: for each page, its main task end to end as the user who
 * may do it, and the readable "not allowed" state for alice, who holds no iam.admin.* permission. Screenshots go to
 * test-output/screenshots/console-<page>.png.
 *
 * Users (test/fixtures/console/): alice (editor/reader on project 1), admin (the full IAM administrator),
 * auditor (iam.admin.audit:read only) and delegate (manages users and profiles, holds only the reader's codes). Plain http, so the session cookie is `iam-session`.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { startHost, type RunningHost } from '../../examples/host/server';
import type { RunningGateway } from '../../src/app/start-gateway';
import { chromiumAvailable, launchBrowser } from '../support/browser';
import { createTestDatabase } from '../support/database';
import { notRun } from '../support/env';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { until } from '../support/wait';

const runnable = chromiumAvailable();
if (!runnable) notRun('console: every test (no /usr/bin/chromium; CI always has it)');
const describeInBrowser = runnable ? describe : describe.skip;

const SCREENSHOTS = join(ROOT, 'test-output', 'screenshots');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'console');
const CONSOLE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const PASSWORDS: Record<string, string> = { alice: 'alice-password', admin: 'admin-password', auditor: 'alice-password', delegate: 'alice-password' };
/** Where policies/example.yaml declares the host's admin area (the route alice is denied by). */
const ADMIN_ROUTE_LINE = readFileSync(join(ROOT, 'policies', 'example.yaml'), 'utf8').split('\n').findIndex((line) => line.includes('path: /api/admin/**')) + 1;

let browser: Browser;
let host: RunningHost;
let gateway: RunningGateway;
let policiesDir: string;
const contexts: BrowserContext[] = [];
/** What went wrong inside each page: uncaught errors, CSP refusals, failed module loads (not the API's 4xx). */
const pageFaults = new Map<Page, string[]>();

const gw = (): string => gateway.url;

/** A new browser context (its own cookie jar) at 1280×800, its page's faults recorded. */
async function newPage(viewport = { width: 1280, height: 800 }): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.setDefaultNavigationTimeout(10_000);
  const faults: string[] = [];
  pageFaults.set(page, faults);
  page.on('pageerror', (error) => faults.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    // Chromium logs every non-2xx fetch as "Failed to load resource"; those are the API answers the tests expect.
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) faults.push(`console: ${message.text()}`);
  });
  return { context, page };
}

const screenshot = (page: Page, name: string): Promise<Buffer> => page.screenshot({ path: join(SCREENSHOTS, `console-${name}.png`), fullPage: true });

/** Opens a console URL without a session: the login form, then back on that URL, signed in. */
async function signIn(page: Page, username: string, path = '/iam/console'): Promise<void> {
  await page.goto(`${gw()}${path}`);
  await page.waitForURL((url) => url.pathname === '/iam/login');
  expect(new URL(page.url()).searchParams.get('returnTo')).toBe(path);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(PASSWORDS[username]!);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${gw()}${path}`);
}

/** Waits until `locator` (its first match) shows `text`; resolves its whole text. */
async function shows(locator: Locator, text: string | RegExp): Promise<string> {
  const match = locator.filter({ hasText: text }).first();
  await match.waitFor();
  return match.innerText();
}

/** The page's `<main>` text. */
const mainText = (page: Page): Promise<string> => page.locator('main').innerText();

/** The page is a console page done right: one h1, its nav link current, no raw JSON, nothing refused or thrown. */
async function expectSoundPage(page: Page, navName: string | null): Promise<void> {
  await expect(page.locator('h1').count()).resolves.toBe(1);
  if (navName !== null) {
    await expect(page.locator('#site-nav a[aria-current="page"]').innerText()).resolves.toBe(navName);
  }
  expect(await mainText(page)).not.toContain('{"');
  expect(pageFaults.get(page)).toEqual([]);
}

/** `GET /iam/admin/policy` as the admin (bearer). */
async function policyAsAdmin(token: string): Promise<any> {
  const response = await fetch(`${gw()}/iam/admin/policy`, { headers: bearer(token) });
  expect(response.status).toBe(200);
  return response.json();
}

/** The shared poller (test/support/wait.ts), with a generous bound whatever the call names. */
function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 5000): Promise<T> {
  return until(what, probe, { within: Math.max(timeoutMs, 20_000) });
}

const status = async (path: string, token: string): Promise<number> => (await fetch(`${gw()}${path}`, { headers: bearer(token) })).status;

describeInBrowser('the console in Chromium', () => {
  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    // An empty, migrated database: the test changes alice's scopes and writes audit rows.
    await (await createTestDatabase()).close();
    policiesDir = mkdtempSync(join(tmpdir(), 'iam-console-policies-'));
    cpSync(join(ROOT, 'policies'), policiesDir, { recursive: true });
    [browser, host] = await Promise.all([launchBrowser(), startHost(0)]);
    gateway = await startTestGateway(host.url, {
      IAM_SESSION_COOKIE_SECURE: 'false',
      IAM_POLICIES_DIR: policiesDir,
      IAM_POLICY_DEBOUNCE: '50ms',
      IAM_AUTHENTICATOR_PATH: join(FIXTURES, 'users.yaml'),
      IAM_PROVISION_FILE: join(FIXTURES, 'provision.yaml'),
    });
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(contexts.map((context) => context.close()));
    await browser?.close();
    await gateway?.close();
    await host?.close();
    if (policiesDir) rmSync(policiesDir, { recursive: true, force: true });
  });

  it('Explain: alice follows "Explain this decision" from the 403 page to the failed step and the route file:line', async () => {
    const { page } = await newPage();
    await signIn(page, 'alice');
    const landing = await page.goto(`${gw()}/iam/console`);
    expect(landing!.headers()['content-security-policy']).toBe(CONSOLE_CSP);
    await shows(page.locator('main dd'), 'u-alice');
    await expectSoundPage(page, null);
    await screenshot(page, 'home');

    const denied = await page.goto(`${gw()}/api/admin/stats`);
    expect(denied!.status()).toBe(403);
    const decisionId = (await page.locator('dt:text-is("Decision id") + dd').innerText()).trim();
    await page.getByRole('link', { name: 'Explain this decision' }).click();
    await page.waitForURL(`${gw()}/iam/console/explain?decisionId=${decisionId}`);
    const steps = page.locator('ol.steps li');
    await expect(steps.last().innerText()).resolves.toContain('PERMISSION_DENIED');
    await expect(steps.last().innerText()).resolves.toContain('✗');
    await expect(steps.first().innerText()).resolves.toContain('✓');
    const shown = await mainText(page);
    expect(shown).toContain('Denied');
    expect(shown).toContain(`example.yaml:${ADMIN_ROUTE_LINE}`);
    expect(shown).toContain('/api/admin/**');
    expect(shown).toContain('admin:write');
    expect(shown).toContain(decisionId);
    await expectSoundPage(page, 'Explain');
    await screenshot(page, 'explain');

    // The request form explains as alice, and the back button returns to the decision (client-side routing).
    await page.getByLabel('Path').fill('/api/projects/2');
    await page.getByRole('button', { name: 'Explain request' }).click();
    await page.waitForURL((url) => url.searchParams.get('path') === '/api/projects/2');
    await expect(page.locator('ol.steps li').last().innerText()).resolves.toContain('SCOPE_DENIED');
    expect(await mainText(page)).toContain('PROJECT 2');
    await page.goBack();
    await page.waitForURL((url) => url.searchParams.get('decisionId') === decisionId);
    await shows(page.locator('ol.steps li'), 'PERMISSION_DENIED');
  });

  it('Explain: runs a check as a host asks it (POST /iam/authorization/check) and shows the decision it recorded', async () => {
    const { page } = await newPage();
    await signIn(page, 'alice', '/iam/console/explain');
    await page.getByLabel('Permission code').fill('project:read');
    await page.getByLabel('Resource type (optional)').fill('PROJECT');
    await page.getByLabel('Resource id').fill('2');
    await page.getByRole('button', { name: 'Run the check' }).click();
    await page.waitForURL((url) => url.searchParams.get('permission') === 'project:read' && url.searchParams.get('resourceId') === '2');
    await shows(page.locator('ol.steps li'), 'SCOPE_DENIED');
    const shown = await mainText(page);
    expect(shown).toContain('Denied');
    expect(shown).toContain('project:read on PROJECT 2 (READ) for u-alice');
    await expectSoundPage(page, 'Explain');
    // Allowed on her project; a malformed code is refused next to its field, before any call.
    await page.goto(`${gw()}/iam/console/explain?permission=project:read&resourceType=PROJECT&resourceId=1&access=READ`);
    await shows(page.locator('.verdict'), 'Allowed');
    await page.getByLabel('Permission code').fill('not a code');
    await page.getByRole('button', { name: 'Run the check' }).click();
    await shows(page.locator('main'), 'A permission code is resource:action');
    // For another user it needs iam.authorization.decisions:check: the console says so.
    await page.goto(`${gw()}/iam/console/explain?permission=project:read&subject=u-bob`);
    await shows(page.locator('main'), 'iam.authorization.decisions:check');
    await expectSoundPage(page, 'Explain');
  });

  it('Policy: the admin sees the routes, filters them, sees a failed reload with file:line, and checks coverage', async () => {
    const admin = await login(gw(), 'admin', 'admin-password', 'API');
    const { page } = await newPage();
    await signIn(page, 'admin', '/iam/console/policy');
    const table = page.getByRole('table', { name: 'Policy routes' });
    await expect(table.innerText()).resolves.toContain('/api/admin/**');
    expect(await table.innerText()).toContain(`example.yaml:${ADMIN_ROUTE_LINE}`);
    const allRows = await table.locator('tbody tr').count();
    expect(allRows).toBe((await policyAsAdmin(admin.accessToken)).routes.length);
    await page.getByLabel('Filter routes').fill('task:delete');
    await expect(table.locator('tbody tr').count()).resolves.toBe(1);
    await expect(table.locator('tbody tr').innerText()).resolves.toContain('/api/tasks/:taskId');
    await page.getByLabel('Filter routes').fill('');
    await expect(table.locator('tbody tr').count()).resolves.toBe(allRows);
    await expectSoundPage(page, 'Policy');

    // A host API (a pretty-printed JSON file) with one operation no route covers.
    const hostApi = JSON.stringify({ openapi: '3.0.3', info: { title: 'host', version: '1' }, paths: { '/api/projects': { get: {} }, '/api/reports': { get: {} } } }, null, 2);
    await page.getByLabel('OpenAPI document file (JSON or YAML)').setInputFiles({ name: 'host.json', mimeType: 'application/json', buffer: Buffer.from(hostApi) });
    await page.getByRole('button', { name: 'Check coverage' }).click();
    const uncovered = page.getByRole('table', { name: 'Uncovered operations' });
    expect(await shows(uncovered.locator('tbody tr'), '/api/reports')).toMatch(/^GET\s+\/api\/reports$/);
    await expect(uncovered.locator('tbody tr').count()).resolves.toBe(1);
    expect(await mainText(page)).toContain('2 operations; 1 not covered');
    await expect(page.getByRole('table', { name: 'Unused routes' }).innerText()).resolves.toContain('/api/tasks/:taskId');

    // A broken edit: the gateway keeps the last good policy and reports the failure with file:line.
    const hashBefore = (await policyAsAdmin(admin.accessToken)).hash;
    writeFileSync(join(policiesDir, 'zz-broken.yaml'), ['version: 1', 'routes:', '  - path: /api/reports', '    methods: [GET]', '    permision: report:read', ''].join('\n'));
    const failed = await waitFor('the failed reload', async () => {
      const policy = await policyAsAdmin(admin.accessToken);
      return policy.lastError ? policy : null;
    });
    expect(failed.hash).toBe(hashBefore);
    await page.reload();
    const errorBox = page.getByRole('region', { name: 'The last policy reload failed' });
    await expect(errorBox.innerText()).resolves.toContain('zz-broken.yaml:5: routes[0]: unknown key "permision"');
    await expectSoundPage(page, 'Policy');
    await screenshot(page, 'policy');

    // At a phone's width the page does not scroll sideways: the table scrolls inside its own box.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await screenshot(page, 'policy-phone');

    // Fixed: the error goes away.
    rmSync(join(policiesDir, 'zz-broken.yaml'));
    await waitFor('the good reload', async () => (await policyAsAdmin(admin.accessToken)).lastError === null);
    await page.reload();
    await page.getByRole('table', { name: 'Policy routes' }).waitFor();
    await expect(errorBox.count()).resolves.toBe(0);
  });

  it('Sessions: alice revokes another of her sessions in the console, and its token is refused at once', async () => {
    const victim = await login(gw(), 'alice', 'alice-password', 'API');
    expect(await status('/api/whoami', victim.accessToken)).toBe(200);
    const { page } = await newPage();
    await signIn(page, 'alice', '/iam/console/sessions');
    const mine = page.getByRole('table', { name: 'My sessions' });
    const row = mine.locator(`tr[data-session-id="${victim.sessionId}"]`);
    await expect(row.innerText()).resolves.toContain('active');
    // Her own session is marked and cannot be revoked from here.
    await expect(mine.locator('tr.current').innerText()).resolves.toContain('this session');
    await expect(mine.locator('tr.current').getByRole('button', { name: 'Revoke' }).count()).resolves.toBe(0);
    await screenshot(page, 'sessions');

    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.getByRole('button', { name: 'Confirm' }).click();
    await shows(page.locator('#status'), 'Session revoked.');
    await shows(row, 'revoked');
    expect(await status('/api/whoami', victim.accessToken)).toBe(401);
    await expectSoundPage(page, 'Sessions');

    // An administrator ends every session of alice; her console then says the session ended, with a way back.
    const { page: adminPage } = await newPage();
    await signIn(adminPage, 'admin', '/iam/console/sessions?userId=u-alice');
    await shows(adminPage.getByRole('table', { name: 'Sessions of u-alice' }).locator('tbody tr'), 'active');
    expect(await adminPage.getByRole('table', { name: 'Sessions of u-alice' }).locator('tbody tr').count()).toBeGreaterThanOrEqual(2);
    await adminPage.getByRole('button', { name: 'End all sessions of this user' }).click();
    await adminPage.getByRole('button', { name: 'Confirm' }).click();
    await expect(adminPage.locator('main .notice').innerText()).resolves.toMatch(/^[1-9]\d* sessions? of u-alice ended\.$/);
    await expectSoundPage(adminPage, 'Sessions');
    await screenshot(adminPage, 'sessions-admin');

    await page.getByRole('link', { name: 'Me', exact: true }).click();
    await page.waitForURL(`${gw()}/iam/console/me`);
    await shows(page.locator('main .problem-title'), 'Your session ended — sign in again');
    await expect(page.getByRole('link', { name: 'Sign in again' }).first().getAttribute('href')).resolves.toBe('/iam/login?returnTo=%2Fiam%2Fconsole%2Fme');
    await expectSoundPage(page, 'Me');
  });

  it("Explain: a filtered list shows its filter: which elements of the host's answer the user sees", async () => {
    const { page } = await newPage();
    await signIn(page, 'admin', '/iam/console/explain?method=GET&path=%2Fapi%2Fprojects&userId=u-alice');
    await shows(page.locator('.verdict'), 'Allowed');
    const shown = await mainText(page);
    expect(shown).toContain('List filter');
    expect(shown).toMatch(/the array at \/projects keeps the elements whose \/id is a PROJECT the profile covers \(READ\)/);
  });

  it("Access: the admin moves alice's editor profile from project 1 to project 2, and her next request is allowed", async () => {
    const alice = await login(gw(), 'alice', 'alice-password', 'API');
    expect(await status('/api/projects/2', alice.accessToken)).toBe(403);
    expect(await status('/api/projects/1', alice.accessToken)).toBe(200);
    const { page } = await newPage();
    await signIn(page, 'admin', '/iam/console/explain?method=GET&path=%2Fapi%2Fprojects%2F2&userId=u-alice');
    // Explained as alice first: her scope is what refuses it.
    await expect(page.locator('ol.steps li').last().innerText()).resolves.toContain('SCOPE_DENIED');

    await page.goto(`${gw()}/iam/console/access?userId=u-alice`);
    const profile = page.locator('article[data-profile-id="p-alice-editor"]');
    const resourceId = profile.getByLabel('Scope 1 resource id');
    await expect(resourceId.inputValue()).resolves.toBe('1');
    await expect(page.getByRole('table', { name: 'Identities of u-alice' }).innerText()).resolves.toContain('id-alice');
    await expect(page.getByRole('table', { name: 'Permission templates' }).innerText()).resolves.toContain('editor-v1');

    // Checked like the schema before anything is sent.
    await resourceId.fill('');
    await profile.getByRole('button', { name: 'Save scopes' }).click();
    await expect(resourceId.getAttribute('aria-invalid')).resolves.toBe('true');
    await expect(profile.locator('.field-error').innerText()).resolves.toContain('Required');

    await resourceId.fill('2');
    await profile.getByRole('button', { name: 'Save scopes' }).click();
    await expect(profile.locator('.notice').innerText()).resolves.toBe('Scopes of Editor on project 1 saved.');
    expect(await status('/api/projects/2', alice.accessToken)).toBe(200);
    expect(await status('/api/projects/1', alice.accessToken)).toBe(403);
    await expectSoundPage(page, 'Access');
    await screenshot(page, 'access');

    // Someone else changes the profile meanwhile: the console's next save is refused, and Reload shows theirs.
    const admin = await login(gw(), 'admin', 'admin-password', 'API');
    const current = await fetch(`${gw()}/iam/admin/profiles/p-alice-editor`, { headers: bearer(admin.accessToken) });
    const changed = await fetch(`${gw()}/iam/admin/profiles/p-alice-editor/scopes`, {
      method: 'PUT',
      headers: { ...bearer(admin.accessToken), 'content-type': 'application/json', 'if-match': current.headers.get('etag')! },
      body: JSON.stringify([{ scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'WRITE' }, { scopeType: 'PROJECT', scopeRefId: '3', accessMode: 'READ' }]),
    });
    expect(changed.status).toBe(200);
    await profile.getByRole('button', { name: 'Add scope' }).click();
    await profile.getByLabel('Scope 2 resource id').fill('4');
    await profile.getByRole('button', { name: 'Save scopes' }).click();
    await shows(profile.locator('.problem-title'), 'Changed by someone else — reload');
    await profile.getByRole('button', { name: 'Reload' }).click();
    await profile.getByText('Changed by someone else').waitFor({ state: 'detached' });
    await expect(page.locator('article[data-profile-id="p-alice-editor"]').getByLabel('Scope 2 resource id').inputValue()).resolves.toBe('3');
    await expectSoundPage(page, 'Access');
  });

  describe('Access: creating', () => {
    let adminToken: string;
    /** `GET` of an admin API path as the admin (bearer): its status and body. */
    const adminGet = async (path: string): Promise<{ status: number; body: any }> => {
      const response = await fetch(`${gw()}${path}`, { headers: bearer(adminToken) });
      return { status: response.status, body: await response.json() };
    };
    beforeAll(async () => {
      adminToken = (await login(gw(), 'admin', 'admin-password', 'API')).accessToken;
    });

    it('the admin creates a template version and a user; an invalid permission code, an existing and an invalid id are shown', async () => {
      const { page } = await newPage();
      await signIn(page, 'admin', '/iam/console/access');
      const templateForm = page.getByRole('form', { name: 'New template version' });
      await templateForm.getByLabel('Version id').fill('reviewer-v1');
      await templateForm.getByLabel('Template name').fill('reviewer');
      await templateForm.getByLabel('Permissions').fill('project:read\nnot a code\n');
      await templateForm.getByRole('button', { name: 'Create template version' }).click();
      // 400: the code the API refuses, next to the field, and nothing written.
      await shows(templateForm.locator('.field-error'), 'Line 2: "not a code" is not a permission code');
      await expect(templateForm.getByLabel('Permissions').getAttribute('aria-invalid')).resolves.toBe('true');
      await expect(templateForm.locator('.problem-title').innerText()).resolves.toBe('Request validation failed');
      expect((await adminGet('/iam/admin/templates/reviewer-v1')).status).toBe(404);

      await templateForm.getByLabel('Permissions').fill('project:read\ntask:read');
      await templateForm.getByRole('button', { name: 'Create template version' }).click();
      await shows(templateForm.locator('.notice'), 'Template version reviewer-v1 created.');
      await shows(page.getByRole('table', { name: 'Permission templates' }).locator('tbody tr'), 'reviewer-v1');
      const template = await adminGet('/iam/admin/templates/reviewer-v1');
      expect(template.status).toBe(200);
      expect(template.body).toMatchObject({ name: 'reviewer', permissions: ['project:read', 'task:read'] });
      // No description given: none stored, and the table shows a dash, not "null".
      expect(template.body.description ?? null).toBeNull();
      const row = await shows(page.getByRole('table', { name: 'Permission templates' }).locator('tbody tr'), 'reviewer-v1');
      expect(row).toContain('—');
      // An existing version is not overwritten.
      await templateForm.getByLabel('Version id').fill('editor-v1');
      await templateForm.getByLabel('Template name').fill('replaced');
      await templateForm.getByRole('button', { name: 'Create template version' }).click();
      await shows(templateForm.locator('.problem-title'), 'Template version editor-v1 already exists');
      expect((await adminGet('/iam/admin/templates/editor-v1')).body.name).toBe('editor');

      const userForm = page.getByRole('form', { name: 'New user' });
      await userForm.getByLabel('User id').fill('u-carol');
      await userForm.getByLabel('Display name (optional)').fill('Carol');
      await expect(userForm.getByLabel('Enabled (can sign in)').isChecked()).resolves.toBe(true);
      await userForm.getByRole('button', { name: 'Create user' }).click();
      await shows(userForm.locator('.notice'), 'User u-carol created.');
      await shows(page.locator('#status'), 'User u-carol created.');
      await shows(page.getByRole('table', { name: 'Users' }).locator('tbody tr'), 'u-carol');
      expect((await adminGet('/iam/admin/users/u-carol')).body).toMatchObject({ userId: 'u-carol', displayName: 'Carol', enabled: true });
      // The form is empty again, its checkbox back on.
      await expect(userForm.getByLabel('User id').inputValue()).resolves.toBe('');
      await expect(userForm.getByLabel('Enabled (can sign in)').isChecked()).resolves.toBe(true);

      // An existing user is not overwritten; an id outside the API's rule is refused next to its field before any call;
      // a name the API finds too long is its 400, shown next to the field it names.
      await userForm.getByLabel('User id').fill('u-alice');
      await userForm.getByLabel('Enabled (can sign in)').uncheck();
      await userForm.getByRole('button', { name: 'Create user' }).click();
      await shows(userForm.locator('.problem-title'), 'User u-alice already exists');
      expect((await adminGet('/iam/admin/users/u-alice')).body).toMatchObject({ displayName: 'Alice', enabled: true });
      await userForm.getByLabel('User id').fill('u;bad');
      await userForm.getByRole('button', { name: 'Create user' }).click();
      await shows(userForm.locator('.field-error'), 'without / \\ % or ;');
      await expect(userForm.getByLabel('User id').getAttribute('aria-invalid')).resolves.toBe('true');
      await userForm.getByLabel('User id').fill('u-dave');
      await userForm.getByLabel('Display name (optional)').fill('D'.repeat(201));
      await userForm.getByRole('button', { name: 'Create user' }).click();
      await shows(userForm.locator('.field-error'), /200 characters/);
      await expect(userForm.getByLabel('Display name (optional)').getAttribute('aria-invalid')).resolves.toBe('true');
      await expect(userForm.getByLabel('User id').getAttribute('aria-invalid')).resolves.toBeNull();
      await expect(userForm.locator('.problem-title').innerText()).resolves.toBe('Request validation failed');
      expect((await adminGet('/iam/admin/users/u-dave')).status).toBe(404);
      expect(await mainText(page)).not.toMatch(/\b(null|undefined)\b/);
      await expectSoundPage(page, 'Access');
      await screenshot(page, 'access-create');
    });

    it("the admin gives u-carol an identity and a scoped profile; another user's identity (409) and an unknown client type (400) are shown", async () => {
      const { page } = await newPage();
      await signIn(page, 'admin', '/iam/console/access?userId=u-carol');
      await shows(page.locator('.user-detail'), 'No identities.');
      const identityForm = page.getByRole('form', { name: 'New identity of u-carol' });
      // alice's identity cannot be moved to carol: the API's 409 with its detail.
      await identityForm.getByLabel('Identity id').fill('id-alice');
      await identityForm.getByLabel('Identity domain').fill('example.com');
      await identityForm.getByRole('button', { name: 'Create identity' }).click();
      await shows(identityForm.locator('.problem'), 'Identity "id-alice" belongs to user "u-alice"; it cannot be moved.');
      await identityForm.getByLabel('Identity id').fill('id-carol');
      await identityForm.getByRole('button', { name: 'Create identity' }).click();
      await shows(identityForm.locator('.notice'), 'Identity id-carol of u-carol created.');
      await shows(page.getByRole('table', { name: 'Identities of u-carol' }), 'id-carol');
      expect((await adminGet('/iam/admin/users/u-carol/identities')).body).toEqual([expect.objectContaining({ identityId: 'id-carol', identityDomain: 'example.com', enabled: true })]);

      const profileForm = page.getByRole('form', { name: 'New profile of u-carol' });
      await profileForm.getByLabel('Profile id').fill('p-carol-reviewer');
      await profileForm.getByLabel('Profile name').fill('Reviewer on project 2');
      await profileForm.getByLabel('Template').selectOption('reviewer-v1');
      await profileForm.getByLabel('Client types').fill('WEB, PHONE');
      await profileForm.getByLabel('Scopes').fill('PROJECT 2 READ');
      await profileForm.getByRole('button', { name: 'Create profile' }).click();
      await shows(profileForm.locator('.field-error'), 'Item 2:');
      await expect(profileForm.getByLabel('Client types').getAttribute('aria-invalid')).resolves.toBe('true');
      expect((await adminGet('/iam/admin/profiles/p-carol-reviewer')).status).toBe(404);

      await profileForm.getByLabel('Client types').fill('WEB, API');
      await profileForm.getByRole('button', { name: 'Create profile' }).click();
      await shows(profileForm.locator('.notice'), 'Profile p-carol-reviewer of u-carol created.');
      const card = page.locator('article[data-profile-id="p-carol-reviewer"]');
      await expect(card.getByLabel('Scope 1 resource id').inputValue()).resolves.toBe('2');
      expect(await card.innerText()).toContain('reviewer-v1');
      expect((await adminGet('/iam/admin/profiles/p-carol-reviewer')).body).toMatchObject({
        userId: 'u-carol',
        profileName: 'Reviewer on project 2',
        templateVersionId: 'reviewer-v1',
        clientTypes: ['WEB', 'API'],
        enabled: true,
        unscoped: false,
        scopes: [{ scopeType: 'PROJECT', scopeRefId: '2', accessMode: 'READ' }],
      });
      expect(await mainText(page)).not.toMatch(/\b(null|undefined)\b/);
      await expectSoundPage(page, 'Access');
      await screenshot(page, 'access-create-profile');
    });

    it('a delegated admin who holds only the reader codes is refused an editor profile: the API\'s 403 is shown', async () => {
      const { page } = await newPage();
      await signIn(page, 'delegate', '/iam/console/access?userId=u-carol');
      // No iam.admin.templates:write: no template form (the API would refuse it anyway).
      await page.getByRole('table', { name: 'Permission templates' }).waitFor();
      await expect(page.getByRole('form', { name: 'New template version' }).count()).resolves.toBe(0);
      const profileForm = page.getByRole('form', { name: 'New profile of u-carol' });
      await profileForm.getByLabel('Profile id').fill('p-carol-editor');
      await profileForm.getByLabel('Profile name').fill('Editor everywhere');
      await profileForm.getByLabel('Template').selectOption('editor-v1');
      await profileForm.getByLabel('Unscoped (applies to every resource)').check();
      await profileForm.getByRole('button', { name: 'Create profile' }).click();
      const problem = await shows(profileForm.locator('.problem'), 'You cannot grant what you do not hold');
      expect(problem).toContain('project:create');
      expect(problem).toContain('/templateVersionId');
      expect((await adminGet('/iam/admin/profiles/p-carol-editor')).status).toBe(404);
      // What the delegate holds, it may grant.
      await profileForm.getByLabel('Profile id').fill('p-carol-reader');
      await profileForm.getByLabel('Profile name').fill('Reader everywhere');
      await profileForm.getByLabel('Template').selectOption('reader-v1');
      await profileForm.getByRole('button', { name: 'Create profile' }).click();
      await shows(profileForm.locator('.notice'), 'Profile p-carol-reader of u-carol created.');
      expect((await adminGet('/iam/admin/profiles/p-carol-reader')).body).toMatchObject({ templateVersionId: 'reader-v1', unscoped: true });
      await expectSoundPage(page, 'Access');
      await screenshot(page, 'access-create-denied');
    });
  });

  it('Audit: the auditor pages through 250 rows, 50 a page, each once, the cursor in the URL', async () => {
    const base = Date.now() - 60_000;
    await gateway.services!.repository.insertAudit(
      Array.from({ length: 250 }, (_, index) => ({
        occurredAt: new Date(base + index * 10),
        actorUserId: 'u-alice',
        action: 'console.test.row',
        targetType: 'row',
        targetId: `row-${index}`,
        outcome: 'success' as const,
        requestId: null,
        decisionId: null,
        clientAddress: null,
        details: null,
      })),
    );
    const { page } = await newPage();
    await signIn(page, 'auditor', '/iam/console/audit');
    // The status line announcing the results does not move the page: a click aimed at the form lands on it.
    const apply = page.getByRole('button', { name: 'Apply filters' });
    await shows(page.locator('#status'), /events?, newest first/);
    const withMessage = await apply.boundingBox();
    await page.locator('#status').evaluate((element) => {
      (element as { textContent: string }).textContent = '';
    });
    expect(await apply.boundingBox()).toEqual(withMessage);
    await page.getByLabel('Type (action)').fill('console.test.row');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL((url) => url.searchParams.get('action') === 'console.test.row');
    const events = page.getByRole('table', { name: 'Audit events' });
    const seen: string[] = [];
    const urls: string[] = [];
    for (let pageNumber = 1; ; pageNumber++) {
      await events.locator('tbody tr').first().waitFor();
      const ids = await events.locator('tbody tr').evaluateAll((rows) => rows.map((row) => (row as any).dataset.auditId as string));
      const targets = await events.locator('tbody tr td:nth-child(4)').allInnerTexts();
      expect(targets.every((target) => target.startsWith('row row-'))).toBe(true);
      expect(ids.length).toBe(pageNumber <= 5 ? 50 : 0);
      seen.push(...ids);
      urls.push(page.url());
      if (pageNumber === 2) await screenshot(page, 'audit');
      const next = page.getByRole('link', { name: 'Next page' });
      if ((await next.count()) === 0) break;
      await next.click();
      await page.waitForURL((url) => url.searchParams.get('cursor') !== null && url.href !== urls[urls.length - 1]);
      await expect(events.locator('tbody tr').first().getAttribute('data-audit-id')).resolves.not.toBe(ids[0]);
    }
    expect(seen.length).toBe(250);
    expect(new Set(seen).size).toBe(250);
    expect(urls.length).toBe(5);
    // Newest first: row-249 leads the first page, row-0 ends the last.
    expect(await events.locator('tbody tr').last().innerText()).toContain('row-0');
    await expectSoundPage(page, 'Audit');

    // A page's URL is a deep link: opened afresh, the third page shows the same rows.
    await page.goto(urls[2]!);
    // The page renders after its API call: wait for the whole third page before reading it.
    await events.locator(`tbody tr[data-audit-id="${seen[149]}"]`).waitFor();
    const third = await events.locator('tbody tr').evaluateAll((rows) => rows.map((row) => (row as any).dataset.auditId as string));
    expect(third).toEqual(seen.slice(100, 150));

    // "Since" is the viewer's local time, sent as ISO 8601 UTC; nothing happened after the year 2999 began.
    await page.getByLabel('Since').fill('2999-01-01T00:00');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL((url) => url.searchParams.get('since') !== null);
    const since = new URL(page.url()).searchParams;
    expect(since.get('since')).toMatch(/^2998-12-3\dT.*Z$|^2999-01-0\dT.*Z$/);
    expect([since.get('action'), since.get('cursor')]).toEqual(['console.test.row', null]);
    await shows(page.locator('main .summary'), 'No events match.');
  });

  it('Me: alice switches profile in the console; the principal shows the new active profile; then she signs out', async () => {
    const { context, page } = await newPage();
    await signIn(page, 'alice', '/iam/console/me');
    await expect(page.locator('.active-profile').innerText()).resolves.toBe('p-alice-editor');
    const before = (await context.cookies(gw())).find((cookie) => cookie.name === 'iam-session');
    // Keyboard only: focus the button and press Enter.
    await page.getByRole('button', { name: 'Switch to Reader on project 1' }).focus();
    await page.keyboard.press('Enter');
    await shows(page.locator('#status'), 'Switched to Reader on project 1.');
    await expect(page.locator('.active-profile').innerText()).resolves.toBe('p-alice-reader');
    await expect(page.locator('tr[data-profile-id="p-alice-reader"]').innerText()).resolves.toContain('active');
    const after = (await context.cookies(gw())).find((cookie) => cookie.name === 'iam-session');
    expect(after).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
    expect(after!.value).not.toBe(before!.value);
    // The switch survives a reload: the cookie carries the new session.
    await page.reload();
    await expect(page.locator('.active-profile').innerText()).resolves.toBe('p-alice-reader');
    await expectSoundPage(page, 'Me');
    await screenshot(page, 'me');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL((url) => url.pathname === '/iam/login');
    await page.goto(`${gw()}/iam/console/me`);
    expect(new URL(page.url()).pathname).toBe('/iam/login');
  });

  describe('alice, who holds no iam.admin permission, gets a readable "not allowed" state', () => {
    let alice: { context: BrowserContext; page: Page };
    beforeAll(async () => {
      alice = await newPage();
      await signIn(alice.page, 'alice', '/iam/console/me');
    });

    it.each([
      ['explain', '/iam/console/explain?method=GET&path=%2Fapi%2Fprojects&userId=u-admin', 'explain a request as another user', 'iam.admin.diagnostics:read', 'Explain'],
      ['policy', '/iam/console/policy', 'see the policy', 'iam.admin.policy:read', 'Policy'],
      ['sessions', '/iam/console/sessions?userId=u-admin', 'list the sessions of another user', 'iam.admin.sessions:read', 'Sessions'],
      ['access', '/iam/console/access', 'see the users', 'iam.admin.users:read', 'Access'],
      ['audit', '/iam/console/audit', 'read the audit trail', 'iam.admin.audit:read', 'Audit'],
    ])('%s', async (name, path, action, permission, nav) => {
      const { page } = alice;
      await page.goto(`${gw()}${path}`);
      const message = `You are not allowed to ${action} (needs ${permission}).`;
      const denied = page.locator('.problem-denied').first();
      await expect(denied.innerText()).resolves.toContain(message);
      expect(await mainText(page)).toContain(message);
      // The problem's decision id, as a link to its explanation.
      await expect(denied.locator('a[href^="/iam/console/explain?decisionId="]').count()).resolves.toBe(1);
      await expectSoundPage(page, nav);
      await screenshot(page, `${name}-not-allowed`);
    });
  });
});
