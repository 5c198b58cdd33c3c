/**
 * What a caller's own questions may cost the hosts' resolvers (docs/host-integration.md, "Limits and errors";
 * docs/threat-model.md, "One caller's fan-out against a shared backend"), through a real gateway and a resolver host
 * that holds the answers for `slow-…` ids until the test lets them go: one caller flooding check calls never makes
 * another user's proxied requests fail; each call and each caller is bounded whatever the credential (their own
 * bearer, an X-IAM-Assertion, a service naming a subject), and diagnostics too; over a bound the result is 429
 * RESOLUTION_BUDGET_EXCEEDED without a resolver request, and iam_caller_resolutions_refused_total counts it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { bearer, login, startTestGateway } from '../support/gateway';
import { recordedHeader, startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { answerScope, startResolverHost, type ResolverHost } from '../support/resolver-host';
import { metricDelta, metricValue } from '../support/scrape';
import { until } from '../support/wait';

let dir: string;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let resolver: ResolverHost;
/** Every id the resolver host was asked for, and the answers it holds back. */
const asked: string[] = [];
const held: ServerResponse[] = [];

/** Answers every held request: task → project 1. */
function releaseHeld(): void {
  for (const res of held.splice(0)) answer(res);
}
function answer(res: ServerResponse): void {
  if (!res.destroyed) answerScope(res, 'PROJECT', '1');
}

beforeAll(async () => {
  await (await createTestDatabase()).close();
  resolver = await startResolverHost((id, res) => {
    asked.push(id);
    if (id.startsWith('slow-')) held.push(res);
    else answer(res);
  });
  dir = mkdtempSync(join(tmpdir(), 'iam-caller-resolutions-'));
  mkdirSync(join(dir, 'policies'));
  // A long resolver timeout: the held answers must outlast the test's own steps, never time out under it.
  writeFileSync(
    join(dir, 'policies', 'routes.yaml'),
    `version: 1
default: deny
resources:
  TASK:
    resolver: { url: "${resolver.origin}/tasks/{id}", timeout: 20s }
routes:
  - { path: /api/projects, methods: [GET], permission: project:list }
  - { path: /api/tasks/:taskId, methods: [GET], permission: task:read, resource: { type: TASK, id: taskId, access: READ } }
`,
  );
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, {
    IAM_POLICIES_DIR: join(dir, 'policies'),
    IAM_FORWARD_ASSERTION_ENABLED: 'true',
    IAM_FORWARD_ASSERTION_AUDIENCE: 'example-host',
  });
}, 60_000);

afterAll(async () => {
  releaseHeld();
  await gateway?.close();
  await upstream?.close();
  await resolver?.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  asked.length = 0;
});
afterEach(() => {
  releaseHeld();
});

interface CheckResult {
  allowed: boolean;
  status: number;
  failedStep: string | null;
}

const task = (id: string) => ({ permissionCode: 'task:read', resource: { type: 'TASK', id, access: 'READ' as const } });
const tasks = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => task(`${prefix}-${i}`));

