/**
 * `policy diff` classification (docs/policy-changes.md): a table of changes where a mistake would be a security hole
 * (a widening reported as narrower or as nothing), and the changes that must come out as "no change".
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import { diffPolicies, type Classification } from '../../src/policy-tools/policy-diff';
import { runPolicy } from '../support/policy-cli';

const compile = (files: Record<string, string>) => {
  const result = compilePolicyFiles(Object.entries(files).map(([file, text]) => ({ file, text })));
  if (!result.policy) throw new Error(result.issues.map((issue) => issue.message).join('\n'));
  return result.policy;
};
const doc = (routes: string, head = 'default: deny'): string => `version: 1\n${head}\nroutes:\n${routes}`;
/** The (method, pattern, classification) triples of a diff, and whether it is wider. */
const summary = (before: string, after: string, beforeHead?: string, afterHead?: string) => {
  const diff = diffPolicies(compile({ 'p.yaml': doc(before, beforeHead) }), compile({ 'p.yaml': doc(after, afterHead) }));
  return { wider: diff.wider, changes: diff.changes.map((change) => `${change.classification} ${change.method} ${change.pattern}`) };
};
const PROJECT = '  - { path: /api/projects/:id, methods: [GET], permission: project:read, resource: { type: PROJECT, id: id, access: READ } }\n';
const LIST = '  - { path: /api/projects, methods: [GET], permission: project:list }\n';

