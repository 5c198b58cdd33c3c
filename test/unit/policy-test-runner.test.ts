/**
 * `policy test`: the shipped example cases pass (and each of them would fail with the opposite
 * expectation, so none is vacuous), a deliberately wrong case fails with a clear line, and every kind of
 * principal, resolver answer and expectation behaves as documented in policies/tests/example.test.yaml.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseDocument } from 'yaml';
import { runPolicyCommand } from '../../src/cli/policy-command';
import type { CompiledPolicy } from '../../src/policy/compiled-policy';
import { compilePolicyFiles, loadPolicyDirectory } from '../../src/policy/load-policy-directory';
import { formatPolicyTestReport, runPolicyTests } from '../../src/policy-tools/policy-test-runner';
import { readProvisioningFile } from '../../src/auth/provisioning-file';

const ROOT = join(__dirname, '../..');
const WRONG = join(ROOT, 'test/fixtures/policy-test/wrong');

function sink(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

async function cli(args: string[], cwd = ROOT, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; lines: string[]; stderr: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await runPolicyCommand(['test', ...args], { stdout: stdout.stream, stderr: stderr.stream, env, cwd });
  return { code, lines: stdout.text().split('\n').filter((line) => line !== ''), stderr: stderr.text() };
}

/** A policies directory in a temp dir: `routes.yaml` plus `tests/cases.yaml`. */
function tempPolicy(routes: string, cases: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'iam-policy-test-'));
  writeFileSync(join(dir, 'routes.yaml'), routes);
  mkdirSync(join(dir, 'tests'));
  writeFileSync(join(dir, 'tests', 'cases.yaml'), cases);
  return dir;
}

const temps: string[] = [];
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

describe('the shipped examples (policies/tests/example.test.yaml)', () => {
  it('all pass against policies/example.yaml with the example provisioning file', async () => {
    const result = await cli(['policies', '--provision', 'config/provision.example.yaml']);
    expect(result.stderr).toBe('');
    expect(result.lines).toEqual(['24 passed, 0 failed']);
    expect(result.code).toBe(0);
  });

  it('use the configured directory and iam.provision.file when none is given', async () => {
    // config/default.yaml names no provisioning file (no known users out of the box): the environment does.
    const result = await cli([], ROOT, { IAM_PROVISION_FILE: 'config/provision.example.yaml' });
    expect(result.lines).toEqual(['24 passed, 0 failed']);
    expect(result.code).toBe(0);
  });

  it('list every case with --verbose', async () => {
    const result = await cli(['policies', '-v', '--provision', 'config/provision.example.yaml']);
    expect(result.lines.filter((line) => line.startsWith('PASS policies/tests/example.test.yaml:'))).toHaveLength(24);
  });

  it('cover allow, PERMISSION_DENIED, SCOPE_DENIED, 401, ROUTE_NOT_DECLARED and a public route', () => {
    const text = readFileSync(join(ROOT, 'policies/tests/example.test.yaml'), 'utf8');
    const cases = (parseDocument(text).toJS() as { cases: Array<{ expect: unknown; principal: unknown }> }).cases;
    const expects = new Set(cases.map((c) => c.expect));
    for (const wanted of ['allow', 'PERMISSION_DENIED', 'SCOPE_DENIED', 401, 'ROUTE_NOT_DECLARED']) expect(expects).toContain(wanted);
    expect(cases.some((c) => c.principal === null && c.expect === 'allow')).toBe(true);
  });

  it('each fail when their expectation is turned around (no case passes whatever the engine says)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-policy-flip-'));
    temps.push(dir);
    cpSync(join(ROOT, 'policies/example.yaml'), join(dir, 'example.yaml'));
    mkdirSync(join(dir, 'tests'));
    const doc = parseDocument(readFileSync(join(ROOT, 'policies/tests/example.test.yaml'), 'utf8'));
    const cases = (doc.toJS() as { cases: Array<{ expect: unknown }> }).cases;
    cases.forEach((testCase, index) => {
      // allow ↔ deny; anything else (a step or a status) becomes its opposite outcome.
      doc.setIn(['cases', index, 'expect'], testCase.expect === 'allow' ? 'deny' : 'allow');
    });
    writeFileSync(join(dir, 'tests', 'flipped.yaml'), doc.toString());
    const result = await cli([dir, '--provision', 'config/provision.example.yaml']);
    expect(result.lines[result.lines.length - 1]).toBe('0 passed, 24 failed');
    expect(result.code).toBe(1);
  });
});

