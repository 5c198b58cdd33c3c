/**
 * `policy check --database`: permission codes are checked against the templates stored in the test database
 * (moved from test/unit/policy-lint.test.ts, which runs without the database global setup).
 */
import { join } from 'node:path';
import { createTestDatabase } from '../support/database';
import { testDatabaseUrl } from '../support/env';
import { runPolicyCheck } from '../support/policy-cli';

const runCheck = runPolicyCheck;

describe('policy check --database', () => {
  it('checks permission codes against the templates stored in the configured database', async () => {
    const db = await createTestDatabase();
    try {
      await db.repository.applyProvisioning({ templates: [{ versionId: 'db-v1', name: 'db', permissions: ['report:list', 'project:*'] }] });
      const result = await runCheck(['test/fixtures/policy-check/permissions', '--database'], join(__dirname, '../..'), { DATABASE_URL: testDatabaseUrl() });
      const unknown = result.stdout.split('\n').filter((line) => line.includes('unknown-permission'));
      expect(unknown).toEqual([
        'test/fixtures/policy-check/permissions/routes.yaml:19: warning unknown-permission: permission billing:manage of route /api/billing/** is granted by no template in the database (1 template): nobody can pass it',
        'test/fixtures/policy-check/permissions/routes.yaml:23: warning unknown-permission: permission task:read of route /api/tasks/:taskId is granted by no template in the database (1 template): nobody can pass it',
        'test/fixtures/policy-check/permissions/routes.yaml:27: warning unknown-permission: permission org:delete of route /api/orgs/:orgId is granted by no template in the database (1 template): nobody can pass it',
      ]);
      expect(result.code).toBe(0);
    } finally {
      await db.close();
    }
  });

  it('exits 1 saying why when the database cannot be read', async () => {
    const result = await runCheck(['test/fixtures/policy-check/clean', '--database'], join(__dirname, '../..'), { DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/none' });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^iam-gateway policy: --database: cannot read the templates: /);
  });
});
