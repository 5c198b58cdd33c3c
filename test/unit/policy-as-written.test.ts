/**
 * #11.30: a policy is never served looser than written. Each case set runs through the real decision
 * engine (`policy test`), so what is asserted is the decision a request gets, not a compiler detail:
 * (a) a route's own permission or resource inside a `public` group is checked; `public: true` next to a
 *     permission or resource on one entry is a load error (`policy check` exits 1);
 * (b) a method a specific route does not list never falls through to a broader route or `default` that
 *     checks less: it is refused (403 ROUTE_NOT_DECLARED);
 * (c) a route without `resource` under a group with one keeps the group's scope check.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runPolicyCommand } from '../../src/cli/policy-command';

const temps: string[] = [];
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

async function policyCli(args: string[]): Promise<{ code: number; lines: string[] }> {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const code = await runPolicyCommand(args, { stdout: stream, stderr: stream, env: {}, cwd: tmpdir() });
  return { code, lines: text.split('\n').filter((line) => line !== '') };
}

/** `policy test` on `routes` with `cases`: every case must pass. */
async function expectCases(routes: string, cases: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'iam-as-written-'));
  temps.push(dir);
  writeFileSync(join(dir, 'routes.yaml'), routes);
  mkdirSync(join(dir, 'tests'));
  writeFileSync(join(dir, 'tests', 'cases.yaml'), `cases:\n${cases}`);
  const result = await policyCli(['test', dir]);
  expect(result.lines.filter((line) => !line.startsWith('PASS'))).toEqual([expect.stringMatching(/^\d+ passed, 0 failed$/)]);
  expect(result.code).toBe(0);
}

const ANYONE = '{ permissions: [] }';
const scoped = (permissions: string, project: string): string => `{ permissions: [${permissions}], scopes: [{ scopeType: PROJECT, scopeRefId: "${project}", accessMode: WRITE }] }`;
const cases = (rows: Array<[string, string, string, string]>): string =>
  rows.map(([method, path, principal, expected]) => `  - { name: "${method} ${path} as ${principal.replace(/"/g, '')}", request: { method: ${method}, path: "${path}" }, principal: ${principal}, expect: ${expected} }\n`).join('');

describe('#11.30 (a) public groups', () => {
  it('check a route’s own permission and resource; the rest of the group stays public', async () => {
    await expectCases(
      `version: 1
routes:
  - path: /pub
    public: true
    routes:
      - { path: /docs, methods: [GET] }
      - { path: /admin, methods: [GET], permission: admin:read }
      - { path: /drafts/:projectId, methods: [GET], permission: draft:read, resource: { type: PROJECT, id: projectId } }
      - path: /inner
        permission: inner:read
        routes:
          - { path: /page, methods: [GET] }
          - { path: /open, methods: [GET], public: true }
`,
      cases([
        ['GET', '/pub/docs', 'null', 'allow'],
        ['GET', '/pub/admin', 'null', '401'],
        ['GET', '/pub/admin', ANYONE, 'PERMISSION_DENIED'],
        ['GET', '/pub/admin', '{ permissions: [admin:read] }', 'allow'],
        ['GET', '/pub/drafts/2', 'null', '401'],
        ['GET', '/pub/drafts/2', scoped('draft:read', '1'), 'SCOPE_DENIED'],
        ['GET', '/pub/drafts/1', scoped('draft:read', '1'), 'allow'],
        ['GET', '/pub/inner/page', ANYONE, 'PERMISSION_DENIED'],
        ['GET', '/pub/inner/open', 'null', 'allow'],
      ]),
    );
  });

  it('refuse public: true next to a permission or resource on one entry: policy check exits 1 naming file:line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-as-written-'));
    temps.push(dir);
    writeFileSync(
      join(dir, 'routes.yaml'),
      'version: 1\nroutes:\n  - { path: /a, methods: [GET], public: true, permission: a:read }\n  - path: /g/:id\n    public: true\n    resource: { type: G, id: id }\n    routes:\n      - { path: /x, methods: [GET] }\n',
    );
    const result = await policyCli(['check', dir]);
    expect(result.code).toBe(1);
    expect(result.lines.filter((line) => line.includes(' error '))).toEqual([
      expect.stringMatching(/routes\.yaml:3: error public-conflict: \/a is "public: true" and names a permission/),
      expect.stringMatching(/routes\.yaml:4: error public-conflict: \/g\/:id is "public: true" and names a resource/),
    ]);
  });
});