describe('policy diff: changes where a wrong answer is a hole', () => {
  const cases: Array<[string, string, string, Classification, string?, string?]> = [
    ['public added to a protected route', PROJECT, '  - { path: /api/projects/:id, methods: [GET], public: true }\n', 'wider'],
    ['permission removed (any session)', PROJECT, '  - { path: /api/projects/:id, methods: [GET] }\n', 'wider'],
    ['scope check dropped', PROJECT, '  - { path: /api/projects/:id, methods: [GET], permission: project:read }\n', 'wider'],
    ['another permission code', PROJECT, PROJECT.replace('project:read', 'project:list'), 'wider'],
    ['WRITE loosened to READ', PROJECT.replace('READ', 'WRITE'), PROJECT, 'wider'],
    ['resolve required → optional', PROJECT.replace('READ }', 'READ, resolve: required }'), PROJECT, 'wider'],
    ['enforce → shadow mode', PROJECT, PROJECT.replace(' }\n', ', mode: shadow }\n').replace('READ, mode: shadow }', 'READ }, mode: shadow'), 'wider'],
    ['profile made optional', '  - { path: /api/me, methods: [GET] }\n', '  - { path: /api/me, methods: [GET], profile: optional }\n', 'wider'],
    ['method added to a route (falls from deny)', PROJECT, PROJECT.replace('[GET]', '[GET, DELETE]'), 'wider'],
    ['resource id taken from another segment', '  - { path: /api/p/:a/t/:b, methods: [GET], permission: t:read, resource: { type: T, id: b, access: READ } }\n', '  - { path: /api/p/:a/t/:b, methods: [GET], permission: t:read, resource: { type: T, id: a, access: READ } }\n', 'wider'],
    ['a route removed: falls through to a weaker broader route', `  - { path: /api/**, methods: [GET] }\n${PROJECT}`, '  - { path: /api/**, methods: [GET] }\n', 'wider'],
    ['a route added that checks less than the broader one it takes requests from', PROJECT.replace(':id,', ':id/**,'), `${PROJECT.replace(':id,', ':id/**,')}  - { path: /api/projects/:id/export, methods: [GET], permission: project:read }\n`, 'wider'],
    ['scope check added', '  - { path: /api/projects/:id, methods: [GET], permission: project:read }\n', PROJECT, 'narrower'],
    ['READ tightened to WRITE', PROJECT, PROJECT.replace('READ', 'WRITE'), 'narrower'],
    ['a public route made protected', '  - { path: /health, methods: [GET], public: true }\n', '  - { path: /health, methods: [GET], permission: health:read }\n', 'narrower'],
    ['shadow → enforce', PROJECT.replace('READ }', 'READ }, mode: shadow'), PROJECT, 'narrower'],
    ['list filter dropped', LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id } }\n'), LIST, 'wider'],
    ['list filter added', LIST, LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id } }\n'), 'narrower'],
    ['list filter by another id pointer', LIST.replace(' }\n', ', filter: { type: PROJECT, id: /projectId } }\n'), LIST.replace(' }\n', ', filter: { type: PROJECT, id: /ownerId } }\n'), 'wider'],
    ['list filter of another type', LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id } }\n'), LIST.replace(' }\n', ', filter: { type: TEAM, id: /id } }\n'), 'wider'],
    ['list filter on another array', LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id, items: /data } }\n'), LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id } }\n'), 'wider'],
    ['list filter WRITE loosened to READ', LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id, access: WRITE } }\n'), LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id } }\n'), 'wider'],
    ['list filter READ tightened to WRITE', LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id } }\n'), LIST.replace(' }\n', ', filter: { type: PROJECT, id: /id, access: WRITE } }\n'), 'narrower'],
  ];
  it.each(cases)('%s', (_name, before, after, expected) => {
    const result = summary(before, after);
    const widest = result.changes.some((line) => line.startsWith('wider')) ? 'wider' : result.changes.some((line) => line.startsWith('narrower')) ? 'narrower' : 'neutral';
    expect([result.changes.length > 0, widest, result.wider]).toEqual([true, expected, expected === 'wider']);
  });

  it('default deny → authenticated is wider for undeclared requests', () => {
    const result = summary(PROJECT, PROJECT, 'default: deny', 'default: authenticated');
    expect(result.wider).toBe(true);
    expect(result.changes).toContain('wider GET (no route)');
  });

  it('a resolver added, removed or pointed elsewhere is wider (other scopes decide); only its timeout, neutral', () => {
    const res = (url: string, timeout = '') => `resources:\n  PROJECT:\n    resolver: { url: "${url}"${timeout} }\ndefault: deny`;
    const diff = (a: string, b: string) => diffPolicies(compile({ 'p.yaml': doc(PROJECT, a) }), compile({ 'p.yaml': doc(PROJECT, b) })).resources;
    expect(diff(res('http://h/p/{id}'), res('http://other/p/{id}'))).toEqual([{ type: 'PROJECT', classification: 'wider', difference: 'resolver http://h/p/{id} → http://other/p/{id}' }]);
    expect(diff('default: deny', res('http://h/p/{id}'))[0]?.classification).toBe('wider');
    expect(diff(res('http://h/p/{id}', ', timeout: 1s'), res('http://h/p/{id}', ', timeout: 2s'))[0]).toMatchObject({ classification: 'neutral' });
  });

  it("a resolver reading the host's own answer another way is wider: changed scopes pointers, self, or the {scopes} document", () => {
    const res = (mapping: string) => `resources:\n  TASK:\n    resolver: { url: "/tasks/{id}"${mapping} }\ndefault: deny`;
    const diff = (a: string, b: string) => diffPolicies(compile({ 'p.yaml': doc(PROJECT, a) }), compile({ 'p.yaml': doc(PROJECT, b) }));
    const byProject = ', scopes: [{ type: PROJECT, id: /projectId }]';
    const changed = diff(res(byProject), res(', scopes: [{ type: PROJECT, id: /ownerId }]'));
    expect(changed.resources).toEqual([{ type: 'TASK', classification: 'wider', difference: 'resolver answer read as PROJECT from "/projectId" → PROJECT from "/ownerId"' }]);
    expect(changed.wider).toBe(true);
    // Another scope type, one more entry, self, or back to the {scopes} document: each changes which scopes decide.
    expect(diff(res(byProject), res(', scopes: [{ type: TEAM, id: /projectId }]')).resources[0]?.classification).toBe('wider');
    expect(diff(res(byProject), res(`${byProject.slice(0, -1)}, { type: TEAM, id: /teamId }]`)).resources[0]?.classification).toBe('wider');
    expect(diff(res(byProject), res(', self: true')).resources[0]?.difference).toBe('resolver answer read as PROJECT from "/projectId" → self');
    expect(diff(res(''), res(byProject)).resources[0]?.difference).toBe('resolver answer read as {scopes} document → PROJECT from "/projectId"');
    expect(diff(res(byProject), res(byProject.replace('{ type', '{   type'))).resources).toEqual([]);
    // Added with a mapping, the report says how it reads.
    expect(diff('default: deny', res(byProject)).resources[0]?.difference).toBe('resolver added (/tasks/{id}, PROJECT from "/projectId")');
  });
});

