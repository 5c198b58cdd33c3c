/**
 * Every request nobody authenticated that leads to a stored audit row is rate-limited (docs/threat-model.md, round 3):
 * anyone can send those requests, so 400 of them must not mean 400 rows. For each such path — an anonymous request
 * to a `mode: shadow` route (proxied and through forward-auth), to an undeclared route, a failed OpenID Connect
 * callback, failed password logins — 400 requests add at most the per-minute budget of rows plus one summary row
 * (counted in iam_audit_events); a CSRF refusal and a back-channel logout with a bad token add none. A callback
 * with a fresh state also writes a single-use mark to the token store: bounded by the login limiter per address. The
 * per-minute window runs on an injected clock (StartOptions.auditClock), moved instead of waited for.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { generateToken, hashToken } from '../../src/domain/token-hash';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/front-proxy';
import { startTestGateway } from '../support/gateway';
import { startTestOp, type TestOp } from '../support/oidc-op';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const POLICY = `version: 1
default: deny
routes:
  - { path: /health, methods: [GET], public: true }
  # Rolling out a permission nobody holds yet: a request without a session "would be denied" and goes through.
  - path: /api/reports/**
    methods: [GET, POST]
    permission: report:read
    mode: shadow
`;
/** iam.audit.anonymous-denials-per-minute here. */
const BUDGET = 10;
const REQUESTS = 400;
const CLIENT = { id: 'iam-gateway', secret: 'gateway-secret-for-tests' };

let dir: string;
let db: TestDatabase;
let upstream: RecordingUpstream;
let op: TestOp;
let password: RunningGateway;
let oidc: RunningGateway;
/** The audit trail's clock (both gateways): a minute passes when a test says so. */
let now = Date.now();
const clock = (): number => now;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iam-anonymous-audit-'));
  writeFileSync(join(dir, 'routes.yaml'), POLICY);
  db = await createTestDatabase();
  upstream = await startRecordingUpstream();
  const common = { IAM_POLICIES_DIR: dir, IAM_AUDIT_ANONYMOUS_DENIALS_PER_MINUTE: String(BUDGET), IAM_AUDIT_FLUSH_INTERVAL: '1h' };
  password = await startTestGateway(upstream.url, { ...common, IAM_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_ADDRESS: String(BUDGET) }, { auditClock: clock });
  const port = await freePort();
  op = await startTestOp({
    clients: [
      {
        client_id: CLIENT.id,
        client_secret: CLIENT.secret,
        redirect_uris: [`http://127.0.0.1:${port}/iam/auth/oidc/callback`],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
  });
  oidc = await startTestGateway(
    upstream.url,
    {
      ...common,
      PORT: String(port),
      IAM_AUTHENTICATOR_TYPE: 'oidc',
      IAM_OIDC_ISSUER: op.issuer,
      IAM_OIDC_CLIENT_ID: CLIENT.id,
      IAM_OIDC_CLIENT_SECRET: CLIENT.secret,
      IAM_OIDC_REDIRECT_URI: `http://127.0.0.1:${port}/iam/auth/oidc/callback`,
      IAM_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_ADDRESS: String(BUDGET),
    },
    { auditClock: clock },
  );
}, 60_000);