async function check(headers: Record<string, string>, checks: unknown[], subject?: unknown): Promise<CheckResult[]> {
  const response = await fetch(`${gateway.url}/iam/authorization/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ checks, ...(subject ? { subject } : {}) }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { results: CheckResult[] }).results;
}

const overBudget = (results: CheckResult[]) => results.filter((result) => result.failedStep === 'RESOLUTION_BUDGET_EXCEEDED');
const refused = (reason: 'per_call' | 'per_caller') => metricValue(gateway.managementUrl, 'iam_caller_resolutions_refused_total', { reason });
const refusedTotal = async () => (await refused('per_call')) + (await refused('per_caller'));
const refusedDelta = (reason: 'per_call' | 'per_caller', event: () => Promise<unknown>) =>
  metricDelta(gateway.managementUrl, 'iam_caller_resolutions_refused_total', { reason }, event);

/** The assertion the host receives with a request the gateway forwarded for `token`. */
async function assertionFor(token: string): Promise<string> {
  await upstream.clear();
  expect((await fetch(`${gateway.url}/api/projects`, { headers: bearer(token) })).status).toBe(200);
  const [received] = await upstream.requests();
  return recordedHeader(received!, 'x-iam-assertion')[0]!;
}

describe('one caller flooding check calls', () => {
  it("leaves another user's proxied requests answered (200, not 502), and is refused beyond its own budget", async () => {
    const bob = await login(gateway.url, 'bob'); // unscoped editor: task:read on every task
    const alice = await login(gateway.url, 'alice'); // task:read on project 1's tasks
    const [totalBefore, perCallBefore] = [await refusedTotal(), await refused('per_call')];
    const flood = Array.from({ length: 10 }, (_, call) => check(bearer(bob.accessToken), tasks(`slow-flood${call}`, 100)));
    await until("bob's resolutions held by the resolver host", () => held.length >= 32);
    // While they wait, another user's requests on the same resolver are decided as always.
    const others = await Promise.all(Array.from({ length: 20 }, () => fetch(`${gateway.url}/api/tasks/5`, { headers: bearer(alice.accessToken) })));
    expect(others.map((response) => response.status)).toEqual(Array(20).fill(200));
    // Every call decided: bob's first 32 resolutions wait, all 968 others were refused without a request.
    await until('the 968 resolutions over bob\'s budget refused', async () => (await refusedTotal()) - totalBefore >= 968);
    expect(held).toHaveLength(32);
    releaseHeld();
    const results = (await Promise.all(flood)).flat();
    expect(overBudget(results)).toHaveLength(1000 - 32);
    for (const refused of overBudget(results)) expect([refused.allowed, refused.status]).toEqual([false, 429]);
    expect(results.filter((result) => result.allowed)).toHaveLength(32);
    expect(asked.filter((id) => id.startsWith('slow-'))).toHaveLength(32);
    // Positions 21–100 of each call are over the call's bound, whatever else is in flight.
    expect((await refused('per_call')) - perCallBefore).toBe(800);
  }, 90_000);
});

describe('the bound per call', () => {
  it('applies to each credential: own bearer, the X-IAM-Assertion sent back, a service naming a subject; counted per_call', async () => {
    const alice = await login(gateway.url, 'alice');
    const admin = await login(gateway.url, 'admin'); // holds iam.authorization.decisions:check
    const assertion = await assertionFor(alice.accessToken);
    const callers: Array<[string, () => Promise<CheckResult[]>]> = [
      ['own bearer', () => check(bearer(alice.accessToken), tasks('own', 25))],
      ['assertion', () => check(bearer(assertion), tasks('assertion', 25))],
      ['subject', () => check(bearer(admin.accessToken), tasks('subject', 25), { userId: 'u-alice' })],
    ];
    for (const [credential, call] of callers) {
      let results: CheckResult[] = [];
      expect([credential, await refusedDelta('per_call', async () => (results = await call()))]).toEqual([credential, 5]);
      // The first 20 distinct resources are resolved; the last 5 are refused without a resolver request.
      expect([credential, results.slice(0, 20).every((result) => result.allowed), overBudget(results.slice(20)).length]).toEqual([credential, true, 5]);
      expect(results.slice(20).every((result) => result.status === 429)).toBe(true);
    }
    expect(asked.sort()).toEqual([...tasks('own', 20), ...tasks('assertion', 20), ...tasks('subject', 20)].map((one) => one.resource.id).sort());
  });

  it('counts distinct resources: a resource named again costs nothing', async () => {
    const alice = await login(gateway.url, 'alice');
    const twenty = tasks('distinct', 20);
    const results = await check(bearer(alice.accessToken), [...twenty, ...twenty.slice(0, 10), ...twenty.slice(5, 15)]);
    expect(overBudget(results)).toEqual([]);
    expect(asked).toHaveLength(20);
  });
});

describe('the bound per caller', () => {
  it("spans the caller's concurrent calls, credentials and diagnostics; other callers keep their own; it is given back", async () => {
    const alice = await login(gateway.url, 'alice');
    const bob = await login(gateway.url, 'bob');
    const assertion = await assertionFor(alice.accessToken);
    let first: Promise<CheckResult[]> | undefined;
    let second: Promise<CheckResult[]> | undefined;
    let bobs: Promise<CheckResult[]> | undefined;
    let diagnosed: { status: number; failedStep: string | null } | undefined;
    const perCaller = await refusedDelta('per_caller', async () => {
      first = check(bearer(alice.accessToken), tasks('slow-first', 20));
      await until("alice's first call's 20 resolutions held", () => held.length >= 20);
      // Her assertion is her: 12 more fit in her 32, the last 8 of this call are refused.
      second = check(bearer(assertion), tasks('slow-second', 20));
      await until("alice's 32 resolutions held", () => held.length >= 32);
      // Her diagnostics spend the same budget.
      const response = await fetch(`${gateway.url}/iam/authorization/diagnostics`, {
        method: 'POST',
        headers: { ...bearer(alice.accessToken), 'content-type': 'application/json' },
        body: JSON.stringify({ permissionCode: 'task:read', resourceType: 'TASK', resourceId: 'slow-diagnostics', scopeAccess: 'READ' }),
      });
      expect(response.status).toBe(200);
      diagnosed = (await response.json()) as { status: number; failedStep: string | null };
      // Bob is another caller: his budget is his own.
      bobs = check(bearer(bob.accessToken), tasks('slow-bob', 20));
      await until("bob's 20 resolutions held beside alice's 32", () => held.length >= 52);
      releaseHeld();
      await Promise.all([first, second, bobs]);
    });
    expect(diagnosed).toMatchObject({ status: 429, failedStep: 'RESOLUTION_BUDGET_EXCEEDED' });
    expect(overBudget(await first!)).toEqual([]);
    const secondResults = await second!;
    expect(secondResults.map((result) => result.failedStep === 'RESOLUTION_BUDGET_EXCEEDED')).toEqual([...Array(12).fill(false), ...Array(8).fill(true)]);
    expect(overBudget(await bobs!)).toEqual([]);
    expect(perCaller).toBe(8 + 1);
    expect(asked).not.toContain('slow-diagnostics');
    // Answered, the resolutions give their budget back.
    expect(overBudget(await check(bearer(alice.accessToken), tasks('after', 20)))).toEqual([]);
  }, 60_000);
});
