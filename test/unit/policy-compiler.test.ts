import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PolicyIssue, PolicyLoadResult } from '../../src/policy/compiled-policy';
import { compilePolicyFiles, hashPolicyFiles } from '../../src/policy/load-policy-directory';

/** Strips the first newline and the common indentation, so line numbers in tests are easy to read. */
function text(source: string): string {
  const lines = source.replace(/^\n/, '').split('\n');
  const indent = Math.min(...lines.filter((line) => line.trim() !== '').map((line) => line.length - line.trimStart().length));
  return lines.map((line) => line.slice(indent)).join('\n');
}

function compile(files: Record<string, string>, options?: { defaultResolverTimeoutMs?: number }): PolicyLoadResult {
  return compilePolicyFiles(Object.entries(files).map(([file, source]) => ({ file, text: text(source) })), options);
}

/** Issues reduced to what tests assert on: severity, kind, `file:line` and the related `file:line`. */
function summary(issues: PolicyIssue[]): string[] {
  return issues.map((issue) => {
    const at = issue.source ? `${issue.source.file}:${issue.source.line}` : '-';
    return `${issue.severity} ${issue.kind} ${at}${issue.related ? ` ~ ${issue.related.file}:${issue.related.line}` : ''}`;
  });
}

function policyOf(result: PolicyLoadResult) {
  if (!result.policy) throw new Error(`expected a policy, got:\n${summary(result.issues).join('\n')}`);
  return result.policy;
}

const DESIGN_EXAMPLE = readFileSync(join(__dirname, '../fixtures/policies/good/10-design-example.yaml'), 'utf8');

describe('a complete example policy', () => {
  const result = compilePolicyFiles([{ file: 'policy.yaml', text: DESIGN_EXAMPLE }]);
  const policy = policyOf(result);

  it('compiles without issues', () => {
    expect(result.issues).toEqual([]);
    expect(policy.defaultAction).toBe('deny');
    expect(policy.files).toEqual(['policy.yaml']);
    expect(policy.routes.map((route) => route.id)).toEqual(['policy.yaml:9', 'policy.yaml:15', 'policy.yaml:16', 'policy.yaml:17', 'policy.yaml:19', 'policy.yaml:23']);
    expect(policy.resources.PROJECT).toEqual({ resolver: { url: 'http://127.0.0.1:3000/internal/resources/projects/{id}', timeoutMs: 2000 } });
    expect(policy.resources.TASK.resolver?.url).toBe('http://127.0.0.1:3000/internal/resources/tasks/{id}');
  });

  it.each([
    { method: 'GET', path: '/health', expect: 'policy.yaml:9', public: true, permission: null, resource: null },
    { method: 'HEAD', path: '/health', expect: 'policy.yaml:9', public: true, permission: null, resource: null },
    { method: 'POST', path: '/health', expect: null },
    { method: 'GET', path: '/api/projects', expect: 'policy.yaml:15', public: false, permission: 'project:list', resource: null },
    {
      method: 'GET', path: '/api/projects/7', expect: 'policy.yaml:16', public: false, permission: 'project:read', params: { projectId: '7' },
      resource: { type: 'PROJECT', idParam: 'projectId', access: 'READ', resolve: 'optional' },
    },
    { method: 'HEAD', path: '/api/projects/7', expect: 'policy.yaml:16', permission: 'project:read' },
    {
      method: 'PUT', path: '/api/projects/7', expect: 'policy.yaml:17', public: false, permission: 'project:update', params: { projectId: '7' },
      resource: { type: 'PROJECT', idParam: 'projectId', access: 'WRITE', resolve: 'required' },
    },
    { method: 'PATCH', path: '/api/projects/7/', expect: 'policy.yaml:17', permission: 'project:update' },
    { method: 'DELETE', path: '/api/projects/7', expect: null },
    {
      method: 'DELETE', path: '/api/tasks/9', expect: 'policy.yaml:19', permission: 'task:delete', params: { taskId: '9' },
      resource: { type: 'TASK', idParam: 'taskId', access: 'WRITE', resolve: 'required' },
    },
    { method: 'GET', path: '/api/tasks/9', expect: null },
    { method: 'GET', path: '/api/admin', expect: 'policy.yaml:23', permission: 'admin:write', resource: null, params: {} },
    { method: 'POST', path: '/api/admin/users/1', expect: 'policy.yaml:23', permission: 'admin:write' },
    { method: 'GET', path: '/api', expect: null },
    { method: 'GET', path: '/', expect: null },
  ])('$method $path → $expect', (c) => {
    const match = policy.match(c.method, c.path);
    expect(match?.route.id ?? null).toBe(c.expect);
    if (!match) return;
    if ('public' in c) expect(match.route.public).toBe(c.public);
    if ('permission' in c) expect(match.route.permission).toBe(c.permission);
    if ('resource' in c) expect(match.route.resource).toEqual(c.resource);
    if ('params' in c) expect(match.params).toEqual(c.params);
  });

  it('applies the configured default resolver timeout', () => {
    const custom = policyOf(compilePolicyFiles([{ file: 'policy.yaml', text: DESIGN_EXAMPLE }], { defaultResolverTimeoutMs: 750 }));
    expect(custom.resources.PROJECT.resolver?.timeoutMs).toBe(750);
  });
});

