import type { CompiledRoute } from '../../src/policy/compiled-policy';
import { parseRoutePattern, RouteTree, type MatchCounter } from '../../src/policy/route-tree';

/** A compiled route whose id is `name`; only methods and pattern matter to the tree. */
function route(id: string, methods: string[], pattern: string): CompiledRoute {
  return { id, source: { file: 't.yaml', line: 1 }, methods, pattern, public: false, permission: null, resource: null, mode: 'enforce' };
}

const ROUTES: CompiledRoute[] = [
  route('root', ['GET'], '/'),
  route('health', ['GET'], '/health'),
  route('projects-list', ['GET'], '/api/projects'),
  route('projects-create', ['POST'], '/api/projects'),
  route('project-new', ['GET'], '/api/projects/new'),
  route('project-get', ['GET'], '/api/projects/:projectId'),
  route('project-head', ['HEAD'], '/api/projects/:projectId/logo'),
  route('project-logo', ['GET'], '/api/projects/:projectId/logo'),
  route('project-update', ['PUT', 'PATCH'], '/api/projects/:projectId'),
  route('project-any', ['*'], '/api/projects/:projectId/settings'),
  route('project-settings-get', ['GET'], '/api/projects/:projectId/settings'),
  route('task-in-project', ['GET'], '/api/projects/:projectId/tasks/:taskId'),
  route('admin', ['*'], '/api/admin/**'),
  route('admin-users', ['GET'], '/api/admin/users'),
  route('files', ['GET'], '/files/**'),
  route('files-static-deep', ['GET'], '/files/a/b'),
  route('mixed-static', ['GET'], '/mix/fixed/end'),
  route('mixed-param', ['GET'], '/mix/:name/other'),
  route('mixed-wild', ['DELETE'], '/mix/**'),
];

interface Case {
  method: string;
  path: string;
  expect: string | null;
  params?: Record<string, string>;
}

const CASES: Case[] = [
  { method: 'GET', path: '/', expect: 'root', params: {} },
  { method: 'GET', path: '/health', expect: 'health', params: {} },
  { method: 'GET', path: '/health/', expect: 'health', params: {} },
  { method: 'POST', path: '/health', expect: null },
  { method: 'GET', path: '/healthz', expect: null },
  { method: 'GET', path: '/api/projects', expect: 'projects-list' },
  { method: 'POST', path: '/api/projects/', expect: 'projects-create' },
  { method: 'DELETE', path: '/api/projects', expect: null },
  // static beats param
  { method: 'GET', path: '/api/projects/new', expect: 'project-new', params: {} },
  // backtracking: the static child `new` has no PUT, so the param route answers
  { method: 'PUT', path: '/api/projects/new', expect: 'project-update', params: { projectId: 'new' } },
  { method: 'GET', path: '/api/projects/42', expect: 'project-get', params: { projectId: '42' } },
  { method: 'PATCH', path: '/api/projects/42/', expect: 'project-update', params: { projectId: '42' } },
  { method: 'DELETE', path: '/api/projects/42', expect: null },
  // GET covers HEAD; an explicit HEAD route wins over GET
  { method: 'HEAD', path: '/api/projects/42', expect: 'project-get', params: { projectId: '42' } },
  { method: 'HEAD', path: '/api/projects/42/logo', expect: 'project-head', params: { projectId: '42' } },
  { method: 'GET', path: '/api/projects/42/logo', expect: 'project-logo', params: { projectId: '42' } },
  // `*` methods: exact method first, then `*`
  { method: 'GET', path: '/api/projects/7/settings', expect: 'project-settings-get', params: { projectId: '7' } },
  { method: 'HEAD', path: '/api/projects/7/settings', expect: 'project-settings-get' },
  { method: 'DELETE', path: '/api/projects/7/settings', expect: 'project-any', params: { projectId: '7' } },
  { method: 'PROPFIND', path: '/api/projects/7/settings', expect: 'project-any' },
  { method: 'GET', path: '/api/projects/7/tasks/9', expect: 'task-in-project', params: { projectId: '7', taskId: '9' } },
  { method: 'GET', path: '/api/projects/7/tasks', expect: null },
  { method: 'GET', path: '/api/projects/7/tasks/9/x', expect: null },
  // `**` matches zero or more segments; static still beats it
  { method: 'GET', path: '/api/admin', expect: 'admin', params: {} },
  { method: 'POST', path: '/api/admin/', expect: 'admin' },
  { method: 'DELETE', path: '/api/admin/a/b/c', expect: 'admin' },
  { method: 'GET', path: '/api/admin/users', expect: 'admin-users' },
  { method: 'POST', path: '/api/admin/users', expect: 'admin' },
  { method: 'GET', path: '/api/administrator', expect: null },
  { method: 'GET', path: '/files/a/b', expect: 'files-static-deep' },
  // backtracking out of a static subtree that ends without a route, into `**`
  { method: 'GET', path: '/files/a/b/c', expect: 'files' },
  { method: 'GET', path: '/files/a', expect: 'files' },
  { method: 'GET', path: '/files', expect: 'files' },
  { method: 'GET', path: '/mix/fixed/end', expect: 'mixed-static' },
  { method: 'GET', path: '/mix/fixed/other', expect: 'mixed-param', params: { name: 'fixed' } },
  { method: 'DELETE', path: '/mix/fixed/end', expect: 'mixed-wild', params: {} },
  { method: 'GET', path: '/mix/fixed/nothing', expect: null },
  { method: 'GET', path: '/nothing/here', expect: null },
  { method: 'get', path: '/health', expect: null },
];

