/**
 * `iam-gateway provision FILE` applies a provisioning file
 * idempotently (a second run changes nothing and says so); a bad file changes nothing and names the error.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { ROOT } from '../support/gateway';
import { runCli } from '../support/cli';

let db: TestDatabase;
const dir = mkdtempSync(join(tmpdir(), 'iam-provision-'));

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db?.close());

const run = runCli;

async function counts(): Promise<Record<string, number>> {
  const em = db.orm.em.fork();
  const result: Record<string, number> = {};
  for (const table of ['iam_users', 'iam_identities', 'iam_permission_templates', 'iam_template_permissions', 'iam_profiles', 'iam_resource_scopes']) {
    const rows = (await em.execute(`select count(*)::int as n from ${table}`)) as Array<{ n: number }>;
    result[table] = rows[0]!.n;
  }
  return result;
}

it('applies the example file, then a second run changes nothing and says so', async () => {
  const file = join(ROOT, 'config/provision.example.yaml');
  const first = await run(['provision', file]);
  expect(first.err).toBe('');
  expect(first.code).toBe(0);
  expect(first.out).toMatch(/created/);
  const after = await counts();
  expect(after.iam_profiles).toBeGreaterThan(0);

  const second = await run(['provision', file]);
  expect(second.code).toBe(0);
  expect(second.out).toMatch(/nothing changed/);
  expect(await counts()).toEqual(after);
});

it('refuses a malformed file naming the line, and changes nothing', async () => {
  const before = await counts();
  const file = join(dir, 'broken.yaml');
  writeFileSync(file, 'templates:\n  - versionId: x\n    permissions: [a:b\nusers: []\n');
  const result = await run(['provision', file]);
  expect(result.code).toBe(1);
  expect(result.err).toMatch(/broken\.yaml:\d+:/);
  expect(await counts()).toEqual(before);
});

it('refuses a file with a bad permission code or an unknown template, naming where, and changes nothing', async () => {
  const before = await counts();
  const badCode = join(dir, 'bad-code.yaml');
  writeFileSync(badCode, 'templates:\n  - { versionId: t1, name: t, permissions: ["not a code"] }\n');
  const first = await run(['provision', badCode]);
  expect(first.code).toBe(1);
  expect(first.err).toContain('/templates/0/permissions/0');

  const unknownTemplate = join(dir, 'unknown-template.yaml');
  writeFileSync(
    unknownTemplate,
    'templates:\n  - { versionId: fresh-v1, name: fresh, permissions: ["a:b"] }\nusers:\n  - userId: u-new\n    profiles:\n      - { profileId: p-new, profileName: New, templateVersionId: nope-v9, clientTypes: [WEB] }\n',
  );
  const second = await run(['provision', unknownTemplate]);
  expect(second.code).toBe(1);
  expect(second.err).toContain('templateVersionId');
  expect(await counts()).toEqual(before);
  expect(await db.repository.getTemplate('fresh-v1')).toBeNull();
});

it('reports every problem of a file in one run, each with its file:line, and checks client types against iam.client-types', async () => {
  const before = await counts();
  const file = join(dir, 'many-problems.yaml');
  writeFileSync(
    file,
    [
      'templates:', // 1
      '  - versionId: t-many', // 2
      '    name: many', // 3
      '    permissions: ["not a code", "a:b"]', // 4
      '    colour: blue', // 5
      'users:', // 6
      '  - userId: u-many', // 7
      '    profiles:', // 8
      '      - profileId: p-many', // 9
      '        profileName: Many', // 10
      '        templateVersionId: t-many', // 11
      '        clientTypes: [WEB, TELEVISION]', // 12
      '',
    ].join('\n'),
  );
  const result = await run(['provision', file]);
  expect(result.code).toBe(1);
  expect(result.err).toContain('3 problem(s)');
  expect(result.err).toMatch(/many-problems\.yaml:5: \/templates\/0\/colour is not an allowed property/);
  expect(result.err).toMatch(/many-problems\.yaml:4: \/templates\/0\/permissions\/0 "not a code" is not a permission code/);
  expect(result.err).toMatch(/many-problems\.yaml:12: \/users\/0\/profiles\/0\/clientTypes\/1 "TELEVISION" is not one of iam.client-types/);
  expect(await counts()).toEqual(before);
});

it('names the line of what only the database can refuse (an unknown template)', async () => {
  const file = join(dir, 'unknown-template-lines.yaml');
  writeFileSync(file, 'users:\n  - userId: u-lines\n    profiles:\n      - profileId: p-lines\n        profileName: Lines\n        templateVersionId: nope-v9\n        clientTypes: [WEB]\n');
  const result = await run(['provision', file]);
  expect(result.code).toBe(1);
  expect(result.err).toMatch(/unknown-template-lines\.yaml:6: \/users\/0\/profiles\/0\/templateVersionId/);
});