describe('policy diff: what is no change', () => {
  it('moving a route between files, reordering, reformatting and renaming a parameter change nothing', () => {
    const before = compile({
      'a.yaml': doc(`${PROJECT}  - { path: /health, methods: [GET], public: true }\n`),
      'b.yaml': 'version: 1\nroutes:\n  - { path: /api/admin/**, methods: ["*"], permission: admin:write }\n',
    });
    const after = compile({
      'z.yaml': 'version: 1\nroutes:\n  - path: /health\n    methods: [GET]\n    public: true\n\n  - path: /api/admin/**\n    methods: ["*"]\n    permission: admin:write\n',
      'a.yaml': doc('  - path: /api/projects/:projectId\n    methods: [GET]\n    permission: project:read\n    resource: { type: PROJECT, id: projectId, access: READ }\n'),
    });
    expect(diffPolicies(before, after)).toEqual({ changes: [], resources: [], wider: false });
  });

  it('reports each (method, pattern) once, with both sides and their file:line', () => {
    const diff = diffPolicies(compile({ 'p.yaml': doc(PROJECT) }), compile({ 'p.yaml': doc('  - { path: /api/projects/:id, methods: [GET], permission: project:read }\n') }));
    expect(diff.changes).toEqual([
      expect.objectContaining({ method: 'GET', pattern: '/api/projects/:id', change: 'changed', classification: 'wider', differences: ['scope check dropped (was PROJECT READ)'] }),
      expect.objectContaining({ method: 'HEAD', pattern: '/api/projects/:id', classification: 'wider' }),
    ]);
    expect(diff.changes[0]!.old).toMatchObject({ decidedBy: '/api/projects/:id', source: 'p.yaml:4' });
  });
});

describe('iam-gateway policy diff OLD_DIR NEW_DIR', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'iam-diff-'));
    for (const [dir, text] of Object.entries({
      old: doc(PROJECT),
      same: `version: 1\ndefault: deny\nroutes:\n  - path: /api/projects/:projectId\n    methods: [GET]\n    permission: project:read\n    resource: { type: PROJECT, id: projectId, access: READ }\n`,
      narrower: doc(PROJECT.replace('READ', 'WRITE')),
      wider: doc('  - { path: /api/projects/:id, methods: [GET], permission: project:read }\n'),
      broken: 'version: 1\nroutes:\n  - { path: /x, methods: [FETCH] }\n',
    })) {
      mkdirSync(join(root, dir));
      writeFileSync(join(root, dir, 'p.yaml'), text);
    }
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('exit 0 with no change or nothing wider, 1 when anything is wider, 2 when a directory does not load', async () => {
    expect(await runPolicy(['diff', 'old', 'same'], root)).toMatchObject({ code: 0, stdout: 'no change in what the policy decides\n' });
    const narrower = await runPolicy(['diff', 'old', 'narrower'], root);
    expect(narrower.code).toBe(0);
    expect(narrower.stdout).toContain('narrower GET /api/projects/:id changed: access READ → WRITE');
    const wider = await runPolicy(['diff', 'old', 'wider'], root);
    expect(wider.code).toBe(1);
    expect(wider.stdout).toContain('wider    GET /api/projects/:id changed: scope check dropped (was PROJECT READ)');
    expect(wider.stdout).toContain('was /api/projects/:id (old/p.yaml:4): project:read on PROJECT READ');
    expect(wider.stdout).toMatch(/2 wider, 0 narrower, 0 neutral\n$/);
    const broken = await runPolicy(['diff', 'old', 'broken'], root);
    expect(broken.code).toBe(2);
    expect(broken.stdout).toContain('broken/p.yaml:3');
    expect((await runPolicy(['diff', 'old'], root)).code).toBe(2);
  });

  it('--json: the same changes, machine-readable', async () => {
    const answer = await runPolicy(['diff', 'old', 'wider', '--json'], root);
    expect(answer.code).toBe(1);
    const parsed = JSON.parse(answer.stdout) as { wider: boolean; changes: Array<{ method: string; classification: string; old: { source: string } }> };
    expect(parsed.wider).toBe(true);
    expect(parsed.changes.map((change) => `${change.classification} ${change.method}`)).toEqual(['wider GET', 'wider HEAD']);
    expect(parsed.changes[0]!.old.source).toBe('p.yaml:4');
  });
});

