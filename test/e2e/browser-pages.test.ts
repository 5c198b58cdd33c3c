/**
 * The gateway's own browser pages (docs/http-contract.md, "Pages for browsers") in Chromium: the sign-in form, a 403
 * denial, a 401 and the `/iam` 404, branded with `iam.ui.title` (a title with markup in it, shown as text) and
 * `iam.ui.logo-url`, styled by the one external stylesheet, without a single CSP violation. Screenshots go to
 * test-output/screenshots/pages-<name>.png.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startHost, type RunningHost } from '../../examples/host/server';
import type { RunningGateway } from '../../src/app/start-gateway';
import { chromiumAvailable, launchBrowser } from '../support/browser';
import { createTestDatabase } from '../support/database';
import { notRun } from '../support/env';
import { ROOT, startTestGateway } from '../support/gateway';

declare const window: { __violations?: string[]; getComputedStyle(element: unknown): { backgroundColor: string } };
declare const document: { documentElement: unknown; addEventListener(type: string, listener: (event: { violatedDirective: string; blockedURI: string }) => void): void };

const runnable = chromiumAvailable();
if (!runnable) notRun('browser-pages: every test (no /usr/bin/chromium; CI always has it)');
const describeInBrowser = runnable ? describe : describe.skip;

const SCREENSHOTS = join(ROOT, 'test-output', 'screenshots');
const TITLE = 'Acme <Portal> & "Co"';
const LOGO = '/favicon.ico';
const BRANDED = { IAM_SESSION_COOKIE_SECURE: 'false', IAM_POLICIES_DIR: join(ROOT, 'policies'), IAM_UI_TITLE: TITLE, IAM_UI_LOGO_URL: LOGO };
const PAGE_CSP = (formAction: string): string => `default-src 'none'; style-src 'self'; img-src 'self'; form-action ${formAction}; base-uri 'none'; frame-ancestors 'none'`;

let browser: Browser;
let host: RunningHost;
/** users-file login, the example host and policies, branded. */
let gateway: RunningGateway;
/** The same with `iam.authenticator.type: none`: nobody can sign in, so a browser gets the 401 itself. */
let noLogin: RunningGateway;
const contexts: BrowserContext[] = [];

interface Watched {
  page: Page;
  /** Everything the page loaded besides the document itself. */
  loaded: string[];
  /** CSP violations: the page's own `securitypolicyviolation` events and Chromium's console reports. */
  violations: () => Promise<string[]>;
}

async function watchedPage(): Promise<Watched> {
  const context = await browser.newContext();
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const loaded: string[] = [];
  const consoleErrors: string[] = [];
  page.on('request', (request) => {
    if (request.resourceType() !== 'document') loaded.push(new URL(request.url()).pathname);
  });
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => consoleErrors.push(String(error)));
  await page.addInitScript(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (event) => window.__violations!.push(`${event.violatedDirective} ${event.blockedURI}`));
  });
  return { page, loaded, violations: async () => [...consoleErrors, ...(await page.evaluate(() => window.__violations ?? []))] };
}

/** The branding and the stylesheet are there, and nothing was refused. */
async function expectBrandedPage({ page, loaded, violations }: Watched, heading: string): Promise<void> {
  await expect(page.title()).resolves.toBe(`${heading} · ${TITLE}`);
  await expect(page.locator('header .brand').innerText()).resolves.toBe(TITLE);
  await expect(page.locator('header img.logo').getAttribute('src')).resolves.toBe(LOGO);
  await expect(page.locator('h1').innerText()).resolves.toBe(heading);
  expect(await page.locator('script, style, [style]').count()).toBe(0);
  // The stylesheet applied: the page's grey background comes from pages.css.
  await expect(page.evaluate(() => window.getComputedStyle(document.documentElement).backgroundColor)).resolves.toBe('rgb(244, 246, 248)');
  // Only the stylesheet, and the logo (Chromium may take it from its favicon cache without a request).
  expect(loaded).toContain('/iam/console/assets/pages.css');
  expect([...new Set(loaded)].filter((path) => path !== '/iam/console/assets/pages.css' && path !== LOGO)).toEqual([]);
  await expect(violations()).resolves.toEqual([]);
}

const screenshot = (page: Page, name: string): Promise<Buffer> => page.screenshot({ path: join(SCREENSHOTS, `pages-${name}.png`), fullPage: true });

