/**
 * The browser contract (docs/http-contract.md, Authentication; docs/oidc.md) in a real browser: headless Debian
 * Chromium driven by playwright-core (test/support/browser.ts). The password login page, the session cookie as
 * Chromium stores it (HttpOnly, SameSite=Lax), the login page's CSP, the HTML 403 page, CSRF from another site and
 * from another origin of the same site, and the OpenID Connect login, RP-initiated and back-channel logout against
 * a real OpenID Provider (test/support/oidc-op.ts). Screenshots of the main pages go to test-output/screenshots/.
 *
 * Everything runs on plain http://127.0.0.1, so the gateways run with `iam.session-cookie.secure: false` (cookies
 * `iam-session` and `iam-oidc`, without Secure), else Chromium would not store them.
 */
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page, Response as PageResponse } from 'playwright-core';
import { startHost, type RunningHost } from '../../examples/host/server';
import type { RunningGateway } from '../../src/app/start-gateway';
import { chromiumAvailable, launchBrowser } from '../support/browser';
import { createTestDatabase } from '../support/database';
import { describeWithRedis, notRun, uniquePrefix } from '../support/env';
import { freePort } from '../support/front-proxy';
import { ROOT, startTestGateway } from '../support/gateway';
import { E2E_POLICIES } from '../support/gateway-fixture';
import { startTestOp, type TestOp } from '../support/oidc-op';
import { recordedHeader, startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

/**
 * What the functions given to `page.evaluate` use of the page's `document` (they run in Chromium; the tests compile
 * without the DOM lib, so this file declares the little it needs).
 */
interface PageElement {
  name: string;
  value: string;
  textContent: string | null;
  append(...children: PageElement[]): void;
}
interface PageForm extends PageElement {
  method: string;
  action: string;
  submit(): void;
}
declare const document: {
  cookie: string;
  scripts: { length: number };
  head: PageElement;
  body: PageElement;
  documentElement: { dataset: Record<string, string | undefined> };
  createElement(tag: 'form'): PageForm;
  createElement(tag: 'input' | 'script'): PageElement;
};

const runnable = chromiumAvailable();
if (!runnable) notRun('browser-chromium: every test (no /usr/bin/chromium; CI always has it)');
const describeInBrowser = runnable ? describe : describe.skip;

const SCREENSHOTS = join(ROOT, 'test-output', 'screenshots');
const EXAMPLE_POLICIES = join(ROOT, 'policies');
/** Plain http: the cookies are `iam-session` / `iam-oidc`, without Secure. */
const PLAIN_HTTP = { IAM_SESSION_COOKIE_SECURE: 'false' };
const CLIENT = { id: 'iam-gateway', secret: 'gateway-secret-for-browser-tests' };
/** The OP's users carry the gateway's user ids as `sub`; their accounts are linked to the provisioned users (beforeAll). */
const OP_ACCOUNTS = {
  alice: { sub: 'u-alice', password: 'alice-password', claims: { name: 'Alice', email: 'alice@example.test' } },
};

/** The page that stands for another site (or another origin of the same site): no CSP, nothing in it. */
const ATTACKER_HTML = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Win a prize</title></head><body><h1>Win a prize</h1></body></html>';

let browser: Browser;
let host: RunningHost;
let upstream: RecordingUpstream;
let attacker: Server;
let attackerPort: number;
let op: TestOp;
/** users-file login, in front of the example host with policies/example.yaml. */
let passwordGateway: RunningGateway;
/** users-file login, in front of the recording upstream with the e2e policies (sees every forwarded request). */
let recordedGateway: RunningGateway;
/** oidc login at `op`, in front of the example host with policies/example.yaml. */
let oidcGateway: RunningGateway;
const contexts: BrowserContext[] = [];

/** A new browser context (its own cookie jar), closed in afterAll. */
async function newPage(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.setDefaultNavigationTimeout(10_000);
  return { context, page };
}

const screenshot = (page: Page, name: string): Promise<Buffer> => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });

/** The JSON document the page shows (Chromium renders a JSON answer as text in a `<pre>`). */
async function shownJson(page: Page): Promise<any> {
  return JSON.parse(await page.locator('pre').first().innerText());
}