describe('specificity does not depend on order', () => {
  const routes = [
    '- { path: /v/**, methods: ["*"], permission: v:any }',
    '- { path: /v/:kind, methods: [GET], permission: v:kind }',
    '- { path: /v/:kind/:id, methods: [GET], permission: v:item }',
    '- { path: /v/special, methods: [GET], permission: v:special }',
    '- { path: /v/special/:id, methods: [GET], permission: v:special-item }',
    '- { path: /v/special/fixed, methods: [POST], permission: v:fixed }',
  ];
  const inFile = (lines: string[]): string => `version: 1\nroutes:\n${lines.map((line) => `  ${line}`).join('\n')}\n`;
  const forward = policyOf(compilePolicyFiles([{ file: 'a.yaml', text: inFile(routes) }]));
  const backward = policyOf(compilePolicyFiles([{ file: 'a.yaml', text: inFile([...routes].reverse()) }]));
  const split = [
    { file: 'a.yaml', text: inFile(routes.slice(0, 3)) },
    { file: 'b.yaml', text: inFile(routes.slice(3)) },
  ];
  const splitForward = policyOf(compilePolicyFiles(split));
  const splitBackward = policyOf(compilePolicyFiles([...split].reverse()));

  it.each([
    { method: 'GET', path: '/v', expect: 'v:any' },
    { method: 'GET', path: '/v/special', expect: 'v:special' },
    { method: 'GET', path: '/v/other', expect: 'v:kind' },
    // #11.30: /v/special lists GET only and /v/** asks for another permission: refused, not v:any
    { method: 'DELETE', path: '/v/special', expect: undefined },
    { method: 'GET', path: '/v/special/3', expect: 'v:special-item' },
    { method: 'GET', path: '/v/special/fixed', expect: undefined },
    { method: 'POST', path: '/v/special/fixed', expect: 'v:fixed' },
    { method: 'GET', path: '/v/other/3', expect: 'v:item' },
    { method: 'GET', path: '/v/other/3/4', expect: 'v:any' },
  ])('$method $path → $expect', ({ method, path, expect: permission }) => {
    expect(forward.match(method, path)?.route.permission).toBe(permission);
    expect(backward.match(method, path)?.route.permission).toBe(permission);
    const id = splitForward.match(method, path)?.route.id;
    expect(splitForward.match(method, path)?.route.permission).toBe(permission);
    expect(splitBackward.match(method, path)?.route.id).toBe(id);
  });

  it('gives the same hash and file list whatever the order of the files', () => {
    expect(splitBackward.hash).toBe(splitForward.hash);
    expect(splitBackward.files).toEqual(['a.yaml', 'b.yaml']);
  });
});