afterAll(async () => {
  await password?.close();
  await oidc?.close();
  await op?.close();
  await upstream?.close();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function rows(where = 'true'): Promise<number> {
  const found = await db.orm.em.fork().execute<Array<{ n: number }>>(`select count(*)::int as n from iam_audit_events where ${where}`);
  return found[0]!.n;
}

/** The minute ends (its summary rows are due) and both trails write what they hold. */
async function minutePasses(): Promise<void> {
  now += 60_000;
  await password.services!.audit.flush();
  await oidc.services!.audit.flush();
}

/** Sends `REQUESTS` requests (a few at a time) and returns their statuses. */
async function flood(send: (i: number) => Promise<Response>): Promise<Set<number>> {
  const statuses = new Set<number>();
  for (let i = 0; i < REQUESTS; i += 20) {
    const answers = await Promise.all(Array.from({ length: 20 }, (_, j) => send(i + j)));
    for (const answer of answers) {
      statuses.add(answer.status);
      await answer.arrayBuffer();
    }
  }
  return statuses;
}

/** What the trail holds after a flood of one kind: at most the budget of rows plus one summary of the rest. */
async function expectBounded(before: number, action: string, kind: string): Promise<void> {
  await minutePasses();
  expect(await rows()).toBeLessThanOrEqual(before + BUDGET + 1);
  expect(await rows(`action = '${action}' and ${kind}`)).toBe(BUDGET);
  const summary = await db.orm.em.fork().execute<Array<{ details: { suppressed: number; perMinute: number } }>>(`select details from iam_audit_events where action = '${action}.suppressed'`);
  expect(summary.map((row) => row.details)).toEqual([expect.objectContaining({ suppressed: REQUESTS - BUDGET, perMinute: BUDGET })]);
}

beforeEach(async () => {
  // Each test starts in a fresh minute with an empty trail.
  await minutePasses();
  await db.orm.em.fork().execute('truncate table iam_audit_events');
});

describe('unauthenticated requests that are audited write at most the per-minute budget of rows', () => {
  it('an anonymous request to a mode: shadow route (passed through, "would deny")', async () => {
    const before = await rows();
    expect(await flood((i) => fetch(`${password.url}/api/reports/${i}`))).toEqual(new Set([200]));
    await expectBounded(before, 'authz.shadow_deny', "target_id like 'GET /api/reports/%'");
  });

  it('the same through forward-auth', async () => {
    const before = await rows();
    const check = (i: number): Promise<Response> => fetch(`${password.url}/iam/authorization/forward-auth`, { headers: { 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': `/api/reports/fa-${i}` } });
    expect(await flood(check)).toEqual(new Set([200]));
    await expectBounded(before, 'authz.shadow_deny', "target_id like 'GET /api/reports/fa-%'");
  });

  it('an anonymous request to a route no policy declares', async () => {
    const before = await rows();
    expect(await flood((i) => fetch(`${password.url}/scan/${i}`))).toEqual(new Set([403]));
    await expectBounded(before, 'authz.deny', "target_id like 'GET /scan/%'");
  });

  it('a failed OpenID Connect callback (no or a foreign state cookie)', async () => {
    const before = await rows();
    const callback = (i: number): Promise<Response> => fetch(`${oidc.url}/iam/auth/oidc/callback?code=c-${i}&state=s-${i}`, { redirect: 'manual' });
    expect(await flood(callback)).toEqual(new Set([400]));
    await expectBounded(before, 'auth.login.failed', "details->>'authenticator' = 'oidc'");
  });

  it('failed password logins: bounded by the login limiter per client address (iam.login.rate-limit.max-failures-per-address)', async () => {
    const before = await rows();
    const attempt = (i: number): Promise<Response> =>
      fetch(`${password.url}/iam/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: `nobody-${i}`, password: 'guess', clientType: 'WEB' }),
      });
    expect(await flood(attempt)).toEqual(new Set([401, 429]));
    await minutePasses();
    expect(await rows()).toBeLessThanOrEqual(before + BUDGET);
    expect(await rows("action = 'auth.login.failed'")).toBe(BUDGET);
  });

  it('a callback with a fresh state (anyone can start a login): the single-use marks it stores are bounded per client address; a login that succeeds gives its unit back', async () => {
    const begin = async (): Promise<{ url: string; state: string; cookie: string }> => {
      const started = await fetch(`${oidc.url}/iam/auth/oidc/login`, { redirect: 'manual' });
      const url = started.headers.get('location')!;
      const cookie = started.headers.getSetCookie().map((line) => line.split(';')[0]!).find((pair) => pair.includes('iam-oidc='))!;
      return { url, state: new URL(url).searchParams.get('state')!, cookie };
    };
    // Real logins first: each takes a unit of the address and gives it back.
    for (let i = 0; i < 3; i++) {
      const { url, cookie } = await begin();
      const callback = await op.loginThrough(url, 'alice', 'alice-password', `${oidc.url}/iam/auth/oidc/callback`);
      expect((await fetch(callback, { redirect: 'manual', headers: { cookie } })).status).toBe(303);
    }
    const states: string[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < 3 * BUDGET; i++) {
      const { state, cookie } = await begin();
      states.push(state);
      const answer = await fetch(`${oidc.url}/iam/auth/oidc/callback?code=forged-${i}&state=${encodeURIComponent(state)}`, { redirect: 'manual', headers: { cookie } });
      statuses.push(answer.status);
      await answer.arrayBuffer();
    }
    expect(statuses.filter((status) => status === 429)).toHaveLength(2 * BUDGET);
    // Which states were marked used (a second take of the single-use counter is refused only for those).
    const store = oidc.services!.store;
    let marked = 0;
    for (const state of states) if (!(await store.takeCounters([`oidc-state:${hashToken(state)}`], [1], 60_000)).allowed) marked++;
    expect(marked).toBe(BUDGET);
  });

  it('a CSRF refusal and a back-channel logout with a bad token write nothing', async () => {
    const before = await rows();
    // A well-formed (unknown) session cookie sent cross-site: refused before the token is even looked up.
    const crossSite = (i: number): Promise<Response> =>
      fetch(`${password.url}/api/reports/${i}`, { method: 'POST', headers: { cookie: `__Host-iam-session=${generateToken()}`, 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' } });
    expect(await flood(crossSite)).toEqual(new Set([403]));
    const logout = (i: number): Promise<Response> =>
      fetch(`${oidc.url}/iam/auth/oidc/backchannel-logout`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `logout_token=not.a.jwt${i}` });
    expect(await flood(logout)).toEqual(new Set([400]));
    await minutePasses();
    expect(await rows()).toBe(before);
  });
});