describe('policy diff sees everything that decides a request (match, default, every route key)', () => {
  const ADMIN = '  - { path: /api/admin/**, methods: ["*"], permission: admin:write }\n  - { path: /api/:area/users, methods: [GET], profile: optional }\n';

  it('match.case-sensitive turned on: GET /api/ADMIN/users falls from admin:write to any session, wider with that request as the example', async () => {
    const diff = diffPolicies(compile({ 'p.yaml': doc(ADMIN) }), compile({ 'p.yaml': doc(ADMIN, 'default: deny\nmatch: { case-sensitive: true }') }));
    expect(diff.wider).toBe(true);
    expect(diff.changes).toContainEqual(
      expect.objectContaining({
        method: 'GET',
        pattern: '/api/:area/users',
        classification: 'wider',
        example: 'GET /api/ADMIN/users',
        old: expect.objectContaining({ decidedBy: '/api/admin/**', check: expect.objectContaining({ kind: 'permission', permission: 'admin:write' }) }),
        new: expect.objectContaining({ decidedBy: '/api/:area/users', check: { kind: 'session', profile: 'optional' } }),
      }),
    );
    const root = mkdtempSync(join(tmpdir(), 'iam-diff-case-'));
    try {
      for (const [dir, head] of [['old', 'default: deny'], ['new', 'default: deny\nmatch: { case-sensitive: true }']] as const) {
        mkdirSync(join(root, dir));
        writeFileSync(join(root, dir, 'p.yaml'), doc(ADMIN, head));
      }
      const answer = await runPolicy(['diff', 'old', 'new'], root);
      expect(answer.code).toBe(1);
      expect(answer.stdout).toContain('wider    GET /api/:area/users changed: admin:write → any session (e.g. GET /api/ADMIN/users)');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  // Each of these printed "no change" before the request classes came from both tables.
  const ID = '  - { path: /:id, methods: ["*"] }\n';
  const V1 = `  - { path: /api/v1, methods: [GET], profile: optional }\n${ID}`;
  const USERS = '  - { path: /:a/users, methods: [GET], permission: a:write }\n';
  const hidden: Array<[string, string, string, string, Classification, string | null]> = [
    ['default changed behind a one-segment :id route (deeper paths still fall to it)', doc(ID), doc(ID, 'default: authenticated'), 'GET (no route)', 'wider', 'GET /*/*'],
    ['default changed for a method the route does not list (refused now)', doc(V1, 'default: authenticated'), doc(V1, 'default: allow'), 'POST /api/v1', 'narrower', null],
    ['a route added that takes a request whose parameter holds its segment', doc(USERS, 'default: authenticated'), doc(`${USERS}  - { path: /v1/:b, methods: ["*"] }\n`, 'default: authenticated'), 'GET /:a/users', 'wider', 'GET /v1/users'],
  ];
  it.each(hidden)('%s', (_name, before, after, where, classification, example) => {
    const diff = diffPolicies(compile({ 'p.yaml': before }), compile({ 'p.yaml': after }));
    expect(diff.changes.find((change) => `${change.method} ${change.pattern}` === where)).toMatchObject({ classification, example });
  });
});