describe('groups', () => {
  const result = compile({
    'g.yaml': `
      version: 1
      routes:
        - path: /p/:projectId
          permission: project:read
          resource: { type: PROJECT, id: projectId }
          mode: shadow
          routes:
            - { path: "", methods: [GET] }
            - { path: "", methods: [DELETE], permission: project:delete, mode: enforce }
            - { path: /members, methods: [GET, POST], permission: member:manage }
            - path: /tasks/:taskId
              methods: [PUT]
              permission: task:update
              resource: { type: TASK, id: taskId, resolve: required }
        - path: /open
          public: true
          routes:
            - { path: /docs, methods: [GET] }
            - { path: /me, methods: [GET], public: false }
            - path: /inner
              routes:
                - { path: /, methods: [GET] }
        - path: /
          routes:
            - { path: /root-child, methods: [GET], permission: root:read }
    `,
  });
  const policy = policyOf(result);

  it.each([
    { method: 'GET', path: '/p/1', expect: 'g.yaml:8', permission: 'project:read', mode: 'shadow', resource: { type: 'PROJECT', idParam: 'projectId', access: 'READ', resolve: 'optional' } },
    { method: 'DELETE', path: '/p/1', expect: 'g.yaml:9', permission: 'project:delete', mode: 'enforce', resource: { type: 'PROJECT', idParam: 'projectId', access: 'WRITE', resolve: 'optional' } },
    // GET+POST is not read-only: the default access is WRITE
    { method: 'GET', path: '/p/1/members', expect: 'g.yaml:10', permission: 'member:manage', mode: 'shadow', resource: { type: 'PROJECT', idParam: 'projectId', access: 'WRITE', resolve: 'optional' } },
    { method: 'PUT', path: '/p/1/tasks/2', expect: 'g.yaml:11', permission: 'task:update', mode: 'shadow', resource: { type: 'TASK', idParam: 'taskId', access: 'WRITE', resolve: 'required' }, params: { projectId: '1', taskId: '2' } },
    { method: 'GET', path: '/open/docs', expect: 'g.yaml:18', public: true, permission: null },
    { method: 'GET', path: '/open/me', expect: 'g.yaml:19', public: false, permission: null },
    { method: 'GET', path: '/open/inner', expect: 'g.yaml:22', public: true },
    { method: 'GET', path: '/root-child', expect: 'g.yaml:25', permission: 'root:read' },
    // a group matches nothing by itself
    { method: 'GET', path: '/open', expect: null },
    { method: 'GET', path: '/p/1/tasks', expect: null },
  ])('$method $path → $expect', (c) => {
    const match = policy.match(c.method, c.path);
    expect(match?.route.id ?? null).toBe(c.expect);
    if (!match) return;
    if ('permission' in c) expect(match.route.permission).toBe(c.permission);
    if ('public' in c) expect(match.route.public).toBe(c.public);
    if ('mode' in c) expect(match.route.mode).toBe(c.mode);
    if ('resource' in c) expect(match.route.resource).toEqual(c.resource);
    if ('params' in c) expect(match.params).toEqual(c.params);
  });

  it('defaults methods to every method and warns about types without resolvers', () => {
    expect(policy.routes.find((route) => route.id === 'g.yaml:8')?.methods).toEqual(['GET']);
    expect(summary(result.issues)).toEqual(['warning no-resolver g.yaml:8', 'warning no-resolver g.yaml:9', 'warning no-resolver g.yaml:10', 'warning no-resolver g.yaml:11']);
  });
});