describe('#11.30 (b) methods a route does not list', () => {
  const routes = `version: 1
default: authenticated
routes:
  - { path: /api/**, methods: ["*"] }
  - { path: /api/projects, methods: [GET], permission: project:list }
  - { path: /api/projects/:projectId, methods: [GET], permission: project:read, resource: { type: PROJECT, id: projectId } }
  - { path: /api/projects/:projectId/archive, methods: [POST], permission: project:archive }
  - { path: /api/help/:page, methods: [GET], public: true }
  - { path: /api/reports/:id, methods: [GET], permission: report:read }
  - { path: /api/reports/**, methods: ["*"], permission: report:read }
  - { path: /admin, methods: [GET], permission: admin:read }
`;

  it('are refused when the broader route or the default checks less, and fall through otherwise', async () => {
    await expectCases(
      routes,
      cases([
        // the broader /api/** needs only a session
        ['DELETE', '/api/projects/1', scoped('', '2'), 'ROUTE_NOT_DECLARED'],
        ['PUT', '/api/projects/1', ANYONE, 'ROUTE_NOT_DECLARED'],
        ['PROPFIND', '/api/projects/1', ANYONE, 'ROUTE_NOT_DECLARED'],
        ['POST', '/api/projects', ANYONE, 'ROUTE_NOT_DECLARED'],
        ['GET', '/api/projects/1/archive', ANYONE, 'ROUTE_NOT_DECLARED'],
        // no broader route: `default: authenticated` checks less than admin:read
        ['POST', '/admin', ANYONE, 'ROUTE_NOT_DECLARED'],
        ['POST', '/admin', 'null', 'ROUTE_NOT_DECLARED'],
        // what the routes list still works
        ['GET', '/api/projects/1', scoped('project:read', '1'), 'allow'],
        ['HEAD', '/api/projects/1', scoped('project:read', '1'), 'allow'],
        ['GET', '/api/projects/2', scoped('project:read', '1'), 'SCOPE_DENIED'],
        ['POST', '/api/projects/1/archive', '{ permissions: [project:archive] }', 'allow'],
        // ... and fall through when the broader route or the default checks at least as much:
        // a public page: the broader /api/** (a session) checks more
        ['POST', '/api/help/x', 'null', '401'],
        ['POST', '/api/help/x', ANYONE, 'allow'],
        // the same permission on the broader route
        ['DELETE', '/api/reports/1', '{ permissions: [report:read] }', 'allow'],
        ['DELETE', '/api/reports/1', ANYONE, 'PERMISSION_DENIED'],
        // paths no route declares: the broader route / the default, as before
        ['GET', '/api/other', ANYONE, 'allow'],
        ['GET', '/elsewhere', 'null', '401'],
      ]),
    );
  });

  it('with default: allow, a protected path is not opened for its other methods', async () => {
    await expectCases(
      'version: 1\ndefault: allow\nroutes:\n  - { path: /admin/users/:id, methods: [GET], permission: admin:read }\n  - { path: /login, methods: [POST], public: true }\n',
      cases([
        ['DELETE', '/admin/users/1', 'null', 'ROUTE_NOT_DECLARED'],
        ['GET', '/login', 'null', 'allow'],
        ['GET', '/anything', 'null', 'allow'],
      ]),
    );
  });

  it('policy check lists the refused methods per path (a warning: refusing is the safe reading)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-as-written-'));
    temps.push(dir);
    writeFileSync(join(dir, 'routes.yaml'), routes);
    const result = await policyCli(['check', dir]);
    expect(result.code).toBe(0);
    expect(result.lines.filter((line) => line.includes('refused-method')).map((line) => line.replace(/^.*?routes\.yaml:/, 'routes.yaml:'))).toEqual([
      'routes.yaml:5: warning refused-method: POST, PUT, PATCH, DELETE, OPTIONS, TRACE, other methods of /api/projects are refused (403 ROUTE_NOT_DECLARED): no route of that path lists them, and /api/** (routes.yaml:4) checks less; list them on a route of /api/projects if the host serves them',
      'routes.yaml:6: warning refused-method: POST, PUT, PATCH, DELETE, OPTIONS, TRACE, other methods of /api/projects/:projectId are refused (403 ROUTE_NOT_DECLARED): no route of that path lists them, and /api/** (routes.yaml:4) checks less; list them on a route of /api/projects/:projectId if the host serves them',
      'routes.yaml:7: warning refused-method: GET, HEAD, PUT, PATCH, DELETE, OPTIONS, TRACE, other methods of /api/projects/:projectId/archive are refused (403 ROUTE_NOT_DECLARED): no route of that path lists them, and /api/** (routes.yaml:4) checks less; list them on a route of /api/projects/:projectId/archive if the host serves them',
    ]);
  });

  it('policy explain names the refusal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-as-written-'));
    temps.push(dir);
    writeFileSync(join(dir, 'routes.yaml'), routes);
    const result = await policyCli(['explain', 'DELETE', '/api/projects/7', '--dir', dir]);
    expect(result.code).toBe(0);
    expect(result.lines).toContainEqual(expect.stringMatching(/^outcome +deny: 403 IAM_ACCESS_DENIED, step ROUTE_NOT_DECLARED \(DELETE is not declared for \/api\/projects\/:projectId, and the broader route \/api\/\*\* at routes\.yaml:4 checks less\)$/));
  });
});

describe('#11.30 (c) a route without resource under a group with one', () => {
  it('keeps the group’s scope check, through nested and public groups', async () => {
    await expectCases(
      `version: 1
routes:
  - path: /api/projects/:projectId
    permission: project:read
    resource: { type: PROJECT, id: projectId }
    routes:
      - { path: "", methods: [GET] }
      - { path: /tasks, methods: [GET], permission: task:read }
      - path: /board
        routes:
          - { path: /columns, methods: [GET, PUT], permission: board:edit }
      - path: /public
        public: true
        routes:
          - { path: /summary, methods: [GET] }
          - { path: /members, methods: [GET], permission: member:read }
`,
      cases([
        ['GET', '/api/projects/2', scoped('project:read', '1'), 'SCOPE_DENIED'],
        ['GET', '/api/projects/2/tasks', scoped('task:read', '1'), 'SCOPE_DENIED'],
        ['GET', '/api/projects/1/tasks', scoped('task:read', '1'), 'allow'],
        ['PUT', '/api/projects/2/board/columns', scoped('board:edit', '1'), 'SCOPE_DENIED'],
        ['PUT', '/api/projects/1/board/columns', scoped('board:edit', '1'), 'allow'],
        ['GET', '/api/projects/2/public/summary', 'null', 'allow'],
        ['GET', '/api/projects/2/public/members', 'null', '401'],
        ['GET', '/api/projects/2/public/members', scoped('member:read', '1'), 'SCOPE_DENIED'],
        ['GET', '/api/projects/1/public/members', scoped('member:read', '1'), 'allow'],
      ]),
    );
  });
});
