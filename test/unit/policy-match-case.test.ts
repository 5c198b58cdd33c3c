/**
 * #11.5: static path segments match case-insensitively by default (hosts built on Express, @koa/router or
 * ASP.NET route `/api/ADMIN/stats` to the `/api/admin/stats` handler), `match: { case-sensitive: true }`
 * restores exact matching, and routes differing only in case are a load error naming both file:lines.
 */
import type { PolicyIssue, PolicyLoadResult } from '../../src/policy/compiled-policy';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import { lintPolicy } from '../../src/policy-tools/policy-lint';
import { RouteTree, type MatchCounter } from '../../src/policy/route-tree';

function compile(files: Record<string, string>): PolicyLoadResult {
  return compilePolicyFiles(Object.entries(files).map(([file, text]) => ({ file, text })));
}

function summary(issues: PolicyIssue[]): string[] {
  return issues.map((issue) => `${issue.severity} ${issue.kind} ${issue.source?.file}:${issue.source?.line}${issue.related ? ` ~ ${issue.related.file}:${issue.related.line}` : ''}`);
}

/** A protected admin area next to every kind of weaker route a differently-cased path could fall to. */
const HOLES = `version: 1
default: authenticated
routes:
  - { path: /api/admin/**, methods: ["*"], permission: admin:write }
  - { path: /api/admin/stats, methods: [GET], permission: admin:read }
  - { path: /api/:area/stats, methods: [GET], public: true }
  - { path: /api/:area, methods: [POST], public: true }
  - { path: /files/**, methods: [GET], public: true }
  - { path: /files/Secret/:name, methods: [GET], permission: files:secret }
  - { path: /files/caf%C3%A9/menu, methods: [GET], permission: files:menu }
  - { path: /api/projects/:projectId, methods: [GET], permission: project:read }
`;

describe('#11.5 case-insensitive static segments (the default)', () => {
  const result = compile({ 'routes.yaml': HOLES });
  const policy = result.policy!;
  const routeOf = (method: string, path: string): string | null => policy.match(method, path)?.route.permission ?? (policy.match(method, path) ? 'public' : null);

  it('compiles, and says so', () => {
    expect(result.issues.filter((issue) => issue.severity === 'error')).toEqual([]);
    expect(policy.caseSensitive).toBe(false);
  });

  it.each([
    // would fall to the public `:area` route
    ['GET', '/api/ADMIN/stats', 'admin:read'],
    ['GET', '/API/Admin/Stats', 'admin:read'],
    ['GET', '/api/admin/STATS', 'admin:read'],
    // would fall to the public `/api/:area` route, or to `default: authenticated`
    ['POST', '/api/Admin', 'admin:write'],
    ['POST', '/api/ADMIN/reindex', 'admin:write'],
    ['DELETE', '/Api/aDmIn/users/1', 'admin:write'],
    // would fall to the public `/files/**`
    ['GET', '/files/secret/plans', 'files:secret'],
    ['GET', '/FILES/SECRET/plans', 'files:secret'],
    // percent escapes: hex digits and letters alike
    ['GET', '/files/CAF%C3%A9/Menu', 'files:menu'],
    // the exact spelling still matches
    ['GET', '/api/admin/stats', 'admin:read'],
    ['GET', '/files/Secret/plans', 'files:secret'],
    // unrelated paths are unaffected
    ['GET', '/api/other/stats', 'public'],
    ['GET', '/files/readme', 'public'],
  ])('%s %s is decided by the route asking for %s', (method, path, expected) => {
    expect(routeOf(method, path)).toBe(expected);
  });

  it('keeps parameter values as the client sent them', () => {
    expect(policy.match('GET', '/API/Projects/AbC-42')?.params).toEqual({ projectId: 'AbC-42' });
    expect(policy.match('GET', '/FILES/secret/Plans.PDF')?.params).toEqual({ name: 'Plans.PDF' });
  });

  it('folds once per lookup: visits as many tree nodes for any spelling, with 10 or 10,000 routes', () => {
    const route = (id: string, pattern: string) => ({ id, source: { file: 't', line: 1 }, methods: ['GET'], pattern, public: false, permission: null, resource: null, mode: 'enforce' as const });
    const base = [route('admin', '/api/admin/**'), route('stats', '/api/admin/stats'), route('area', '/api/:area/stats')];
    const many = [...base];
    for (let i = 0; many.length < 10_000; i++) many.push(route(`r${i}`, `/api/Area${i}/stats/:x`));
    const small = RouteTree.fromRoutes(base);
    const large = RouteTree.fromRoutes(many);
    const visits = (tree: RouteTree, path: string): number => {
      const counter: MatchCounter = { visits: 0 };
      expect(tree.match('GET', path, counter)?.route.id).toBe('stats');
      return counter.visits;
    };
    const expected = visits(small, '/api/admin/stats');
    for (const path of ['/api/admin/stats', '/API/ADMIN/STATS', '/api/Admin/stats']) {
      expect(visits(small, path)).toBe(expected);
      expect(visits(large, path)).toBe(expected);
    }
    expect(large.match('GET', '/api/AREA77/Stats/q')?.route.id).toBe('r77');
  });

  it('lint: a lower-case percent escape is no longer unreachable (requests arrive upper-cased, matching folds both)', () => {
    const loaded = compile({ 'p.yaml': 'version: 1\nroutes:\n  - { path: /files/caf%c3%a9, methods: [GET], permission: f:r }\n' });
    expect(loaded.policy!.match('GET', '/files/caf%C3%A9')?.route.id).toBe('p.yaml:3');
    expect(lintPolicy(loaded.policy!).filter((issue) => issue.kind === 'unreachable')).toEqual([]);
  });
});