describe('conflicts and duplicates', () => {
  it('reports two routes of the same shape with different outcomes, naming both files and lines', () => {
    const result = compile({
      'a.yaml': `
        version: 1
        routes:
          - { path: /api/projects/:id, methods: [GET], permission: project:read }
      `,
      'b.yaml': `
        version: 1
        routes:
          - path: /api/other
            methods: [GET]
          - path: /api/projects/:projectId/
            methods: [PUT, GET]
            permission: project:view
      `,
    });
    expect(result.policy).toBeNull();
    expect(summary(result.issues)).toEqual(['error conflict b.yaml:5 ~ a.yaml:3']);
    expect(result.issues[0].message).toBe('conflicting routes GET /api/projects/:id at a.yaml:3 and b.yaml:5');
  });

  it.each([
    ['different mode', '{ path: /x/:a, permission: x:r }', '{ path: /x/:b, methods: [GET], permission: x:r, mode: shadow }'],
    ['public vs protected', '{ path: /x/:a, methods: [GET], public: true }', '{ path: /x/:b, methods: [GET] }'],
    ['resource id at another position', '{ path: /x/:a/:b, methods: [GET], permission: x:r, resource: { type: X, id: a } }', '{ path: /x/:a/:b, methods: [GET], permission: x:r, resource: { type: X, id: b } }'],
    ['different resolve', '{ path: /x/:a, methods: [GET], permission: x:r, resource: { type: X, id: a } }', '{ path: /x/:b, methods: ["*"], permission: x:r, resource: { type: X, id: b, access: READ, resolve: required } }'],
    ['"**" routes', '{ path: /x/**, methods: [DELETE], permission: x:r }', '{ path: /x/**, methods: ["*"], permission: x:w }'],
  ])('conflict: %s', (_name, first, second) => {
    const result = compile({ 'c.yaml': `version: 1\nroutes:\n  - ${first}\n  - ${second}\n` });
    expect(summary(result.issues).filter((line) => line.startsWith('error'))).toEqual(['error conflict c.yaml:4 ~ c.yaml:3']);
  });

  it.each([
    ['GET vs HEAD', '{ path: /x, methods: [GET], permission: x:r }', '{ path: /x, methods: [HEAD], permission: x:h }'],
    ['disjoint methods', '{ path: /x/:a, methods: [GET], permission: x:r }', '{ path: /x/:b, methods: [PUT, DELETE], permission: x:w }'],
    ['static vs param', '{ path: /x/new, methods: [GET], permission: x:new }', '{ path: /x/:id, methods: [GET], permission: x:r }'],
    ['param vs "**"', '{ path: /x/:id, methods: [GET], permission: x:r }', '{ path: /x/**, methods: [GET], permission: x:any }'],
  ])('no conflict: %s', (_name, first, second) => {
    const result = compile({ 'c.yaml': `version: 1\nroutes:\n  - ${first}\n  - ${second}\n` });
    expect(summary(result.issues)).toEqual([]);
    expect(result.policy).not.toBeNull();
  });

  it('reports identical routes as a duplicate warning and serves the first', () => {
    const result = compile({
      'a.yaml': 'version: 1\nroutes:\n  - { path: /d/:x, methods: [GET, PUT], permission: d:rw }\n',
      'b.yaml': 'version: 1\nroutes:\n  - { path: /d/:y, permission: d:rw }\n',
    });
    const policy = policyOf(result);
    expect(summary(result.issues)).toEqual(['warning duplicate b.yaml:3 ~ a.yaml:3']);
    expect(policy.match('PUT', '/d/1')).toEqual({ route: expect.objectContaining({ id: 'a.yaml:3' }), params: { x: '1' } });
    expect(policy.match('POST', '/d/1')).toEqual({ route: expect.objectContaining({ id: 'b.yaml:3' }), params: { y: '1' } });
  });
});

describe('default action', () => {
  it('is deny when no file sets it, and files may agree', () => {
    expect(policyOf(compile({ 'a.yaml': 'version: 1\n' })).defaultAction).toBe('deny');
    expect(policyOf(compile({ 'a.yaml': 'version: 1\ndefault: allow\n', 'b.yaml': 'version: 1\ndefault: allow\n' })).defaultAction).toBe('allow');
    expect(policyOf(compile({ 'a.yaml': 'version: 1\n', 'b.yaml': 'version: 1\ndefault: authenticated\n' })).defaultAction).toBe('authenticated');
  });

  it('is an error naming both files when they disagree', () => {
    const result = compile({ 'a.yaml': 'version: 1\ndefault: allow\n', 'b.json': '{\n  "version": 1,\n  "default": "deny"\n}\n' });
    expect(result.policy).toBeNull();
    expect(summary(result.issues)).toEqual(['error default-mismatch b.json:3 ~ a.yaml:2']);
    expect(result.issues[0].message).toContain('a.yaml');
    expect(result.issues[0].message).toContain('b.json');
  });
});