describe('RouteTree.match', () => {
  const tree = RouteTree.fromRoutes(ROUTES);
  const reversed = RouteTree.fromRoutes([...ROUTES].reverse());

  it.each(CASES)('$method $path → $expect', ({ method, path, expect: expected, params }) => {
    const match = tree.match(method, path);
    expect(match?.route.id ?? null).toBe(expected);
    if (params) expect(match?.params).toEqual(params);
    // specificity, not insertion order, decides
    expect(reversed.match(method, path)?.route.id ?? null).toBe(expected);
  });

  it('returns params as a plain object with each route’s own parameter names', () => {
    const named = RouteTree.fromRoutes([route('a', ['GET'], '/x/:id'), route('b', ['PUT'], '/x/:other')]);
    expect(named.match('GET', '/x/1')?.params).toEqual({ id: '1' });
    expect(named.match('PUT', '/x/2')?.params).toEqual({ other: '2' });
    expect(Object.getPrototypeOf(named.match('PUT', '/x/2')?.params)).toBe(Object.prototype);
  });

  it('keeps the first route when two claim the same pattern shape and method', () => {
    const dup = new RouteTree();
    expect(dup.insert(route('first', ['GET', 'PUT'], '/a/:x'))).toEqual([]);
    expect(dup.insert(route('second', ['PUT', 'POST'], '/a/:y'))).toEqual(['PUT']);
    expect(dup.match('PUT', '/a/1')).toEqual({ route: expect.objectContaining({ id: 'first' }), params: { x: '1' } });
    expect(dup.match('POST', '/a/1')).toEqual({ route: expect.objectContaining({ id: 'second' }), params: { y: '1' } });
  });

  it('does not let a param match an empty segment', () => {
    const t = RouteTree.fromRoutes([route('p', ['GET'], '/a/:x/b')]);
    expect(t.match('GET', '/a//b')).toBeNull();
  });
});