describe('#11.5 routes differing only in case are a load error', () => {
  it('names both file:lines, across files', () => {
    const result = compile({
      'a.yaml': 'version: 1\nroutes:\n  - { path: /api/admin/stats, methods: [GET], permission: admin:read }\n',
      'b.yaml': 'version: 1\nroutes:\n  - { path: /api/other, methods: [GET] }\n  - { path: /api/Admin/Stats, methods: [GET], public: true }\n',
    });
    expect(result.policy).toBeNull();
    expect(summary(result.issues)).toEqual(['error case-duplicate b.yaml:4 ~ a.yaml:3']);
    expect(result.issues[0].message).toContain('a.yaml:3');
    expect(result.issues[0].message).toContain('b.yaml:4');
  });

  it.each([
    ['same outcome', '{ path: /x/Y/:id, methods: [GET], permission: x:r }', '{ path: /x/y/:other, methods: [GET], permission: x:r }'],
    ['other methods', '{ path: /x/Y, methods: [GET], permission: x:r }', '{ path: /X/y, methods: [POST], permission: x:w }'],
    ['"**" routes', '{ path: /Docs/**, methods: ["*"], public: true }', '{ path: /docs/**, methods: [GET], permission: d:r }'],
  ])('also with %s', (_name, first, second) => {
    const result = compile({ 'c.yaml': `version: 1\nroutes:\n  - ${first}\n  - ${second}\n` });
    expect(summary(result.issues).filter((line) => line.startsWith('error'))).toEqual(['error case-duplicate c.yaml:4 ~ c.yaml:3']);
  });

  it('also through groups', () => {
    const result = compile({
      'g.yaml': 'version: 1\nroutes:\n  - path: /API\n    permission: a:r\n    routes:\n      - { path: /items, methods: [GET] }\n  - { path: /api/ITEMS, methods: [GET], public: true }\n',
    });
    expect(summary(result.issues)).toEqual(['error case-duplicate g.yaml:7 ~ g.yaml:6']);
  });
});

describe('#11.5 match: { case-sensitive: true }', () => {
  const exact = `version: 1\nmatch: { case-sensitive: true }\n${HOLES.replace('version: 1\n', '')}`;

  it('restores exact matching', () => {
    const policy = compile({ 'routes.yaml': exact }).policy!;
    expect(policy.caseSensitive).toBe(true);
    expect(policy.match('GET', '/api/admin/stats')?.route.permission).toBe('admin:read');
    expect(policy.match('GET', '/api/ADMIN/stats')?.route.public).toBe(true);
    expect(policy.match('GET', '/files/secret/plans')?.route.public).toBe(true);
  });

  it('allows routes differing only in case', () => {
    const result = compile({ 'c.yaml': 'version: 1\nmatch: { case-sensitive: true }\nroutes:\n  - { path: /x/Y, methods: [GET], permission: x:r }\n  - { path: /x/y, methods: [GET], public: true }\n' });
    expect(result.issues).toEqual([]);
    expect(result.policy!.match('GET', '/x/Y')?.route.id).toBe('c.yaml:4');
    expect(result.policy!.match('GET', '/x/y')?.route.id).toBe('c.yaml:5');
  });

  it('applies to the whole directory: files that set it must agree (error naming both), files that do not follow', () => {
    const follows = compile({ 'a.yaml': 'version: 1\nmatch: { case-sensitive: true }\n', 'b.yaml': 'version: 1\nroutes:\n  - { path: /A, methods: [GET] }\n' });
    expect(follows.policy!.caseSensitive).toBe(true);
    expect(follows.policy!.match('GET', '/a')).toBeNull();
    const agree = compile({ 'a.yaml': 'version: 1\nmatch: { case-sensitive: false }\n', 'b.yaml': 'version: 1\nmatch:\n  case-sensitive: false\n' });
    expect(agree.policy!.caseSensitive).toBe(false);
    const disagree = compile({ 'a.yaml': 'version: 1\nmatch: { case-sensitive: true }\n', 'b.yaml': 'version: 1\nmatch:\n  case-sensitive: false\n' });
    expect(disagree.policy).toBeNull();
    expect(summary(disagree.issues)).toEqual(['error match-mismatch b.yaml:3 ~ a.yaml:2']);
  });

  it.each([
    ['match: { case-sensitive: yes }', 'error schema p.yaml:2'],
    ['match: { casesensitive: true }', 'error schema p.yaml:2'],
    ['match: { case-sensitive: ~ }', 'error schema p.yaml:2'],
    ['match: true', 'error schema p.yaml:2'],
  ])('refuses %s', (line, expected) => {
    expect(summary(compile({ 'p.yaml': `version: 1\n${line}\n` }).issues)).toEqual([expected]);
  });
});
