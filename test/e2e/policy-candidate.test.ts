/**
 * A candidate policy (`iam.policy.candidate-dir`, docs/policy-changes.md) deciding beside the live one on real
 * traffic through a gateway in front of the example host: divergences in `iam_policy_candidate_divergences_total`,
 * in the access log (`candidate: {decision, step, route}`), in `GET /iam/admin/policy` and on the console's Policy
 * page (Chromium), with links to Explain; what the client gets never changes; a broken or vanished candidate is
 * logged and shown, the last good one kept, readiness and live traffic untouched; a gateway starts with a broken one.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import type { Browser } from 'playwright-core';
import { startHost, type RunningHost } from '../../examples/host/server';
import { startGateway, type RunningGateway } from '../../src/app/start-gateway';
import { createLogger } from '../../src/observability/logger';
import { chromiumAvailable, launchBrowser } from '../support/browser';
import { createTestDatabase } from '../support/database';
import { notRun } from '../support/env';
import { bearer, login, ROOT, testConfig } from '../support/gateway';
import { startGatewayProcess } from '../support/gateway-process';
import { metricValue } from '../support/scrape';
import { until } from '../support/wait';

const FIXTURES = join(ROOT, 'test', 'fixtures', 'console');
const SHIPPED_TEXT = readFileSync(join(ROOT, 'policies', 'example.yaml'), 'utf8');
/**
 * The example policy without its list's `filter`: forward-auth refuses a filtered list to a scoped user (the proxy in
 * front would pass the whole list), and this file is about what a candidate decides, not about filtering.
 */
const LIVE_TEXT = SHIPPED_TEXT.replace('permission: project:list, filter: { type: PROJECT, id: /id, items: /projects } }', 'permission: project:list }');

/** The example policy with three changes: one wider, two narrower (one of them only in the resource's access). */
function candidateText(): string {
  const changed = LIVE_TEXT.replace('{ methods: [GET], path: "", permission: project:list }', '{ methods: [GET], path: "", permission: project:create }')
    .replace('path: /api/admin/**\n    methods: ["*"]\n    permission: admin:write', 'path: /api/admin/**\n    methods: ["*"]\n    permission: project:read')
    .replace('{ methods: [GET], path: /:projectId, resource: { type: PROJECT, id: projectId, access: READ } }', '{ methods: [GET], path: /:projectId, resource: { type: PROJECT, id: projectId, access: WRITE } }');
  expect(LIVE_TEXT).not.toBe(SHIPPED_TEXT);
  expect(changed.split('\n').filter((line, index) => line !== LIVE_TEXT.split('\n')[index])).toHaveLength(3);
  return changed;
}

let root: string;
let host: RunningHost;
let gateway: RunningGateway;
const accessLines: Array<Record<string, unknown>> = [];
const logs: Array<{ level: number; msg: string }> = [];
let alice: Record<string, string>;
let admin: Record<string, string>;

async function start(candidateDir: string): Promise<RunningGateway> {
  const config = testConfig(host.url, {
    IAM_POLICIES_DIR: join(root, 'live'),
    IAM_POLICY_CANDIDATE_DIR: candidateDir,
    IAM_POLICY_DEBOUNCE: '50ms',
    IAM_POLICY_POLL_INTERVAL: '200ms',
    IAM_ACCESS_LOG: 'denied',
    IAM_SESSION_COOKIE_SECURE: 'false',
    IAM_AUTHENTICATOR_PATH: join(FIXTURES, 'users.yaml'),
    IAM_PROVISION_FILE: join(FIXTURES, 'provision.yaml'),
  });
  const destination: DestinationStream = { write: (chunk: string) => void accessLines.push(...chunk.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)) };
  const logger = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line)) });
  return startGateway(config, { logger, accessLogDestination: destination });
}