/** `name`'s cookie in the context, as Chromium stored it for `url`. */
async function cookie(context: BrowserContext, url: string, name: string) {
  return (await context.cookies(url)).find((entry) => entry.name === name);
}

/** Runs `action` and resolves the response of the first request it causes for exactly `url` with `method`. */
async function responseTo(page: Page, method: string, url: string, action: () => Promise<unknown>): Promise<PageResponse> {
  const [response] = await Promise.all([page.waitForResponse((candidate) => candidate.url() === url && candidate.request().method() === method), action()]);
  return response;
}

/** Runs an inline script the way a page would (a new `<script>` element); true when the browser executed it. */
const inlineScriptRuns = (page: Page): Promise<boolean> =>
  page.evaluate(() => {
    const script = document.createElement('script');
    script.textContent = 'document.documentElement.dataset.injected = "ran";';
    document.head.append(script);
    return document.documentElement.dataset.injected === 'ran';
  });

/**
 * Submits a form (POST, urlencoded `name=…`) to `action` from whatever page `page` shows, as a page would, and
 * waits until the browser shows the answer.
 */
const submitForm = async (page: Page, action: string): Promise<void> => {
  await page.evaluate((target) => {
    const form = document.createElement('form');
    form.method = 'POST';
    form.action = target;
    const input = document.createElement('input');
    input.name = 'name';
    input.value = 'planted by another site';
    form.append(input);
    document.body.append(form);
    form.submit();
  }, action);
  await page.waitForURL(action);
};

