/**
 * #11.11 and #11.12 end to end: the host is told only what the gateway verified. A shadow denial forwards
 * no permission (header or assertion claim) and says it was a shadow denial (X-IAM-Shadow-Denied); a
 * route without a permission still needs a valid active profile (unless it says `profile: optional`), and
 * the host never receives the id of a profile that was not verified.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { type TestDatabase } from '../support/database';
import { bearer, login } from '../support/gateway';
import { startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { recordedHeader, type RecordedRequest, type RecordingUpstream } from '../support/recording-upstream';

const POLICY = `version: 1
default: deny
routes:
  - path: /api/me
    methods: [GET]
  - path: /api/feed
    methods: [GET]
    profile: optional
  - path: /api/reports/**
    methods: [GET]
    permission: report:read
    mode: shadow
  - path: /api/shadow-projects/:projectId
    methods: [GET]
    permission: project:read
    resource: { type: PROJECT, id: projectId, access: READ }
    mode: shadow
  - path: /api/shadow-me
    methods: [GET]
    mode: shadow
`;

let dir: string;
let db: TestDatabase;
let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'iam-forwarded-'));
  await writeFile(join(dir, 'routes.yaml'), POLICY);
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: dir, IAM_FORWARD_ASSERTION_ENABLED: 'true' }, { keepDatabase: true });
  ({ upstream, gateway } = fixture);
  db = fixture.db!;
});

afterAll(async () => {
  await fixture?.close();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => upstream.clear());

async function forwarded(path: string, token: string | null): Promise<RecordedRequest> {
  const response = await fetch(`${gateway.url}${path}`, { headers: token === null ? {} : bearer(token) });
  expect(response.status).toBe(200);
  await response.arrayBuffer();
  const received = await upstream.requests();
  expect(received).toHaveLength(1);
  await upstream.clear();
  return received[0]!;
}

function claimsOf(received: RecordedRequest): Record<string, unknown> {
  const [jwt] = recordedHeader(received, 'x-iam-assertion');
  return JSON.parse(Buffer.from(jwt!.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
}

describe('#11.11 shadow denials forward no unearned permission', () => {
  it('#11.11: a permission the user lacks: no X-IAM-Permission, no permission claim, X-IAM-Shadow-Denied names the step', async () => {
    const alice = await login(gateway.url, 'alice');
    const received = await forwarded('/api/reports/q3', alice.accessToken);
    expect(recordedHeader(received, 'x-iam-user-id')).toEqual(['u-alice']);
    expect(recordedHeader(received, 'x-iam-permission')).toEqual([]);
    expect(recordedHeader(received, 'x-iam-shadow-denied')).toEqual(['PERMISSION_DENIED']);
    const claims = claimsOf(received);
    expect(claims.permission).toBeNull();
    expect(claims.shadow_denied).toBe('PERMISSION_DENIED');
  });

  it('#11.11: a permission held but not on this resource (SCOPE_DENIED): no permission forwarded either', async () => {
    const alice = await login(gateway.url, 'alice'); // project:read on project 1 only
    const denied = await forwarded('/api/shadow-projects/2', alice.accessToken);
    expect(recordedHeader(denied, 'x-iam-permission')).toEqual([]);
    expect(recordedHeader(denied, 'x-iam-shadow-denied')).toEqual(['SCOPE_DENIED']);
    expect(claimsOf(denied)).toMatchObject({ permission: null, shadow_denied: 'SCOPE_DENIED' });

    // Allowed on the same shadow route: the permission is earned, and no shadow header.
    const allowed = await forwarded('/api/shadow-projects/1', alice.accessToken);
    expect(recordedHeader(allowed, 'x-iam-permission')).toEqual(['project:read']);
    expect(recordedHeader(allowed, 'x-iam-shadow-denied')).toEqual([]);
    expect(claimsOf(allowed).permission).toBe('project:read');
    expect(claimsOf(allowed).shadow_denied).toBeUndefined();
  });

  it('#11.11: an anonymous request on a shadow route is marked UNAUTHENTICATED, and a client cannot forge or hide the marker', async () => {
    const response = await fetch(`${gateway.url}/api/reports/q3`, { headers: { 'X-IAM-Shadow-Denied': 'NONE', 'X-IAM-Permission': 'report:read' } });
    expect(response.status).toBe(200);
    const [received] = await upstream.requests();
    expect(recordedHeader(received!, 'x-iam-shadow-denied')).toEqual(['UNAUTHENTICATED']);
    expect(recordedHeader(received!, 'x-iam-permission')).toEqual([]);
    expect(recordedHeader(received!, 'x-iam-user-id')).toEqual([]);
  });
});

describe('#11.12 routes without a permission need a valid active profile', () => {
  it('#11.12: a session with a valid profile passes and the host gets that profile', async () => {
    const alice = await login(gateway.url, 'alice');
    const received = await forwarded('/api/me', alice.accessToken);
    expect(recordedHeader(received, 'x-iam-profile-id')).toEqual(['p-alice-editor']);
    expect(claimsOf(received).profile_id).toBe('p-alice-editor');
  });

  it('#11.12: a session without an active profile (no profile for DESKTOP) is 403 NO_ACTIVE_PROFILE; profile: optional passes without a profile id', async () => {
    const desktop = await login(gateway.url, 'alice', 'alice-password', 'DESKTOP');
    expect(desktop.principal.activeProfileId).toBeNull();
    const response = await fetch(`${gateway.url}/api/me`, { headers: bearer(desktop.accessToken) });
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ code: 'IAM_ACCESS_DENIED', step: 'NO_ACTIVE_PROFILE' });
    expect(await upstream.requests()).toHaveLength(0);

    const received = await forwarded('/api/feed', desktop.accessToken);
    expect(recordedHeader(received, 'x-iam-user-id')).toEqual(['u-alice']);
    expect(recordedHeader(received, 'x-iam-profile-id')).toEqual([]);
  });

  it.each([
    ['a disabled', 'update iam_profiles set enabled = false where profile_id = ?'],
    ['a revoked', 'update iam_profiles set revoked = true where profile_id = ?'],
    ['a wrong-client-type', `update iam_profiles set client_types = '{MOBILE}' where profile_id = ?`],
  ])('#11.12: %s profile is refused on a route without a permission and never named to the host', async (_state, sql) => {
    const alice = await login(gateway.url, 'alice');
    await db.orm.em.fork().execute(sql, ['p-alice-editor']);
    try {
      // What every instance does when the profile-changed event arrives (the session itself stays valid).
      gateway.services!.grants.handleEvent({ type: 'profile-changed', profileId: 'p-alice-editor', userId: 'u-alice' });
      const response = await fetch(`${gateway.url}/api/me`, { headers: bearer(alice.accessToken) });
      expect(response.status).toBe(403);
      expect(((await response.json()) as { step: string }).step).toMatch(/^(NO_ACTIVE_PROFILE|CLIENT_TYPE_MISMATCH)$/);
      expect(await upstream.requests()).toHaveLength(0);

      const optional = await forwarded('/api/feed', alice.accessToken);
      expect(recordedHeader(optional, 'x-iam-profile-id')).toEqual([]);
      expect(claimsOf(optional).profile_id).toBeNull();

      const shadow = await forwarded('/api/shadow-me', alice.accessToken);
      expect(recordedHeader(shadow, 'x-iam-profile-id')).toEqual([]);
      expect(recordedHeader(shadow, 'x-iam-shadow-denied')[0]).toMatch(/^(NO_ACTIVE_PROFILE|CLIENT_TYPE_MISMATCH)$/);
    } finally {
      await db.orm.em.fork().execute(`update iam_profiles set enabled = true, revoked = false, client_types = '{WEB,API}' where profile_id = ?`, ['p-alice-editor']);
      gateway.services!.grants.handleEvent({ type: 'profile-changed', profileId: 'p-alice-editor', userId: 'u-alice' });
    }
  });
});