beforeAll(async () => {
  await (await createTestDatabase()).close();
  root = mkdtempSync(join(tmpdir(), 'iam-candidate-'));
  cpSync(join(ROOT, 'policies'), join(root, 'live'), { recursive: true });
  cpSync(join(ROOT, 'policies'), join(root, 'candidate'), { recursive: true });
  writeFileSync(join(root, 'live', 'example.yaml'), LIVE_TEXT);
  writeFileSync(join(root, 'candidate', 'example.yaml'), candidateText());
  host = await startHost(0);
  gateway = await start(join(root, 'candidate'));
  // MOBILE: her reader profile (READ on project 1, no project:create) is the one active.
  alice = bearer((await login(gateway.url, 'alice', 'alice-password', 'MOBILE')).accessToken);
  admin = bearer((await login(gateway.url, 'admin', 'admin-password', 'API')).accessToken);
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await host?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const status = async (path: string, headers: Record<string, string> = alice): Promise<number> => (await fetch(`${gateway.url}${path}`, { headers })).status;
const forwardAuth = async (uri: string, headers: Record<string, string> = alice): Promise<number> =>
  (await fetch(`${gateway.url}/iam/authorization/forward-auth`, { headers: { ...headers, 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': uri } })).status;
const divergences = (live: string, candidate: string): Promise<number> => metricValue(gateway.managementUrl, 'iam_policy_candidate_divergences_total', { live, candidate });
const policyView = async (): Promise<PolicyView> => {
  const answer = await fetch(`${gateway.url}/iam/admin/policy`, { headers: admin });
  expect(answer.status).toBe(200);
  return (await answer.json()) as PolicyView;
};

interface PolicyView {
  hash: string;
  candidate: {
    dir: string;
    loaded: { hash: string; routes: number } | null;
    lastError: { issues: Array<{ message: string; file: string | null }> } | null;
    divergences: {
      total: number;
      routes: Array<{ routeId: string | null; route: string | null; allowToDeny: number; denyToAllow: number; unknown: number; examples: Array<{ path: string; userId: string | null; live: { decisionId: string } }> }>;
    } | null;
  } | null;
}

describe('a candidate policy on real traffic', () => {
  it('never changes an answer; divergences are counted, logged with `candidate`, and listed per route', async () => {
    const before = { narrower: await divergences('allow', 'deny'), wider: await divergences('deny', 'allow') };
    // What the live policy answers, whatever the candidate thinks.
    expect([await status('/api/projects'), await status('/api/projects/1'), await status('/api/admin/stats'), await status('/health', {})]).toEqual([200, 200, 403, 200]);
    expect([await forwardAuth('/api/projects'), await forwardAuth('/api/admin/stats')]).toEqual([200, 403]);

    // Two narrower on the proxy (list, and project 1 now needs WRITE: the live resolution reused), one by forward-auth.
    expect((await divergences('allow', 'deny')) - before.narrower).toBe(3);
    expect((await divergences('deny', 'allow')) - before.wider).toBe(2);

    // The access log (mode `denied`): every divergence has its line, allowed requests included; agreeing requests none.
    // (An allowed request's line is written when its response has ended.)
    const candidates = await until('five candidate lines', () => {
      const lines = accessLines.filter((line) => line.candidate !== undefined);
      return lines.length >= 5 ? lines : null;
    });
    const summary = candidates.map((line) => `${line.method as string} ${line.path as string} ${line.status as number} ${line.decision as string} → ${JSON.stringify(line.candidate)}`);
    expect(summary).toEqual([
      'GET /api/projects 200 allow → {"decision":"deny","step":"PERMISSION_DENIED","route":"/api/projects"}',
      'GET /api/projects/1 200 allow → {"decision":"deny","step":"SCOPE_DENIED","route":"/api/projects/:projectId"}',
      'GET /api/admin/stats 403 deny → {"decision":"allow","step":null,"route":"/api/admin/**"}',
      'GET /api/projects 200 allow → {"decision":"deny","step":"PERMISSION_DENIED","route":"/api/projects"}',
      'GET /api/admin/stats 403 deny → {"decision":"allow","step":null,"route":"/api/admin/**"}',
    ]);
    expect(accessLines.some((line) => line.path === '/health')).toBe(false);
  });

  it('GET /iam/admin/policy shows the candidate and its divergences per route, with examples', async () => {
    const view = await policyView();
    expect(view.candidate).toMatchObject({ dir: join(root, 'candidate'), lastError: null });
    expect(view.candidate!.loaded!.hash).not.toBe(view.hash);
    const routes = view.candidate!.divergences!.routes;
    // Proxy and forward-auth alike.
    expect(routes.find((route) => route.route === '/api/admin/**')).toMatchObject({ denyToAllow: 2, allowToDeny: 0, routeId: expect.stringMatching(/^example\.yaml:\d+$/) });
    expect(routes.find((route) => route.route === '/api/projects/:projectId')).toMatchObject({ allowToDeny: 1 });
    const list = routes.find((route) => route.route === '/api/projects')!;
    expect(list).toMatchObject({ allowToDeny: 2, denyToAllow: 0 });
    expect(list.examples[0]).toMatchObject({ path: '/api/projects', userId: 'u-alice' });
    // Readiness does not depend on the candidate (nor name it).
    const ready = await fetch(`${gateway.managementUrl}/health/ready`);
    expect(ready.status).toBe(200);
    expect(Object.keys(((await ready.json()) as { checks: object }).checks)).not.toContain('candidate');
  });

  it('a broken candidate file: logged and shown, the last good candidate keeps deciding, live traffic untouched', async () => {
    const good = (await policyView()).candidate!.loaded!.hash;
    const failures = await metricValue(gateway.managementUrl, 'iam_policy_candidate_reloads_total', { result: 'failure' });
    writeFileSync(join(root, 'candidate', 'broken.yaml'), 'version: 1\nroutes:\n  - path: /x\n    methods: [NOPE]\n');
    const view = await until('the broken candidate is reported', async () => {
      const seen = await policyView();
      return seen.candidate?.lastError ? seen : null;
    });
    expect(view.candidate!.loaded!.hash).toBe(good);
    expect(view.candidate!.lastError!.issues.some((issue) => issue.file === 'broken.yaml')).toBe(true);
    expect(await metricValue(gateway.managementUrl, 'iam_policy_candidate_reloads_total', { result: 'failure' })).toBeGreaterThan(failures);
    expect(await metricValue(gateway.managementUrl, 'iam_policy_reloads_total', { result: 'failure' })).toBe(0);
    expect(logs.some((entry) => entry.level === 50 && entry.msg.startsWith('candidate policy: reload failed'))).toBe(true);
    // Live: the same answers; the last good candidate still diverges.
    const narrower = await divergences('allow', 'deny');
    expect([await status('/api/projects'), await status('/api/admin/stats'), await status('/health', {})]).toEqual([200, 403, 200]);
    expect(await divergences('allow', 'deny')).toBe(narrower + 1);
    expect((await fetch(`${gateway.managementUrl}/health/ready`)).status).toBe(200);

    // The directory vanishes: still the last good candidate, still reported.
    rmSync(join(root, 'candidate'), { recursive: true, force: true });
    await until('the missing directory is reported', async () => ((await policyView()).candidate?.lastError?.issues.length ?? 0) > 0 && !(await policyView()).candidate!.lastError!.issues.some((issue) => issue.file === 'broken.yaml'));
    expect((await policyView()).candidate!.loaded!.hash).toBe(good);
    expect(await status('/api/projects')).toBe(200);

    // Fixed (here: the live files themselves): the candidate now agrees, and a new candidate starts new counts.
    cpSync(join(root, 'live'), join(root, 'candidate'), { recursive: true });
    const fixed = await until('the fixed candidate loads', async () => {
      const seen = await policyView();
      return seen.candidate?.loaded?.hash === seen.hash && seen.candidate.lastError === null ? seen : null;
    });
    expect(fixed.candidate!.divergences).toMatchObject({ total: 0, routes: [] });
    const agreed = await divergences('allow', 'deny');
    expect(await status('/api/projects')).toBe(200);
    expect(await divergences('allow', 'deny')).toBe(agreed);
  });

  it('a gateway starts with a broken candidate: ready, serving, the candidate shown as not loaded', async () => {
    const broken = join(root, 'broken-candidate');
    cpSync(join(root, 'live'), broken, { recursive: true });
    writeFileSync(join(broken, 'bad.yaml'), 'version: 1\nroutes: [ { path: "/y", methods: [NOPE], public: true } ]\n');
    const other = await start(broken);
    try {
      expect((await fetch(`${other.managementUrl}/health/ready`)).status).toBe(200);
      const token = bearer((await login(other.url, 'admin', 'admin-password', 'API')).accessToken);
      expect((await fetch(`${other.url}/api/admin/stats`, { headers: token })).status).toBe(200);
      const view = (await (await fetch(`${other.url}/iam/admin/policy`, { headers: token })).json()) as PolicyView;
      expect(view.candidate).toMatchObject({ loaded: null, divergences: null });
      expect(view.candidate!.lastError!.issues.some((issue) => issue.file === 'bad.yaml')).toBe(true);
      expect(await metricValue(other.managementUrl, 'iam_policy_candidate_routes')).toBe(0);
    } finally {
      await other.close();
    }
  });
});

describe('a gateway process with a candidate policy', () => {
  it('starts and serves (the candidate is loaded before the listeners, nothing else keeps the process alive yet)', async () => {
    const processEnv = { IAM_POLICIES_DIR: join(root, 'live'), IAM_POLICY_CANDIDATE_DIR: join(root, 'live'), IAM_AUTHENTICATOR_TYPE: 'users-file', IAM_AUTHENTICATOR_PATH: join(FIXTURES, 'users.yaml'), IAM_PROVISION_FILE: join(FIXTURES, 'provision.yaml') };
    const child = await startGatewayProcess(host.url, processEnv);
    try {
      expect((await fetch(`${child.managementUrl}/health/ready`)).status).toBe(200);
      expect(child.logs().some((line) => line.msg === 'candidate policy: deciding beside the live policy (never enforced)')).toBe(true);
      expect((await fetch(`${child.url}/health`)).status).toBe(200);
    } finally {
      await child.kill();
    }
  });
});

const runnable = chromiumAvailable();
if (!runnable) notRun('policy candidate: the console Policy page test (no /usr/bin/chromium; CI always has it)');
(runnable ? describe : describe.skip)('the console shows the candidate (Chromium)', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('the Policy page lists the divergences per route; an example opens Explain for that request', async () => {
    // A candidate that diverges again (the previous test made it agree).
    writeFileSync(join(root, 'candidate', 'example.yaml'), candidateText());
    await until('the diverging candidate loads', async () => {
      const seen = await policyView();
      return seen.candidate?.loaded?.hash !== seen.hash && seen.candidate?.lastError === null;
    });
    expect(await status('/api/admin/stats')).toBe(403);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(10_000);
      const faults: string[] = [];
      page.on('pageerror', (error) => faults.push(error.message));
      await page.goto(`${gateway.url}/iam/console/policy`);
      await page.waitForURL((url) => url.pathname === '/iam/login');
      await page.getByLabel('Username').fill('admin');
      await page.getByLabel('Password').fill('admin-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${gateway.url}/iam/console/policy`);
      const section = page.getByRole('region', { name: 'Candidate policy' });
      await section.waitFor();
      expect(await section.innerText()).toContain(join(root, 'candidate'));
      const table = page.getByRole('table', { name: 'Candidate divergences' });
      const row = table.getByRole('row').filter({ hasText: '/api/admin/**' });
      expect(await row.innerText()).toContain('0 allow → deny, 1 deny → allow');
      await page.screenshot({ path: join(ROOT, 'test-output', 'screenshots', 'console-policy-candidate.png'), fullPage: true });
      await page.getByRole('link', { name: /GET \/api\/admin\/stats/ }).first().click();
      await page.waitForURL((url) => url.pathname === '/iam/console/explain' && url.searchParams.get('path') === '/api/admin/stats');
      expect(new URL(page.url()).searchParams.get('userId')).toBe('u-alice');
      await expect(page.locator('ol.steps li').last().innerText()).resolves.toContain('PERMISSION_DENIED');
      expect(faults).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
