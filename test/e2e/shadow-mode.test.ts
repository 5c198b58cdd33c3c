/**
 * Shadow mode end to end (docs/policy-format.md): a `mode: shadow` route decides and records "would deny"
 * but lets the request through to the host; the audit trail keeps an `authz.shadow_deny` row with the
 * whole decision, and diagnostics show the same decision (`shadowed: true`, the failed step).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuthorizationDecision } from '../../src/authz/decision';
import type { RunningGateway } from '../../src/app/start-gateway';
import { type TestDatabase } from '../support/database';
import { bearer, login } from '../support/gateway';
import { startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { recordedHeader, type RecordingUpstream } from '../support/recording-upstream';

const POLICY = `version: 1
default: deny
routes:
  # Rolling out a new permission: nobody holds report:read yet, so enforcing it would lock everyone out.
  - path: /api/reports/**
    methods: [GET]
    permission: report:read
    mode: shadow
  # A shadow route the caller does hold the permission for: allowed, nothing to record.
  - path: /api/beta/projects
    methods: [GET]
    permission: project:list
    mode: shadow
  # The same permission enforced: a real denial.
  - path: /api/enforced/reports
    methods: [GET]
    permission: report:read
`;

let dir: string;
let db: TestDatabase;
let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let alice: Awaited<ReturnType<typeof login>>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'iam-shadow-'));
  await writeFile(join(dir, 'routes.yaml'), POLICY);
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: dir }, { keepDatabase: true });
  ({ upstream, gateway } = fixture);
  db = fixture.db!;
  alice = await login(gateway.url, 'alice');
});

afterAll(async () => {
  await fixture?.close();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => upstream.clear());

async function shadowRows(requestId: string): Promise<Array<{ action: string; outcome: string; actor_user_id: string; decision_id: string; target_id: string; details: { decision: AuthorizationDecision } }>> {
  await gateway.services!.audit.flush();
  return db.orm.em
    .fork()
    .execute(`select action, outcome, actor_user_id, decision_id, target_id, details from iam_audit_events where action = 'authz.shadow_deny' and request_id = ?`, [requestId]);
}

describe('a shadow route the user lacks the permission for', () => {
  let requestId: string;

  it('lets the request through to the host', async () => {
    const response = await fetch(`${gateway.url}/api/reports/q3?format=csv`, { headers: bearer(alice.accessToken) });
    expect(response.status).toBe(200);
    const [received] = await upstream.requests();
    expect(received).toMatchObject({ method: 'GET', url: '/api/reports/q3?format=csv' });
    // The host still learns who asked (the request is authenticated; only the permission is not enforced).
    expect(recordedHeader(received!, 'x-iam-user-id')).toEqual(['u-alice']);
    requestId = recordedHeader(received!, 'x-request-id')[0];
    expect(requestId).toBeTruthy();
  });

  it('records an authz.shadow_deny row with the whole decision', async () => {
    const rows = await shadowRows(requestId);
    expect(rows).toHaveLength(1);
    const [row] = rows;
    expect(row).toMatchObject({ action: 'authz.shadow_deny', outcome: 'shadow_denied', actor_user_id: 'u-alice', target_id: 'GET /api/reports/q3' });
    expect(row.details.decision).toMatchObject({
      decisionId: row.decision_id,
      allowed: true,
      shadowed: true,
      failedStep: 'PERMISSION_DENIED',
      permissionCode: 'report:read',
      route: { id: 'routes.yaml:5', mode: 'shadow' },
    });

    // The denied caller can fetch that decision by id, like any other of theirs.
    const byId = await fetch(`${gateway.url}/iam/authorization/decisions/${row.decision_id}`, { headers: bearer(alice.accessToken) });
    expect(byId.status).toBe(200);
    expect(await byId.json()).toMatchObject({ decisionId: row.decision_id, shadowed: true, failedStep: 'PERMISSION_DENIED' });
  });

  it('counts the shadow denial in iam_decisions_total', async () => {
    const text = await (await fetch(`${gateway.managementUrl}/metrics`)).text();
    expect(text).toMatch(/^iam_decisions_total\{result="shadow_deny",step="PERMISSION_DENIED"\} [1-9]/m);
  });

  it('shows shadowed: true and the failed step in diagnostics', async () => {
    const response = await fetch(`${gateway.url}/iam/authorization/diagnostics`, {
      method: 'POST',
      headers: { ...bearer(alice.accessToken), 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'GET', path: '/api/reports/q3' }),
    });
    expect(response.status).toBe(200);
    const decision = (await response.json()) as AuthorizationDecision;
    expect(decision).toMatchObject({ allowed: true, shadowed: true, failedStep: 'PERMISSION_DENIED', status: 403, route: { id: 'routes.yaml:5', mode: 'shadow' } });
    expect(decision.steps[decision.steps.length - 1]).toMatchObject({ code: 'PERMISSION_DENIED', passed: false });
    // Diagnostics only explain: nothing reached the host.
    expect(await upstream.requests()).toHaveLength(0);
  });
});

describe('compared with', () => {
  it('a shadow route the user holds the permission for: allowed, not shadowed, nothing recorded', async () => {
    const response = await fetch(`${gateway.url}/api/beta/projects`, { headers: bearer(alice.accessToken) });
    expect(response.status).toBe(200);
    const [received] = await upstream.requests();
    expect(await shadowRows(recordedHeader(received!, 'x-request-id')[0])).toEqual([]);
    const diagnostics = await fetch(`${gateway.url}/iam/authorization/diagnostics`, {
      method: 'POST',
      headers: { ...bearer(alice.accessToken), 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'GET', path: '/api/beta/projects' }),
    });
    expect(await diagnostics.json()).toMatchObject({ allowed: true, shadowed: false, failedStep: null });
  });

  it('the same permission enforced: 403 with the failed step, and the host sees nothing', async () => {
    const response = await fetch(`${gateway.url}/api/enforced/reports`, { headers: bearer(alice.accessToken) });
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'PERMISSION_DENIED' });
    expect(await upstream.requests()).toHaveLength(0);
  });
});
