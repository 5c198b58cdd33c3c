/**
 * `policy check`: golden outputs (test/fixtures/policy-check/<case>/expected.txt holds the exact lines), the
 * lint definitions one by one, and a property test holding the `unreachable` claim against brute force.
 * `policy check --database` needs the test database: test/integration/policy-check-database.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import type { CompiledPolicy, PolicyIssue } from '../../src/policy/compiled-policy';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import { checkPolicyDirectory, isGranted, lintPolicy } from '../../src/policy-tools/policy-lint';
import { runPolicyCheck } from '../support/policy-cli';

const FIXTURES = join(__dirname, '../fixtures/policy-check');

const runCheck = runPolicyCheck;

function compile(yaml: string): CompiledPolicy {
  const result = compilePolicyFiles([{ file: 'p.yaml', text: yaml }]);
  if (!result.policy) throw new Error(result.issues.map((issue) => issue.message).join('\n'));
  return result.policy;
}

function kinds(issues: PolicyIssue[]): string[] {
  return issues.map((issue) => `${issue.kind} ${issue.source?.line ?? '-'}`);
}

describe('policy check: golden outputs', () => {
  const cases: Array<{ name: string; args: string[]; exit: number }> = [
    { name: 'clean', args: [], exit: 0 },
    { name: 'lint', args: [], exit: 0 },
    { name: 'errors', args: [], exit: 1 },
    { name: 'permissions', args: ['--provision', 'provision/templates.yaml'], exit: 0 },
  ];

  it('has a table entry for every fixture directory', () => {
    expect(readdirSync(FIXTURES).sort()).toEqual(cases.map((c) => c.name).sort());
  });

  it.each(cases)('$name', async ({ name, args, exit }) => {
    const dir = join(FIXTURES, name);
    const result = await runCheck(['.', ...args], dir);
    expect(result.stderr).toBe('');
    expect(result.stdout.split('\n').filter((line) => line !== '')).toEqual(readFileSync(join(dir, 'expected.txt'), 'utf8').split('\n').filter((line) => line !== ''));
    expect(result.code).toBe(exit);
  });

  it('names files as the user named the directory', async () => {
    const result = await runCheck(['errors'], FIXTURES);
    expect(result.stdout.split('\n')[0]).toBe('errors/a.yaml:6: error schema: routes[0]: unknown key "permision"');
    expect(result.code).toBe(1);
  });

  it('reports a missing directory as an error at the directory', async () => {
    const result = await runCheck(['nowhere'], FIXTURES);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^nowhere: error io: policy directory .*nowhere does not exist\n1 error, 0 warnings\n$/);
  });

  it('checks the shipped example policy without a problem, templates included', async () => {
    const root = join(__dirname, '../..');
    const result = await runCheck(['policies', '--provision', 'config/provision.example.yaml'], root);
    expect(result.stdout).toBe('0 errors, 0 warnings\n');
    expect(result.code).toBe(0);
  });

  it('refuses an unknown flag with the usage (exit 2)', async () => {
    const result = await runCheck(['.', '--provison', 'x.yaml'], FIXTURES);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--provison/);
    expect(result.stderr).toMatch(/usage: iam-gateway policy/);
  });
});

describe('lint definitions', () => {
  it('unreachable: a ** route whose bare path and every deeper path are taken, for its methods only', () => {
    const policy = compile(`version: 1
routes:
  - { path: /a/**, methods: [GET, POST], permission: a:read }
  - { path: /a, methods: [GET, POST], permission: a:read }
  - { path: /a/:x/**, methods: [GET], permission: a:read }
`);
    // POST /a/x still reaches /a/**: it is not unreachable.
    expect(kinds(lintPolicy(policy))).toEqual([]);
    const all = compile(`version: 1
routes:
  - { path: /a/**, methods: [GET], permission: a:read }
  - { path: /a, methods: [GET], permission: a:read }
  - { path: /a/:x/**, methods: [GET], permission: a:read }
`);
    const issues = lintPolicy(all);
    expect(kinds(issues)).toEqual(['unreachable 3']);
    expect(issues[0].related).toEqual({ file: 'p.yaml', line: 4 });
  });

  it('unreachable: static routes never hide a parameter route (values are unbounded)', () => {
    const policy = compile(`version: 1
routes:
  - { path: /p/:id, methods: [GET], permission: p:read }
  - { path: /p/a, methods: [GET], permission: p:read }
  - { path: /p/b, methods: [GET], permission: p:read }
`);
    expect(lintPolicy(policy)).toEqual([]);
  });

  it('unreachable: a GET route and a HEAD route of the same path are both selected', () => {
    const policy = compile(`version: 1
routes:
  - { path: /r/**, methods: [GET], permission: r:read }
  - { path: /r/**, methods: [HEAD], permission: r:read }
`);
    expect(lintPolicy(policy)).toEqual([]);
  });

  it('shadowed: only when the more specific route checks less', () => {
    const policy = compile(`version: 1
routes:
  - { path: /s/**, methods: [GET], public: true }
  - { path: /s/private, methods: [GET], permission: s:read }
  - { path: /t/**, methods: [GET] }
  - { path: /t/x, methods: [GET], permission: t:read }
  - { path: /u/**, methods: [GET], permission: u:read }
  - { path: /u/x, methods: [GET], permission: u:other }
  - { path: /v/**, methods: [POST], permission: v:write }
  - { path: /v/open, methods: [GET], public: true }
  - { path: /**, methods: ["*"] }
  - { path: /welcome, methods: [GET], public: true }
`);
    // Stricter specific routes, a different permission, a public GET next to a POST-only area, and exceptions to a
    // site-wide /** (it plays the part of `default`) are all fine.
    expect(lintPolicy(policy)).toEqual([]);
    const hole = compile(`version: 1
routes:
  - { path: /w/**, methods: ["*"] }
  - { path: /w/open, methods: [GET], public: true }
`);
    expect(lintPolicy(hole).map((issue) => issue.message)).toEqual([
      'GET /w/open (public) takes precedence over /w/** (any session, no permission, p.yaml:3): those requests skip authentication',
    ]);
  });

  it('shadowed (round 3): a more specific route that drops the broader route\'s scope check, or checks READ where it checks WRITE', () => {
    const policy = compile(`version: 1
routes:
  - { path: /api/projects/:projectId/**, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/projects/:projectId/export, methods: [GET], permission: project:read }
  - { path: /api/projects/:projectId/zip, methods: [GET], permission: project:export }
  - { path: /api/docs/:docId, methods: [PUT], permission: doc:write, resource: { type: DOC, id: docId, access: WRITE } }
  - { path: /api/docs/:docId, methods: [PATCH], permission: doc:write, resource: { type: DOC, id: docId, access: WRITE } }
  - { path: /api/docs/:docId/**, methods: [PUT], permission: doc:write, resource: { type: DOC, id: docId, access: WRITE } }
  - { path: /api/docs/:docId/title, methods: [PUT], permission: doc:write, resource: { type: DOC, id: docId, access: READ } }
`);
    expect(lintPolicy(policy).map((issue) => `${issue.source?.line} ${issue.message}`)).toEqual([
      '4 GET /api/projects/:projectId/export (project:read) takes precedence over /api/projects/:projectId/** (project:read on PROJECT READ, p.yaml:3): those requests skip the scope check on PROJECT',
      '5 GET /api/projects/:projectId/zip (project:export) takes precedence over /api/projects/:projectId/** (project:read on PROJECT READ, p.yaml:3): those requests skip the scope check on PROJECT',
      '9 PUT /api/docs/:docId/title (doc:write on DOC READ) takes precedence over /api/docs/:docId/** (doc:write on DOC WRITE, p.yaml:8): those requests skip the DOC WRITE scope check (READ is checked)',
    ]);
  });

  it('shadowed (round 3): not for a static sibling of the resource parameter, nor for a route that checks the resource itself', () => {
    const policy = compile(`version: 1
routes:
  - { path: /api/projects/:projectId, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/projects/archived, methods: [GET], permission: project:list }
  - { path: /api/projects/:projectId/**, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/projects/:projectId/export, methods: [GET], permission: project:export, resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/projects/:projectId/tasks/:taskId, methods: [GET], permission: task:read, resource: { type: TASK, id: taskId, access: WRITE } }
`);
    expect(lintPolicy(policy)).toEqual([]);
  });

  it('unknown-permission: exact codes, <resource>:* and *:* grant; only checked when templates are known', () => {
    const policy = compile(`version: 1
routes:
  - { path: /a, methods: [GET], permission: a:read }
  - { path: /b, methods: [GET], permission: b:read }
  - { path: /c, methods: [GET], permission: "c:*" }
  - { path: /d, methods: [GET], permission: d:read }
`);
    expect(lintPolicy(policy)).toEqual([]);
    const templates = [{ versionId: 't1', permissions: ['a:read', 'b:*'] }];
    expect(kinds(lintPolicy(policy, { templates }))).toEqual(['unknown-permission 5', 'unknown-permission 6']);
    expect(kinds(lintPolicy(policy, { templates: [{ versionId: 'root', permissions: ['*:*'] }] }))).toEqual([]);
    expect(isGranted('c:*', [{ permissions: ['c:read'] }])).toBe(false);
  });

  it('unfiltered-list: a GET list without resource or filter whose child routes check a resource type', () => {
    const policy = compile(`version: 1
routes:
  - { path: /projects, methods: [GET], permission: app.projects:read }
  - { path: /projects/:id, methods: [GET], permission: app.projects:read, resource: { type: PROJECT, id: id } }
  - { path: /Tasks, methods: [GET, POST], permission: app.tasks:read }
  - { path: /tasks/:taskId/comments, methods: [GET], permission: app.tasks:read, resource: { type: TASK, id: taskId } }
  - { path: /filtered, methods: [GET], permission: app.projects:read, filter: { type: PROJECT, id: /id } }
  - { path: /filtered/:id, methods: [GET], permission: app.projects:read, resource: { type: PROJECT, id: id } }
  - { path: /written, methods: [POST], permission: app.projects:write }
  - { path: /written/:id, methods: [POST], permission: app.projects:write, resource: { type: PROJECT, id: id, access: WRITE } }
  - { path: /alone, methods: [GET], permission: app.projects:read }
`);
    const issues = lintPolicy(policy).filter((issue) => issue.kind === 'unfiltered-list');
    expect(kinds(issues)).toEqual(['unfiltered-list 3', 'unfiltered-list 5']);
    expect(issues[0]!.message).toBe('GET /projects lists PROJECT without filtering: a scoped profile sees every PROJECT (set filter: {type: PROJECT, id: /id} on it, or a resource)');
    expect(issues[1]!.message).toContain('GET /Tasks lists TASK without filtering: a scoped profile sees every TASK');
    // A case-sensitive policy compares /Tasks and /tasks as different paths.
    const sensitive = compile(`version: 1
match: { case-sensitive: true }
routes:
  - { path: /Tasks, methods: [GET], permission: app.tasks:read }
  - { path: /tasks/:taskId, methods: [GET], permission: app.tasks:read, resource: { type: TASK, id: taskId } }
`);
    expect(lintPolicy(sensitive).filter((issue) => issue.kind === 'unfiltered-list')).toEqual([]);
  });

  it('path parameters allowed by configuration make `;` segments reachable', () => {
    const policy = compile(`version: 1
routes:
  - { path: "/m/a;v=1", methods: [GET], permission: m:read }
`);
    expect(kinds(lintPolicy(policy))).toEqual(['unreachable 3']);
    expect(lintPolicy(policy, { allowPathParameters: true })).toEqual([]);
  });

  it('checkPolicyDirectory returns the policy with the lint warnings sorted by file and line', async () => {
    const result = await checkPolicyDirectory(join(FIXTURES, 'lint'));
    expect(result.policy?.files).toEqual(['10-holes.yaml', '20-unreachable.yaml']);
    const lines = result.issues.map((issue) => `${issue.source!.file}:${issue.source!.line}`);
    expect(lines).toEqual([...lines].sort((a, b) => a.localeCompare(b, 'en', { numeric: true })));
  });
});

describe('unreachable agrees with brute force', () => {
  const segment = fc.constantFrom('a', 'b', ':p', '**');
  const route = fc.record({
    segments: fc.array(segment, { minLength: 0, maxLength: 3 }),
    methods: fc.constantFrom(['GET'], ['POST'], ['GET', 'POST'], ['*']),
  });

  it('flags a route exactly when no concrete request selects it (same-shape duplicates aside)', () => {
    fc.assert(
      fc.property(fc.array(route, { minLength: 1, maxLength: 6 }), (routes) => {
        const lines = routes.map((r, index) => {
          const parts = r.segments.filter((part, i) => part !== '**' || i === r.segments.length - 1);
          const named = parts.map((part, i) => (part === ':p' ? `:p${i}` : part));
          return `  - { path: "/${named.join('/')}", methods: [${r.methods.map((m) => `"${m}"`).join(', ')}], permission: "x:r${index}" }`;
        });
        const result = compilePolicyFiles([{ file: 'p.yaml', text: `version: 1\nroutes:\n${lines.join('\n')}\n` }]);
        if (!result.policy) return; // conflicting sets are the loader's business
        const policy = result.policy;
        const flagged = new Set(lintPolicy(policy).filter((i) => i.kind === 'unreachable').map((i) => i.source!.line));
        const selected = new Set<string>();
        const values = ['a', 'b', 'c'];
        const paths: string[] = ['/'];
        let frontier = [''];
        for (let depth = 1; depth <= 5; depth++) {
          frontier = frontier.flatMap((prefix) => values.map((v) => `${prefix}/${v}`));
          paths.push(...frontier);
        }
        for (const method of ['GET', 'HEAD', 'POST', 'PUT']) {
          for (const path of paths) {
            const match = policy.match(method, path);
            if (match) selected.add(match.route.id);
          }
        }
        for (const compiled of policy.routes) {
          if (flagged.has(compiled.source.line)) expect(selected.has(compiled.id)).toBe(false);
          else if (!selected.has(compiled.id)) {
            // Not selected but not flagged: only allowed when it is a same-shape duplicate (reported by the loader).
            expect(result.issues.some((issue) => issue.kind === 'duplicate' && issue.source?.line === compiled.source.line)).toBe(true);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