describe('errors with file and line', () => {
  it.each<{ name: string; files: Record<string, string>; expect: string[] }>([
    {
      name: 'unknown key in a nested route (schema)',
      files: { 'p.yaml': `
        version: 1
        routes:
          - path: /a
            permission: a:read
            routes:
              - path: /b
                methods: [GET]
                descripton: typo
      ` },
      expect: ['error schema p.yaml:8'],
    },
    {
      name: 'unknown key in a JSON flow map',
      files: { 'p.json': '{\n  "version": 1,\n  "routes": [\n    { "path": "/a",\n      "pubic": true }\n  ]\n}\n' },
      expect: ['error schema p.json:5'],
    },
    {
      name: 'unknown top-level key, missing path, bad version',
      files: { 'p.yaml': 'version: 2\nroute: []\nroutes:\n  - methods: [GET]\n' },
      expect: ['error schema p.yaml:1', 'error schema p.yaml:2', 'error schema p.yaml:4'],
    },
    { name: 'bad YAML', files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a\n    permission: a: b\n  - path: /b\n' }, expect: ['error parse p.yaml:4'] },
    { name: 'bad YAML indentation', files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a\n   methods: [GET]\n' }, expect: ['error parse p.yaml:4'] },
    { name: 'bad JSON', files: { 'p.json': '{\n  "version": 1,\n  "routes": [\n    { "path": "/a", }\n    { "path": "/b" }\n  ]\n}\n' }, expect: ['error parse p.json:5'] },
    { name: 'duplicate key', files: { 'p.yaml': 'version: 1\nroutes: []\nroutes: []\n' }, expect: ['error parse p.yaml:3'] },
    { name: 'empty file', files: { 'p.yaml': '# nothing\n' }, expect: ['error schema p.yaml:1'] },
    { name: 'empty value (null) instead of a permission', files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a\n    methods: [GET]\n    permission:\n' }, expect: ['error schema p.yaml:5'] },
    { name: 'bad permission code', files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a\n    permission: "*:read"\n' }, expect: ['error schema p.yaml:4'] },
    { name: 'resolver URL without {id}', files: { 'p.yaml': 'version: 1\nresources:\n  P:\n    resolver: { url: "http://h/x" }\n' }, expect: ['error schema p.yaml:4'] },
    { name: 'bad resolver timeout', files: { 'p.yaml': 'version: 1\nresources:\n  P:\n    resolver:\n      url: "http://h/{id}"\n      timeout: 2m\n' }, expect: ['error schema p.yaml:6'] },
    {
      name: 'resource.id not a param of the path',
      files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a/:id\n    permission: a:read\n    resource: { type: A, id: aId }\n' },
      expect: ['error resource-id p.yaml:3'],
    },
    {
      name: 'group resource id missing from a child path',
      files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a\n    permission: a:read\n    resource: { type: A, id: aId }\n    routes:\n      - { path: /:aId, methods: [GET] }\n      - { path: /list, methods: [GET] }\n' },
      expect: ['warning no-resolver p.yaml:7', 'error resource-id p.yaml:8'],
    },
    { name: '"**" not last', files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a/**/b\n' }, expect: ['error path p.yaml:3'] },
    {
      name: 'a child path under a "**" group',
      files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /a/**\n    routes:\n      - { path: "", methods: [GET] }\n      - { path: /b, methods: [GET] }\n' },
      expect: ['error path p.yaml:6'],
    },
    { name: 'relative top-level path', files: { 'p.yaml': 'version: 1\nroutes:\n  - path: api/x\n' }, expect: ['error path p.yaml:3'] },
    { name: 'relative child path', files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /api\n    routes:\n      - path: x\n' }, expect: ['error path p.yaml:5'] },
    {
      name: 'group with methods',
      files: { 'p.yaml': 'version: 1\nroutes:\n  - path: /g\n    methods: [GET]\n    routes:\n      - { path: /x }\n' },
      expect: ['error group-methods p.yaml:4'],
    },
    {
      name: 'resource without any permission',
      files: { 'p.yaml': 'version: 1\nresources:\n  A: { resolver: { url: "http://h/{id}" } }\nroutes:\n  - path: /a/:id\n    resource: { type: A, id: id }\n' },
      expect: ['error resource-without-permission p.yaml:5'],
    },
    {
      name: 'resource type declared in two files',
      files: { 'a.yaml': 'version: 1\nresources:\n  A: {}\n', 'b.yaml': 'version: 1\nresources:\n  B: {}\n  A: {}\n' },
      expect: ['error duplicate-resource b.yaml:4 ~ a.yaml:3'],
    },
  ])('$name', ({ files, expect: expected }) => {
    const result = compile(files);
    expect(summary(result.issues)).toEqual(expected);
    expect(result.policy === null).toBe(expected.some((line) => line.startsWith('error')));
  });

  it('reports every error of several files at once', () => {
    const result = compile({
      'a.yaml': 'version: 1\nroutes:\n  - path: /a/:id\n    permission: a:read\n    resource: { type: A, id: nope }\n  - path: /b/**/c\n',
      'b.yaml': 'version: 1\nroutes:\n  - path: /b\n    method: [GET]\n',
      'c.yaml': 'version: 1\nroutes: [\n',
    });
    expect(summary(result.issues)).toEqual(['error resource-id a.yaml:3', 'error path a.yaml:6', 'error schema b.yaml:4', 'error parse c.yaml:3']);
    expect(result.issues[2].message).toContain('unknown key "method"');
  });

  it('refuses an empty set of files', () => {
    expect(summary(compilePolicyFiles([]).issues)).toEqual(['error empty -']);
  });
});

describe('warnings', () => {
  it('#11.30: refuses a route that is public and names a permission or a resource; a route inside a public group is checked as written', () => {
    const conflicting = compile({ 'p.yaml': 'version: 1\nroutes:\n  - { path: /a, methods: [GET], public: true, permission: a:read }\n  - { path: /b/:id, public: true, resource: { type: B, id: id } }\n' });
    expect(conflicting.policy).toBeNull();
    expect(summary(conflicting.issues)).toEqual(['error public-conflict p.yaml:3', 'error public-conflict p.yaml:4']);
    const result = compile({
      'p.yaml': `
        version: 1
        routes:
          - { path: /a, methods: [GET], public: true }
          - path: /pub
            public: true
            routes:
              - { path: /x/:id, methods: [GET], permission: x:read, resource: { type: X, id: id } }
          - path: /prot
            permission: p:read
            routes:
              - { path: /health, methods: [GET], public: true }
      `,
    });
    const policy = policyOf(result);
    expect(summary(result.issues)).toEqual(['warning no-resolver p.yaml:7']);
    expect(policy.match('GET', '/a')?.route).toMatchObject({ public: true, permission: null, resource: null });
    expect(policy.match('GET', '/pub/x/1')?.route).toMatchObject({ public: false, permission: 'x:read', resource: { type: 'X', idParam: 'id' } });
    expect(policy.match('GET', '/prot/health')?.route).toMatchObject({ public: true, permission: null });
  });

  it('warns about resource types that are undeclared or have no resolver', () => {
    const result = compile({
      'p.yaml': `
        version: 1
        resources:
          DECLARED: {}
          RESOLVED:
            resolver: { url: "https://h/r/{id}", timeout: 1500 }
        routes:
          - { path: /u/:id, methods: [GET], permission: u:read, resource: { type: UNDECLARED, id: id, resolve: required } }
          - { path: /d/:id, methods: [GET], permission: d:read, resource: { type: DECLARED, id: id } }
          - { path: /r/:id, methods: [GET], permission: r:read, resource: { type: RESOLVED, id: id } }
      `,
    });
    const policy = policyOf(result);
    expect(summary(result.issues)).toEqual(['warning no-resolver p.yaml:7', 'warning no-resolver p.yaml:8']);
    expect(result.issues[0].message).toContain('not declared');
    expect(result.issues[1].message).toContain('without a resolver');
    expect(policy.resources.DECLARED).toEqual({ resolver: null });
    expect(policy.resources.RESOLVED.resolver).toEqual({ url: 'https://h/r/{id}', timeoutMs: 1500 });
  });

  it('parses resolver timeouts in s and ms', () => {
    const policy = policyOf(compile({ 'p.yaml': 'version: 1\nresources:\n  A: { resolver: { url: "http://h/{id}", timeout: 2s } }\n  B: { resolver: { url: "http://h/{id}", timeout: 250ms } }\n' }));
    expect(policy.resources.A.resolver?.timeoutMs).toBe(2000);
    expect(policy.resources.B.resolver?.timeoutMs).toBe(250);
  });
});

describe('hash', () => {
  it('is sha256 over sorted name, NUL, content and changes with any edit or rename', () => {
    const files = [{ file: 'b.yaml', text: 'version: 1\n' }, { file: 'a.yaml', text: 'version: 1\n' }];
    const expected = createHash('sha256').update('a.yaml\u0000version: 1\nb.yaml\u0000version: 1\n').digest('hex');
    expect(hashPolicyFiles(files)).toBe(expected);
    expect(policyOf(compilePolicyFiles(files)).hash).toBe(expected);
    expect(hashPolicyFiles([files[1], { file: 'b.yaml', text: 'version: 1 \n' }])).not.toBe(expected);
    expect(hashPolicyFiles([files[1], { file: 'c.yaml', text: 'version: 1\n' }])).not.toBe(expected);
  });
});

describe('#11.12 profile: optional', () => {
  it('#11.12: is explicit, inherited from a group, kept only on routes without a permission, and part of the outcome', () => {
    const policy = policyOf(
      compile({
        'p.yaml': `
          version: 1
          routes:
            - path: /api/me
              methods: [GET]
            - path: /api/feed
              profile: optional
              routes:
                - { path: "", methods: [GET] }
                - { path: /strict, methods: [GET], profile: required }
                - { path: /paid, methods: [GET], permission: feed:read }
        `,
      }),
    );
    const byPattern = (pattern: string) => policy.routes.find((route) => route.pattern === pattern);
    expect(byPattern('/api/me')?.profile).toBeUndefined();
    expect(byPattern('/api/feed')?.profile).toBe('optional');
    expect(byPattern('/api/feed/strict')?.profile).toBeUndefined();
    // A permission is checked against the active profile's grant: the profile stays required.
    expect(byPattern('/api/feed/paid')?.profile).toBeUndefined();

    const conflict = compile({
      'a.yaml': `
        version: 1
        routes:
          - { path: /x, methods: [GET] }
      `,
      'b.yaml': `
        version: 1
        routes:
          - { path: /x, methods: [GET], profile: optional }
      `,
    });
    expect(summary(conflict.issues)).toContain('error conflict b.yaml:3 ~ a.yaml:3');
  });

  it('#11.12: an emptied or unknown value is a schema error, never "optional"', () => {
    for (const value of ['~', 'maybe', 'false']) {
      const result = compile({ 'p.yaml': `\n        version: 1\n        routes:\n          - { path: /x, methods: [GET], profile: ${value} }\n      ` });
      expect(result.policy).toBeNull();
      expect(result.issues.some((issue) => issue.kind === 'schema')).toBe(true);
    }
  });
});

describe('resolver URLs relative to upstream.url', () => {
  const withResolver = (url: string): string => `version: 1\nresources:\n  PROJECT:\n    resolver: { url: "${url}" }\nroutes: []\n`;
  const compileWith = (url: string, upstreamUrl?: string | null): PolicyLoadResult =>
    compilePolicyFiles([{ file: 'r.yaml', text: withResolver(url) }], upstreamUrl === undefined ? {} : { upstreamUrl });

  it('resolves a path against upstream.url (with or without its trailing slash, keeping its own path)', () => {
    expect(policyOf(compileWith('/internal/projects/{id}', 'http://host:4000')).resources.PROJECT!.resolver!.url).toBe('http://host:4000/internal/projects/{id}');
    expect(policyOf(compileWith('/internal/projects/{id}', 'http://host:4000/app/')).resources.PROJECT!.resolver!.url).toBe('http://host:4000/app/internal/projects/{id}');
    expect(policyOf(compileWith('http://other:5000/p/{id}', 'http://host:4000')).resources.PROJECT!.resolver!.url).toBe('http://other:5000/p/{id}');
  });

  it('keeps the path when no upstream is known (policy check, test, explain)', () => {
    expect(policyOf(compileWith('/internal/projects/{id}', null)).resources.PROJECT!.resolver!.url).toBe('/internal/projects/{id}');
  });

  it.each([
    ['a protocol-relative URL (another host)', '//evil.example/p/{id}'],
    ['a backslash authority', '/\\\\evil.example/p/{id}'],
    ['a path without {id}', '/internal/projects'],
    ['a relative path without a leading slash', 'internal/projects/{id}'],
  ])('refuses %s with file:line', (_name, url) => {
    const result = compileWith(url, 'http://host:4000');
    expect(result.policy).toBeNull();
    expect(result.issues[0]).toMatchObject({ severity: 'error', source: { file: 'r.yaml', line: expect.any(Number) } });
  });

  it.each(['/internal/../admin/{id}', '/internal/./p/{id}', '/../p/{id}'])('refuses the dot segments of %s', (url) => {
    const result = compileWith(url, 'http://host:4000');
    expect(result.policy).toBeNull();
    expect(result.issues).toEqual([expect.objectContaining({ kind: 'resolver-url', severity: 'error', source: expect.objectContaining({ file: 'r.yaml', line: 3 }) })]);
  });
});

describe('audience: the host a route\'s assertions are for', () => {
  it('is inherited from a group, absent on public routes, collected in `audiences`, and part of the outcome', () => {
    const policy = policyOf(
      compile({
        'p.yaml': `
          version: 1
          routes:
            - { path: /api/whoami, methods: [GET] }
            - path: /billing
              audience: billing
              routes:
                - { path: /invoices, methods: [GET], permission: invoice:read }
                - { path: /status, methods: [GET], public: true }
                - { path: /export, methods: [GET], permission: invoice:read, audience: billing-export }
        `,
      }),
    );
    const byPattern = (pattern: string) => policy.routes.find((route) => route.pattern === pattern);
    expect(byPattern('/api/whoami')?.audience).toBeUndefined();
    expect(byPattern('/billing/invoices')?.audience).toBe('billing');
    expect(byPattern('/billing/status')?.audience).toBeUndefined();
    expect(byPattern('/billing/export')?.audience).toBe('billing-export');
    expect([...policy.audiences].sort()).toEqual(['billing', 'billing-export']);

    const conflict = compile({
      'a.yaml': 'version: 1\nroutes:\n  - { path: /x, methods: [GET], audience: one }\n',
      'b.yaml': 'version: 1\nroutes:\n  - { path: /x, methods: [GET], audience: two }\n',
    });
    expect(summary(conflict.issues)).toContain('error conflict b.yaml:3 ~ a.yaml:3');
  });

  it('an emptied value, or one that is not visible ASCII, is a schema error', () => {
    for (const value of ['~', '""', '"two words"']) {
      const result = compile({ 'p.yaml': `version: 1\nroutes:\n  - { path: /x, methods: [GET], audience: ${value} }\n` });
      expect(result.policy).toBeNull();
      expect(result.issues.some((issue) => issue.kind === 'schema')).toBe(true);
    }
  });
});