describe('a deliberately wrong case', () => {
  it('exits 1 with one line naming the case, file:line, expected vs actual and the steps', async () => {
    const result = await cli(['test/fixtures/policy-test/wrong']);
    expect(result.code).toBe(1);
    expect(result.lines).toEqual([
      'FAIL test/fixtures/policy-test/wrong/tests/cases.test.yaml:13: project 2 is in scope: expected allow, got deny SCOPE_DENIED (403); ' +
        'route routes.yaml:11 /api/projects/:projectId; steps [AUTHENTICATED, PROFILE_ACTIVE, PERMISSION_GRANTED, RESOURCE_RESOLVED, ' +
        'SCOPE_DENIED ✗ "profile test-profile has no scope covering PROJECT 2 for READ"]',
      '2 passed, 1 failed',
    ]);
  });
});

describe('runPolicyTests', () => {
  let policy: CompiledPolicy;
  beforeAll(async () => {
    const loaded = await loadPolicyDirectory(WRONG);
    policy = loaded.policy!;
  });

  async function run(cases: string, options: { provisioning?: () => ReturnType<typeof readProvisioningFile>; allowPathParameters?: boolean; routes?: string } = {}) {
    const dir = tempPolicy(options.routes ?? readFileSync(join(WRONG, 'routes.yaml'), 'utf8'), cases);
    temps.push(dir);
    const compiled = options.routes ? compilePolicyFiles([{ file: 'routes.yaml', text: options.routes }]).policy! : policy;
    return runPolicyTests({ policy: compiled, dir, ...(options.provisioning ? { provisioning: options.provisioning, provisioningOrigin: 'prov.yaml' } : {}), allowPathParameters: options.allowPathParameters ?? false });
  }

  it('matches a step code, a status, allow and deny against the same decision', async () => {
    const report = await run(`cases:
  - { name: step, request: { method: GET, path: /api/projects/7 }, principal: { permissions: [] }, expect: PERMISSION_DENIED }
  - { name: status, request: { method: GET, path: /api/projects/7 }, principal: { permissions: [] }, expect: 403 }
  - { name: deny, request: { method: GET, path: /api/projects/7 }, principal: { permissions: [] }, expect: deny }
  - { name: anonymous, request: { method: GET, path: /api/projects/7 }, principal: null, expect: UNAUTHENTICATED }
  - { name: undeclared, request: { method: get, path: /nothing }, principal: null, expect: ROUTE_NOT_DECLARED }
  - { name: wrong status, request: { method: GET, path: /api/projects/7 }, principal: { permissions: [] }, expect: 401 }
`);
    expect(report.results.map((r) => [r.name, r.passed])).toEqual([
      ['step', true],
      ['status', true],
      ['deny', true],
      ['anonymous', true],
      ['undeclared', true],
      ['wrong status', false],
    ]);
    expect(report.results[5].actual).toBe('deny PERMISSION_DENIED (403)');
    expect(report).toMatchObject({ passed: 5, failed: 1 });
  });

  it('a shadow route lets the request through: allow passes, and so does the step it would deny at', async () => {
    const report = await run(`cases:
  - { name: through, request: { method: GET, path: /api/reports/q1 }, principal: { permissions: [] }, expect: allow }
  - { name: would deny, request: { method: GET, path: /api/reports/q1 }, principal: { permissions: [] }, expect: PERMISSION_DENIED }
  - { name: not a deny, request: { method: GET, path: /api/reports/q1 }, principal: { permissions: [] }, expect: deny }
`);
    expect(report.results.map((r) => r.passed)).toEqual([true, true, false]);
    expect(report.results[2].actual).toBe('allow (shadow mode; would deny: PERMISSION_DENIED 403)');
    expect(report.results[0].decision).toMatchObject({ allowed: true, shadowed: true, failedStep: 'PERMISSION_DENIED' });
  });

  it('answers resolvers from the case: scope refs, 404, down, and by default the resource itself', async () => {
    const principal = `{ permissions: [project:read], scopes: [{ scopeType: PROJECT, scopeRefId: "1", accessMode: READ }] }`;
    const report = await run(`cases:
  - { name: mapped, request: { method: GET, path: /api/projects/5 }, principal: ${principal}, resolvers: { PROJECT: { "5": [{ type: PROJECT, id: 1 }] } }, expect: allow }
  - { name: missing, request: { method: GET, path: /api/projects/5 }, principal: ${principal}, resolvers: { PROJECT: { "5": 404 } }, expect: 404 }
  - { name: down, request: { method: GET, path: /api/projects/5 }, principal: ${principal}, resolvers: { PROJECT: { "5": down } }, expect: RESOURCE_RESOLUTION_UNAVAILABLE }
  - { name: failing, request: { method: GET, path: /api/projects/5 }, principal: ${principal}, resolvers: { PROJECT: { "5": 500 } }, expect: 502 }
  - { name: itself, request: { method: GET, path: /api/projects/1 }, principal: ${principal}, expect: allow }
  - { name: encoded id, request: { method: GET, path: /api/projects/a%20b }, principal: ${principal}, resolvers: { PROJECT: { "a b": [{ type: PROJECT, id: "1" }] } }, expect: allow }
`);
    expect(report.results.filter((r) => !r.passed).map((r) => `${r.name}: ${r.actual}`)).toEqual([]);
    expect(report.passed).toBe(6);
  });

  it("reads a {body} answer through the policy's resolver: scopes pointers, self, and what fails closed", async () => {
    const routes = `version: 1
resources:
  TASK: { resolver: { url: "/tasks/{id}", scopes: [{ type: PROJECT, id: /projectId }] } }
  PROJECT: { resolver: { url: "/projects/{id}", self: true } }
  DOC: { resolver: { url: "/docs/{id}" } }
routes:
  - { path: /tasks/:id, methods: [GET], permission: task:read, resource: { type: TASK, id: id } }
  - { path: /projects/:id, methods: [GET], permission: task:read, resource: { type: PROJECT, id: id } }
  - { path: /docs/:id, methods: [GET], permission: task:read, resource: { type: DOC, id: id } }
`;
    const principal = `{ permissions: [task:read], scopes: [{ scopeType: PROJECT, scopeRefId: "1", accessMode: READ }] }`;
    const report = await run(
      `cases:
  - { name: in project 1, request: { method: GET, path: /tasks/1 }, principal: ${principal}, resolvers: { TASK: { "1": { body: { id: 1, projectId: 1 } } } }, expect: allow }
  - { name: in project 2, request: { method: GET, path: /tasks/3 }, principal: ${principal}, resolvers: { TASK: { "3": { body: { id: 3, projectId: 2 } } } }, expect: SCOPE_DENIED }
  - { name: no project, request: { method: GET, path: /tasks/5 }, principal: ${principal}, resolvers: { TASK: { "5": { body: { id: 5, projectId: null } } } }, expect: 502 }
  - { name: self, request: { method: GET, path: /projects/1 }, principal: ${principal}, resolvers: { PROJECT: { "1": { body: { id: 1, name: Apollo } } } }, expect: allow }
  - { name: scopes document, request: { method: GET, path: /docs/9 }, principal: ${principal}, resolvers: { DOC: { "9": { body: { scopes: [{ type: PROJECT, id: 1 }] } } } }, expect: allow }
  - { name: a pointer the policy does not have, request: { method: GET, path: /tasks/1 }, principal: ${principal}, resolvers: { TASK: { "1": { body: { id: 1, project: 1 } } } }, expect: allow }
`,
      { routes },
    );
    expect(report.results.map((r) => [r.name, r.passed])).toEqual([
      ['in project 1', true],
      ['in project 2', true],
      ['no project', true],
      ['self', true],
      ['scopes document', true],
      ['a pointer the policy does not have', false],
    ]);
    expect(report.results[5].actual).toBe('deny RESOURCE_RESOLUTION_UNAVAILABLE (502)');
  });

  it('refuses a resolver answer that is neither a list, a status, down nor {body}', async () => {
    const report = await run(`cases:
  - { name: bad, request: { method: GET, path: /api/projects/5 }, principal: null, resolvers: { PROJECT: { "5": { bdy: 1 } } }, expect: allow }
`);
    expect(formatPolicyTestReport(report)[0]).toMatch(/cases\[0\]\.resolvers\.PROJECT\[5\]: must be a list of \{type, id\}, an HTTP status \(404 = not found\), "down" or \{body: <the host's 200 answer>\}/);
  });

  it('normalizes the path like the proxy: a refused target is a 400 deny', async () => {
    const report = await run(`cases:
  - { name: refused, request: { method: GET, path: "/api/projects/1;x" }, principal: null, expect: 400 }
  - { name: refused deny, request: { method: GET, path: "/api/..%2fprojects" }, principal: null, expect: deny }
  - { name: dot segments, request: { method: GET, path: /x/../health }, principal: null, expect: allow }
`);
    expect(report.results.map((r) => r.passed)).toEqual([true, true, true]);
    expect(report.results[0].actual).toBe("400 (path refused: ';' path parameter in path)");
    const allowed = await run(`cases:
  - { name: parameters on, request: { method: GET, path: "/health;v=1" }, principal: null, expect: ROUTE_NOT_DECLARED }
`, { allowPathParameters: true });
    expect(allowed.results[0].passed).toBe(true);
  });

  it('takes users from the provisioning file: the login profile, a named one, client types', async () => {
    const provisioning = () => readProvisioningFile(join(ROOT, 'config/provision.example.yaml'));
    const report = await run(
      `cases:
  - { name: editor by default, request: { method: PUT, path: /p/1 }, principal: { user: u-alice }, expect: allow }
  - { name: named reader, request: { method: PUT, path: /p/1 }, principal: { user: u-alice, profile: p-alice-reader }, expect: PERMISSION_DENIED }
  - { name: mobile picks reader, request: { method: PUT, path: /p/1 }, principal: { user: u-alice, clientType: MOBILE }, expect: PERMISSION_DENIED }
  - { name: profile not for the client type, request: { method: PUT, path: /p/1 }, principal: { user: u-alice, profile: p-alice-editor, clientType: MOBILE }, expect: CLIENT_TYPE_MISMATCH }
  - { name: no profile for the client type, request: { method: PUT, path: /p/1 }, principal: { user: u-bob, clientType: DESKTOP }, expect: NO_ACTIVE_PROFILE }
  - { name: scope of another project, request: { method: PUT, path: /p/2 }, principal: { user: u-alice }, expect: SCOPE_DENIED }
  - { name: unknown user, request: { method: PUT, path: /p/1 }, principal: { user: u-nobody }, expect: allow }
  - { name: unknown profile, request: { method: PUT, path: /p/1 }, principal: { user: u-alice, profile: p-x }, expect: allow }
`,
      {
        provisioning,
        routes: `version: 1
routes:
  - { path: "/p/:id", methods: [PUT], permission: project:update, resource: { type: PROJECT, id: id, access: WRITE } }
`,
      },
    );
    expect(report.results.map((r) => `${r.name}: ${r.passed ? 'pass' : (r.error ?? r.actual)}`)).toEqual([
      'editor by default: pass',
      'named reader: pass',
      'mobile picks reader: pass',
      'profile not for the client type: pass',
      'no profile for the client type: pass',
      'scope of another project: pass',
      'unknown user: user u-nobody is not in prov.yaml',
      'unknown profile: user u-alice has no profile p-x in prov.yaml',
    ]);
  });

  it('treats a disabled user as having no session and a disabled or revoked profile as no active profile', async () => {
    const provisioning = () => ({
      templates: [{ versionId: 't', name: 't', permissions: ['*:*'] }],
      users: [
        { userId: 'u-off', enabled: false, profiles: [{ profileId: 'p-off', profileName: 'x', templateVersionId: 't', clientTypes: ['WEB'] }] },
        {
          userId: 'u-on',
          profiles: [
            { profileId: 'p-a-disabled', profileName: 'x', templateVersionId: 't', clientTypes: ['WEB'], enabled: false },
            { profileId: 'p-b-revoked', profileName: 'x', templateVersionId: 't', clientTypes: ['WEB'], revoked: true },
            { profileId: 'p-c-gone', profileName: 'x', templateVersionId: 'missing', clientTypes: ['WEB'] },
          ],
        },
      ],
    });
    const report = await run(
      `cases:
  - { name: disabled user, request: { method: GET, path: /api/projects/1 }, principal: { user: u-off }, expect: UNAUTHENTICATED }
  - { name: disabled profile, request: { method: GET, path: /api/projects/1 }, principal: { user: u-on, profile: p-a-disabled }, expect: NO_ACTIVE_PROFILE }
  - { name: revoked profile, request: { method: GET, path: /api/projects/1 }, principal: { user: u-on, profile: p-b-revoked }, expect: NO_ACTIVE_PROFILE }
  - { name: login skips both and the template is missing, request: { method: GET, path: /api/projects/1 }, principal: { user: u-on }, expect: PERMISSION_DENIED }
`,
      { provisioning },
    );
    expect(report.results.filter((r) => !r.passed).map((r) => `${r.name}: ${r.error ?? r.actual}`)).toEqual([]);
    expect(report.results[3].decision?.profileId).toBe('p-c-gone');
  });

  it('says what is missing when a user case has no provisioning file', async () => {
    const report = await run(`cases:
  - { name: needs users, request: { method: GET, path: /health }, principal: { user: u-alice }, expect: allow }
`);
    expect(report.results[0]).toMatchObject({ passed: false, error: expect.stringContaining('--provision FILE') });
  });

  it('reports invalid cases with file:line and still runs the valid ones', async () => {
    const report = await run(`cases:
  - name: fine
    request: { method: GET, path: /health }
    principal: null
    expect: allow
  - name: typo in a key
    request: { method: GET, path: /health }
    principal: { permisions: [a:b] }
    expect: allow
  - name: bad expectation
    request: { method: GET, path: /health }
    principal: null
    expect: maybe
  - name: bad permission code
    request: { method: GET, path: /health }
    principal: { permissions: [project.read] }
    expect: allow
`);
    expect(report.results.map((r) => r.name)).toEqual(['fine']);
    const lines = formatPolicyTestReport(report);
    expect(lines[0]).toBe('tests/cases.yaml:8: error test: cases[1].principal: unknown key "permisions"');
    expect(lines[1]).toMatch(/^tests\/cases\.yaml:13: error test: cases\[2\]\.expect: must be allow, deny, a step code/);
    expect(lines[2]).toBe('tests/cases.yaml:16: error test: cases[3].principal.permissions: "project.read" is not a permission code <resource>:<action>');
    expect(lines[lines.length - 1]).toBe('1 passed, 3 failed');
  });

  it('reports YAML errors and a missing tests directory', async () => {
    const broken = await run('cases: [ {\n');
    expect(broken.problems[0]).toMatchObject({ kind: 'test', source: { file: 'tests/cases.yaml' } });
    expect(broken.failed).toBeGreaterThan(0);
    const none = await runPolicyTests({ policy, dir: join(ROOT, 'test/fixtures/policy-check/clean') });
    expect(none.problems.map((p) => p.message)).toEqual([expect.stringMatching(/^no test directory .*clean\/tests$/)]);
    expect(none.failed).toBe(1);
  });
});