describeInBrowser('the browser pages in Chromium', () => {
  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    await (await createTestDatabase()).close();
    [browser, host] = await Promise.all([launchBrowser(), startHost(0)]);
    gateway = await startTestGateway(host.url, BRANDED);
    noLogin = await startTestGateway(host.url, { ...BRANDED, IAM_AUTHENTICATOR_TYPE: 'none' });
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(contexts.map((context) => context.close()));
    await browser?.close();
    await Promise.allSettled([gateway?.close(), noLogin?.close()]);
    await host?.close();
  });

  it('the sign-in page and a refused sign-in', async () => {
    const watched = await watchedPage();
    const answer = await watched.page.goto(`${gateway.url}/api/whoami`);
    expect(new URL(watched.page.url()).pathname).toBe('/iam/login');
    expect(answer!.headers()['content-security-policy']).toBe(PAGE_CSP("'self'"));
    await expectBrandedPage(watched, 'Sign in');
    await screenshot(watched.page, 'sign-in');
    await watched.page.getByLabel('Username').fill('alice');
    await watched.page.getByLabel('Password').fill('not-her-password');
    await watched.page.getByRole('button', { name: 'Sign in' }).click();
    await expect(watched.page.getByRole('alert').innerText()).resolves.toBe('The username or password is wrong.');
    await expectBrandedPage(watched, 'Sign in');
    await screenshot(watched.page, 'sign-in-refused');
  });

  it('a 403 denial keeps the step and the decision id', async () => {
    const watched = await watchedPage();
    await watched.page.goto(`${gateway.url}/api/whoami`);
    await watched.page.getByLabel('Username').fill('alice');
    await watched.page.getByLabel('Password').fill('alice-password');
    await watched.page.getByRole('button', { name: 'Sign in' }).click();
    await watched.page.waitForURL(`${gateway.url}/api/whoami`);
    watched.loaded.length = 0;
    const denied = await watched.page.goto(`${gateway.url}/api/admin/stats`);
    expect(denied!.status()).toBe(403);
    expect(denied!.headers()['content-security-policy']).toBe(PAGE_CSP("'none'"));
    await expect(watched.page.locator('dt:text-is("Step that failed") + dd').innerText()).resolves.toBe('PERMISSION_DENIED');
    await expect(watched.page.locator('dt:text-is("Decision id") + dd').innerText()).resolves.toMatch(/^[0-9a-f-]{36}$/);
    await expectBrandedPage(watched, 'Access denied');
    await screenshot(watched.page, 'denied-403');
    // A way back, and a way out: a password login signs out on the console's Me page (a POST a link cannot send).
    await expect(watched.page.getByRole('link', { name: 'Back to the start page' }).getAttribute('href')).resolves.toBe('/');
    await watched.page.getByRole('link', { name: 'Sign out' }).click();
    await watched.page.waitForURL(`${gateway.url}/iam/console/me`);
    const signedIn = (await watched.page.context().cookies()).map((cookie) => `${cookie.name}=${cookie.value}`).join('; ');
    await watched.page.getByRole('button', { name: 'Sign out' }).click();
    await watched.page.waitForURL((url) => url.pathname === '/iam/login');
    // The session is over, not only its cookie gone: the cookie the browser held is refused.
    expect((await fetch(`${gateway.url}/api/whoami`, { headers: { cookie: signedIn, accept: 'application/json' } })).status).toBe(401);
  });

  it('a 401 when nobody can sign in', async () => {
    const watched = await watchedPage();
    const answer = await watched.page.goto(`${noLogin.url}/api/whoami`);
    expect(answer!.status()).toBe(401);
    expect(answer!.headers()['www-authenticate']).toMatch(/^Bearer/);
    await expect(watched.page.locator('dt:text-is("Code") + dd').innerText()).resolves.toBe('IAM_UNAUTHENTICATED');
    await expectBrandedPage(watched, await watched.page.locator('h1').innerText());
    await screenshot(watched.page, 'unauthenticated-401');
  });

  it("the gateway's 404", async () => {
    const watched = await watchedPage();
    const answer = await watched.page.goto(`${gateway.url}/iam/no-such-page`);
    expect(answer!.status()).toBe(404);
    expect(answer!.headers()['content-type']).toBe('text/html; charset=utf-8');
    await expect(watched.page.locator('dt:text-is("Code") + dd').innerText()).resolves.toBe('IAM_NOT_FOUND');
    await expectBrandedPage(watched, 'Not found');
    await screenshot(watched.page, 'not-found-404');
    // An API client keeps the problem.
    const api = await fetch(`${gateway.url}/iam/no-such-page`);
    expect([api.status, api.headers.get('content-type')]).toEqual([404, 'application/problem+json']);
  });
});
