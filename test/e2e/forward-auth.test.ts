/**
 * design.md §4.4: forward-auth for deployments that keep nginx (auth_request), Traefik (ForwardAuth),
 * Caddy (forward_auth) or Envoy in front — same engine, same policy, identity headers on 200.
 */
import { join } from 'node:path';
import type { RunningGateway } from '../../src/server/gateway';
import { createTestDatabase } from '../support/database';
import { bearer, login, ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

let upstream: RecordingUpstream;
let gateway: RunningGateway;
let token: string;

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  upstream = await startRecordingUpstream();
  gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies') });
  token = (await login(gateway.url, 'alice')).accessToken;
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

const check = (headers: Record<string, string>): Promise<Response> => fetch(`${gateway.url}/iam/authorization/forward-auth`, { headers });

it('answers 200 with the identity headers for an allowed request (Traefik/Caddy headers)', async () => {
  const response = await check({ ...bearer(token), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects?x=1' });
  expect(response.status).toBe(200);
  expect(response.headers.get('x-iam-user-id')).toBe('u-alice');
  expect(response.headers.get('x-iam-profile-id')).toBe('p-alice-editor');
  expect(response.headers.get('x-iam-permission')).toBe('project:list');
  expect(await upstream.requests()).toHaveLength(0);
});

it('reads nginx auth_request headers (X-Original-Method / X-Original-URI)', async () => {
  const response = await check({ ...bearer(token), 'X-Original-Method': 'POST', 'X-Original-URI': '/api/projects' });
  expect(response.status).toBe(200);
  expect(response.headers.get('x-iam-permission')).toBe('project:create');
});

it('answers 401 with a Bearer challenge without a token, 403 with the decision for a denied one', async () => {
  const anonymous = await check({ 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api/projects' });
  expect(anonymous.status).toBe(401);
  expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
  const denied = await check({ ...bearer(token), 'X-Forwarded-Method': 'DELETE', 'X-Forwarded-Uri': '/api/admin/users' });
  expect(denied.status).toBe(403);
  expect(await denied.json()).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'PERMISSION_DENIED', decisionId: expect.any(String) });
});

it('judges the normalized URI and refuses one it cannot interpret', async () => {
  const sneaky = await check({ ...bearer(token), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/health/../api/admin/stats' });
  expect(sneaky.status).toBe(403);
  const refused = await check({ ...bearer(token), 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/api%2fadmin' });
  expect(refused.status).toBe(400);
  expect(((await refused.json()) as { code: string }).code).toBe('IAM_BAD_REQUEST');
  const missing = await check(bearer(token));
  expect(missing.status).toBe(400);
});

it('passes public routes without a token', async () => {
  expect((await check({ 'X-Forwarded-Method': 'GET', 'X-Forwarded-Uri': '/health' })).status).toBe(200);
});