/** The users-file login page, from the redirect of a protected page to the page itself. */
async function passwordLogin(page: Page, gw: string, username: string, password: string): Promise<void> {
  await page.goto(`${gw}/api/whoami`);
  await page.waitForURL((url) => url.pathname === '/iam/login');
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${gw}/api/whoami`);
}

/** The OP's login page is showing (an interaction of `op`, with its form). */
async function expectOpLoginPage(page: Page): Promise<void> {
  await page.waitForURL((url) => url.origin === op.issuer && url.pathname.startsWith('/interaction/'));
  await expect(page.locator('input[name=login]').isVisible()).resolves.toBe(true);
}

/** A whole OIDC login in Chromium: a protected page, the OP's form, back on the page. */
async function oidcLogin(page: Page, gw: string, name?: string): Promise<void> {
  await page.goto(`${gw}/api/whoami`);
  await expectOpLoginPage(page);
  if (name) await screenshot(page, name);
  await page.locator('input[name=login]').fill('alice');
  await page.locator('input[name=password]').fill(OP_ACCOUNTS.alice.password);
  await page.locator('#sign-in').click();
  await page.waitForURL(`${gw}/api/whoami`);
}

describeInBrowser('in Chromium', () => {
  let oidcPort: number;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    // An empty, migrated database for the three gateways (they share it, as instances of one deployment would).
    await (await createTestDatabase()).close();
    oidcPort = await freePort();
    const oidcBase = `http://127.0.0.1:${oidcPort}`;
    [browser, host, upstream, op] = await Promise.all([
      launchBrowser(),
      startHost(0),
      startRecordingUpstream(),
      startTestOp({
        clients: [
          {
            client_id: CLIENT.id,
            client_secret: CLIENT.secret,
            redirect_uris: [`${oidcBase}/iam/auth/oidc/callback`],
            post_logout_redirect_uris: [`${oidcBase}/`],
            backchannel_logout_uri: `${oidcBase}/iam/auth/oidc/backchannel-logout`,
            backchannel_logout_session_required: true,
            grant_types: ['authorization_code'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        accounts: OP_ACCOUNTS,
      }),
    ]);
    attacker = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(ATTACKER_HTML);
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    attackerPort = (attacker.address() as AddressInfo).port;
    passwordGateway = await startTestGateway(host.url, { ...PLAIN_HTTP, IAM_POLICIES_DIR: EXAMPLE_POLICIES });
    recordedGateway = await startTestGateway(upstream.url, { ...PLAIN_HTTP, IAM_POLICIES_DIR: E2E_POLICIES });
    oidcGateway = await startTestGateway(host.url, {
      ...PLAIN_HTTP,
      PORT: String(oidcPort),
      IAM_POLICIES_DIR: EXAMPLE_POLICIES,
      IAM_AUTHENTICATOR_TYPE: 'oidc',
      IAM_OIDC_ISSUER: op.issuer,
      IAM_OIDC_CLIENT_ID: CLIENT.id,
      IAM_OIDC_CLIENT_SECRET: CLIENT.secret,
      IAM_OIDC_REDIRECT_URI: `${oidcBase}/iam/auth/oidc/callback`,
      IAM_OIDC_POST_LOGOUT_REDIRECT_URI: `${oidcBase}/`,
    });
    // u-alice exists (the example provisioning); her provider account joins her because an admin linked it.
    await oidcGateway.services!.repository.applyProvisioning({ users: [{ userId: 'u-alice', identities: [{ identityId: 'oidc:u-alice', identityDomain: op.issuer }] }] });
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(contexts.map((context) => context.close()));
    await browser?.close();
    await Promise.allSettled([passwordGateway?.close(), recordedGateway?.close(), oidcGateway?.close()]);
    await Promise.allSettled([
      host?.close(),
      upstream?.close(),
      op?.close(),
      attacker ? new Promise((resolve) => attacker.close(resolve)) : undefined,
    ]);
  });

  describe('the password login page', () => {
    it('sends a navigation without a session to the form, refuses a wrong password, signs in to returnTo with an HttpOnly SameSite=Lax cookie', async () => {
      const gw = passwordGateway.url;
      const { context, page } = await newPage();
      const loginPage = await responseTo(page, 'GET', `${gw}/iam/login?returnTo=%2Fapi%2Fwhoami`, () => page.goto(`${gw}/api/whoami`));
      expect(loginPage.status()).toBe(200);
      expect(new URL(page.url()).pathname).toBe('/iam/login');
      expect(new URL(page.url()).searchParams.get('returnTo')).toBe('/api/whoami');
      await expect(page.locator('input[type=hidden][name=returnTo]').inputValue()).resolves.toBe('/api/whoami');
      await screenshot(page, 'login-page');

      // A wrong password: the form again, with the error announced, still on /iam/login, nothing stored.
      await page.getByLabel('Username').fill('alice');
      await page.getByLabel('Password').fill('not-her-password');
      const refused = await responseTo(page, 'POST', `${gw}/iam/login`, () => page.getByRole('button', { name: 'Sign in' }).click());
      expect(refused.status()).toBe(401);
      await expect(page.getByRole('alert').isVisible()).resolves.toBe(true);
      expect((await page.getByRole('alert').innerText()).trim()).not.toBe('');
      expect(new URL(page.url()).pathname).toBe('/iam/login');
      expect(await cookie(context, gw, 'iam-session')).toBeUndefined();
      await screenshot(page, 'login-page-error');

      // The right one: 303 back to the page first asked for (returnTo survived the failed attempt).
      await page.getByLabel('Password').fill('alice-password');
      const accepted = await responseTo(page, 'POST', `${gw}/iam/login`, () => page.getByRole('button', { name: 'Sign in' }).click());
      expect(accepted.status()).toBe(303);
      await page.waitForURL(`${gw}/api/whoami`);
      const whoami = await shownJson(page);
      expect(whoami.headers['x-iam-user-id']).toBe('u-alice');
      expect(whoami.identity).toMatchObject({ userId: 'u-alice', profileId: 'p-alice-editor' });
      await screenshot(page, 'whoami');

      const session = await cookie(context, gw, 'iam-session');
      expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: false, path: '/', expires: -1 });
      expect(session!.value).toMatch(/^iamt_/);
      // HttpOnly: the page's script cannot read it.
      const visible = await page.evaluate(() => document.cookie);
      expect(visible).not.toContain('iam-session');
      expect(visible).not.toContain(session!.value);
    });

    it('has no script, and its CSP stops any inline script (a page without that CSP runs it)', async () => {
      const gw = passwordGateway.url;
      const { page } = await newPage();
      const answer = await page.goto(`${gw}/iam/login?returnTo=%2Fapi%2Fprojects`);
      expect(answer!.status()).toBe(200);
      expect(answer!.headers()['content-security-policy']).toBe("default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'");
      expect(await page.evaluate(() => document.scripts.length)).toBe(0);
      expect(await inlineScriptRuns(page)).toBe(false);
      // The same injection on a page without CSP runs: the check above can fail.
      await page.goto(`http://127.0.0.1:${attackerPort}/`);
      expect(await inlineScriptRuns(page)).toBe(true);
    });
  });

  describe('a denial', () => {
    it('is an HTML page naming the failed step and the decision id, which the user can look up', async () => {
      const gw = passwordGateway.url;
      const { page } = await newPage();
      await passwordLogin(page, gw, 'alice', 'alice-password');
      const denied = await page.goto(`${gw}/api/admin/stats`);
      expect(denied!.status()).toBe(403);
      expect(denied!.headers()['content-type']).toBe('text/html; charset=utf-8');
      await expect(page.getByText('Decision id', { exact: true }).isVisible()).resolves.toBe(true);
      await expect(page.getByText('PERMISSION_DENIED', { exact: true }).isVisible()).resolves.toBe(true);
      await screenshot(page, 'denied-403');
      const decisionId = (await page.locator('dt:text-is("Decision id") + dd').innerText()).trim();
      const requestId = (await page.locator('dt:text-is("Request id") + dd').innerText()).trim();
      expect(requestId).toBe(denied!.headers()['x-request-id']);
      // The id is the real decision: alice may read it with her cookie.
      const decision = await page.goto(`${gw}/iam/authorization/decisions/${encodeURIComponent(decisionId)}`);
      expect(decision!.status()).toBe(200);
      expect(JSON.stringify(await decision!.json())).toContain('PERMISSION_DENIED');
    });
  });

  describe('CSRF', () => {
    it('a form posted from another site, or from another origin of the same site, never reaches the host; the same origin does', async () => {
      const gw = recordedGateway.url;
      const { context, page } = await newPage();
      await passwordLogin(page, gw, 'alice', 'alice-password');
      const session = await cookie(context, gw, 'iam-session');
      expect(session).toBeDefined();
      await upstream.clear();

      // Another site (localhost is not 127.0.0.1): SameSite=Lax keeps the cookie home, so the POST is anonymous.
      await page.goto(`http://localhost:${attackerPort}/`);
      const crossSite = await responseTo(page, 'POST', `${gw}/api/projects`, () => submitForm(page, `${gw}/api/projects`));
      expect((await crossSite.request().allHeaders()).cookie ?? '').not.toContain('iam-session');
      expect(crossSite.status()).toBe(401);

      // Another origin of the same site (127.0.0.1, another port): Chromium sends the Lax cookie; the gateway
      // refuses the foreign Origin.
      await page.goto(`http://127.0.0.1:${attackerPort}/`);
      const sameSite = await responseTo(page, 'POST', `${gw}/api/projects`, () => submitForm(page, `${gw}/api/projects`));
      expect((await sameSite.request().allHeaders()).cookie ?? '').toContain(`iam-session=${session!.value}`);
      expect(sameSite.status()).toBe(403);
      // A browser gets the refusal (IAM_CSRF_REJECTED) as the gateway's HTML problem page.
      await expect(page.getByRole('heading', { name: 'Cross-site request refused' }).isVisible()).resolves.toBe(true);
      expect((await upstream.requests()).filter((seen) => seen.method === 'POST')).toEqual([]);

      // The control: a page of the gateway's own origin posting with the cookie is forwarded.
      await page.goto(`${gw}/health`);
      const status = await page.evaluate(
        async (url) => (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"mine"}' })).status,
        `${gw}/api/projects`,
      );
      expect(status).toBe(200);
      const posts = (await upstream.requests()).filter((seen) => seen.method === 'POST');
      expect(posts.map((seen) => [seen.url, recordedHeader(seen, 'x-iam-user-id')])).toEqual([['/api/projects', ['u-alice']]]);
      expect(recordedHeader(posts[0]!, 'cookie').join(';')).not.toContain('iam-session');
    });
  });

  describeWithRedis('two instances of one deployment (a shared Redis)', () => {
    let first: RunningGateway;
    let second: RunningGateway;

    beforeAll(async () => {
      // Same token store prefix and database: two instances behind one load balancer.
      const shared = { ...PLAIN_HTTP, IAM_POLICIES_DIR: EXAMPLE_POLICIES, IAM_TOKEN_STORE_PREFIX: uniquePrefix('browser-pair') };
      first = await startTestGateway(host.url, shared);
      second = await startTestGateway(host.url, shared);
    });
    afterAll(async () => {
      await Promise.allSettled([first?.close(), second?.close()]);
    });

    it('a session opened on one instance works on the other, and a logout on one ends it on the other', async () => {
      const { page } = await newPage();
      await passwordLogin(page, first.url, 'alice', 'alice-password');
      // Cookies ignore the port: the browser sends the same session to the second instance.
      await page.goto(`${second.url}/api/whoami`);
      expect((await shownJson(page)).headers['x-iam-user-id']).toBe('u-alice');
      // Log out on the first instance, the way a page of the application would (same-origin POST with the cookie).
      await page.goto(`${first.url}/api/whoami`);
      const status = await page.evaluate(async (url) => (await fetch(url, { method: 'POST', credentials: 'same-origin' })).status, `${first.url}/iam/auth/logout`);
      expect(status).toBe(204);
      await page.goto(`${second.url}/api/whoami`);
      expect(new URL(page.url()).pathname).toBe('/iam/login');
    });
  });

  describe('OpenID Connect', () => {
    const gw = (): string => oidcGateway.url;

    it('signs in at the provider and back; RP-initiated logout ends the session at both ends', async () => {
      const { context, page } = await newPage();
      await oidcLogin(page, gw(), 'op-login-page');
      const whoami = await shownJson(page);
      expect(whoami.headers['x-iam-user-id']).toBe('u-alice');
      expect(whoami.identity).toMatchObject({ userId: 'u-alice', profileId: 'p-alice-editor', identityDomain: op.issuer });
      await screenshot(page, 'oidc-whoami');
      expect(await cookie(context, gw(), 'iam-session')).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
      // A reload keeps the session: still the page, still alice, no trip to the provider.
      await page.reload();
      expect(new URL(page.url()).origin).toBe(gw());
      expect((await shownJson(page)).headers['x-iam-user-id']).toBe('u-alice');
      // The sealed state cookie is spent.
      expect(await cookie(context, gw(), 'iam-oidc')).toBeUndefined();

      await page.goto(`${gw()}/iam/auth/oidc/logout`);
      await page.waitForURL((url) => url.origin === op.issuer && url.pathname.startsWith('/session/end'));
      await screenshot(page, 'op-logout-confirm');
      await page.locator('#logout-yes').click();
      await page.waitForURL(`${gw()}/`);
      expect(await cookie(context, gw(), 'iam-session')).toBeUndefined();
      // No session here nor at the provider: the next protected page asks for the password again.
      await page.goto(`${gw()}/api/whoami`);
      await expectOpLoginPage(page);
    });

    it('a logout at the provider ends, by back-channel, the sessions of that provider session only', async () => {
      const a = await newPage();
      const b = await newPage();
      await oidcLogin(a.page, gw());
      const sessionA = (await shownJson(a.page)).headers['x-iam-session-id'];
      await oidcLogin(b.page, gw());
      const sessionB = (await shownJson(b.page)).headers['x-iam-session-id'];
      expect(sessionA).toBeTruthy();
      expect(sessionB).not.toBe(sessionA);

      // A signs out at the provider itself: the gateway only hears of it through the back-channel.
      const discovery = (await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json()) as { end_session_endpoint: string };
      await a.page.goto(`${discovery.end_session_endpoint}?client_id=${encodeURIComponent(CLIENT.id)}`);
      await a.page.locator('#logout-yes').click();
      await a.page.waitForURL((url) => url.origin === op.issuer && url.pathname.startsWith('/session/end/success'));
      // A still holds its cookie; the gateway has revoked the session behind it.
      expect(await cookie(a.context, gw(), 'iam-session')).toBeDefined();
      expect(op.output()).not.toMatch(/backchannel logout to .* failed/);
      await a.page.goto(`${gw()}/api/whoami`);
      await expectOpLoginPage(a.page);
      // The stale cookie was cleared on the way.
      expect(await cookie(a.context, gw(), 'iam-session')).toBeUndefined();

      await b.page.goto(`${gw()}/api/whoami`);
      expect(new URL(b.page.url()).origin).toBe(gw());
      const whoamiB = await shownJson(b.page);
      expect([whoamiB.headers['x-iam-user-id'], whoamiB.headers['x-iam-session-id']]).toEqual(['u-alice', sessionB]);
    });
  });
});