describe('RouteTree cost', () => {
  const BASE: CompiledRoute[] = [
    route('health', ['GET'], '/health'),
    route('projects-list', ['GET'], '/api/projects'),
    route('project-new', ['GET'], '/api/projects/new'),
    route('project-get', ['GET'], '/api/projects/:projectId'),
    route('project-update', ['PUT'], '/api/projects/:projectId'),
    route('task', ['GET'], '/api/projects/:projectId/tasks/:taskId'),
    route('admin', ['*'], '/api/admin/**'),
    route('files', ['GET'], '/files/**'),
    route('files-deep', ['GET'], '/files/a/b'),
    route('mixed', ['GET'], '/mix/:name/other'),
  ];
  /** The 10 base routes plus unrelated and sibling routes up to `total`. */
  function routesUpTo(total: number): CompiledRoute[] {
    const routes = [...BASE];
    for (let i = 0; routes.length < total; i++) {
      routes.push(route(`sibling-${i}`, ['GET'], `/api/projects/p${i}`));
      routes.push(route(`other-${i}`, ['POST'], `/svc${i}/:id/items/**`));
    }
    return routes;
  }
  const smallRoutes = routesUpTo(10);
  const largeRoutes = routesUpTo(10_000);
  const small = RouteTree.fromRoutes(smallRoutes);
  const large = RouteTree.fromRoutes(largeRoutes);

  it('builds trees of 10 and 10,000 routes', () => {
    expect(smallRoutes).toHaveLength(10);
    expect(largeRoutes).toHaveLength(10_000);
  });

  it.each([
    ['GET', '/api/projects/42', 'project-get'],
    ['PUT', '/api/projects/new', 'project-update'],
    ['GET', '/api/projects/7/tasks/9', 'task'],
    ['GET', '/files/a/b/c', 'files'],
    ['DELETE', '/api/admin/x/y', 'admin'],
    ['GET', '/mix/fixed/nothing', null],
    ['GET', '/nothing/here', null],
  ])('visits the same number of nodes for %s %s with 10 or 10,000 routes', (method, path, expected) => {
    const smallCount: MatchCounter = { visits: 0 };
    const largeCount: MatchCounter = { visits: 0 };
    expect(small.match(method, path, smallCount)?.route.id ?? null).toBe(expected);
    expect(large.match(method, path, largeCount)?.route.id ?? null).toBe(expected);
    expect(smallCount.visits).toBeGreaterThan(0);
    expect(largeCount.visits).toBe(smallCount.visits);
  });

  it('still finds the added routes in the large tree', () => {
    expect(large.match('GET', '/api/projects/p4994')?.route.id).toBe('sibling-4994');
    expect(large.match('POST', '/svc4994/1/items')?.route.id).toBe('other-4994');
    expect(large.match('POST', '/svc4994/1/items/x/y')?.params).toEqual({ id: '1' });
  });
});

describe('parseRoutePattern', () => {
  it.each([
    ['/', '/', 0],
    ['/a/', '/a', 1],
    ['/a/:id/**', '/a/:id/**', 3],
    ['/**', '/**', 1],
    ['/v1/things:batchGet', '/v1/things:batchGet', 2],
  ])('accepts %s', (input, pattern, count) => {
    const parsed = parseRoutePattern(input);
    expect(parsed).toMatchObject({ ok: true, pattern });
    expect(parsed.ok && parsed.segments.length).toBe(count);
  });

  it.each([
    ['a/b', 'must start with "/"'],
    ['/a//b', 'empty segment'],
    ['/a/**/b', '"**" is only allowed as the last segment'],
    ['/a/*', '"*" is only allowed'],
    ['/a/:1x', 'invalid parameter name'],
    ['/a/:', 'invalid parameter name'],
    ['/a/:id/:id', 'appears twice'],
    ['/a/../b', 'dot segment'],
    ['/a?x=1', 'contains "?"'],
  ])('rejects %s', (input, why) => {
    const parsed = parseRoutePattern(input);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.error).toContain(why);
  });
});

describe('RouteTree.prettyPrint', () => {
  it('shows every node with the routes ending there', () => {
    const printed = RouteTree.fromRoutes([
      route('t.yaml:1', ['GET'], '/health'),
      route('t.yaml:2', ['GET'], '/api/projects/:projectId'),
      route('t.yaml:3', ['PUT', 'PATCH'], '/api/projects/:projectId'),
      route('t.yaml:4', ['*'], '/api/admin/**'),
    ]).prettyPrint();
    expect(printed).toBe(
      [
        '/',
        '├── api',
        '│   ├── admin',
        '│   │   └── **  [* → t.yaml:4]',
        '│   └── projects',
        '│       └── :projectId  [GET → t.yaml:2; PUT,PATCH → t.yaml:3]',
        '└── health  [GET → t.yaml:1]',
      ].join('\n'),
    );
  });
});
