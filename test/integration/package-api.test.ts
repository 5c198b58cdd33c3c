/**
 * `decide()` and `require()` are exported from the package for Node hosts that want the
 * gateway's engine in-process; they give the same answers the proxy enforces.
 */
import { join } from 'node:path';
import { decide, openAuthorizationEngine, ProblemError, require as requireAllowed, startGateway } from '../../src';
import { readProvisioningFile } from '../../src/auth/provisioning-file';
import type { IamPrincipal } from '../../src/domain/principal';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { ROOT, testConfig } from '../support/gateway';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.repository.applyProvisioning(readProvisioningFile(join(ROOT, 'config/provision.example.yaml')));
  await db.repository.ensurePrincipal({ userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com' });
});
afterAll(() => db?.close());

const alice: IamPrincipal = { userId: 'u-alice', identityId: 'id-alice', identityDomain: 'example.com', activeProfileId: 'p-alice-editor', authorizationVersion: 1 };

it('decides and requires with the same engine and policy as the gateway', async () => {
  const embedded = await openAuthorizationEngine(testConfig('http://127.0.0.1:9', { REDIS_URL: '' }));
  try {
    const subject = { principal: alice, clientType: 'WEB' };
    const resource = { type: 'PROJECT', id: '1', access: 'WRITE' as const, resolve: 'optional' as const };
    const allowed = await decide(embedded.engine, { subject, permissionCode: 'project:update', resource, resources: {} });
    expect(allowed.allowed).toBe(true);

    const denied = await decide(embedded.engine, { subject, permissionCode: 'project:update', resource: { ...resource, id: '2' }, resources: {} });
    expect(denied).toMatchObject({ allowed: false, failedStep: 'SCOPE_DENIED', status: 403 });

    await expect(requireAllowed(embedded.engine, { subject, permissionCode: 'admin:write', resource: null, resources: {} })).rejects.toBeInstanceOf(ProblemError);
    await expect(requireAllowed(embedded.engine, { subject, permissionCode: 'admin:write', resource: null, resources: {} })).rejects.toMatchObject({
      code: 'IAM_ACCESS_DENIED',
      status: 403,
      extensions: { step: 'PERMISSION_DENIED' },
    });

    const viaRoute = await embedded.engine.decideRequest({ method: 'GET', path: '/api/projects', policy: embedded.policy, subject });
    expect(viaRoute).toMatchObject({ allowed: true, permissionCode: 'project:list' });
  } finally {
    await embedded.close();
  }
});

it('startGateway gives a program where the gateway listens and how to stop it, not its wired services', async () => {
  const gateway = await startGateway(testConfig('http://127.0.0.1:9', { REDIS_URL: '', PORT: '0', MANAGEMENT_PORT: '0' }));
  try {
    expect(Object.keys(gateway).sort()).toEqual(['close', 'managementPort', 'managementUrl', 'port', 'url']);
    expect(Object.isFrozen(gateway)).toBe(true);
    expect((await fetch(`${gateway.managementUrl}/health/live`)).status).toBe(200);
  } finally {
    await gateway.close();
  }
});
