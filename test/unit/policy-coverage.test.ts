/**
 * `policy coverage --openapi FILE`: host operations no route covers (they fall to `default`) and routes
 * matching no operation, for OpenAPI 3.0 YAML and 3.1 JSON; exit 0 unless --fail-on-uncovered.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runPolicyCommand } from '../../src/cli/policy-command';
import type { CompiledPolicy } from '../../src/policy/compiled-policy';
import { compilePolicyFiles, loadPolicyDirectory } from '../../src/policy/load-policy-directory';
import { computeCoverage, OpenApiError, parseOpenApiOperations } from '../../src/policy-tools/policy-coverage';

const ROOT = join(__dirname, '../..');
const FIXTURES = join(ROOT, 'test/fixtures/policy-coverage');

async function cli(args: string[]): Promise<{ code: number; lines: string[]; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const stream = (append: (text: string) => void): Writable =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        append(chunk.toString());
        done();
      },
    });
  const code = await runPolicyCommand(['coverage', ...args], {
    stdout: stream((text) => (stdout += text)),
    stderr: stream((text) => (stderr += text)),
    env: {},
    cwd: ROOT,
  });
  return { code, lines: stdout.split('\n').filter((line) => line !== ''), stderr };
}

function policyOf(yaml: string): CompiledPolicy {
  const result = compilePolicyFiles([{ file: 'p.yaml', text: yaml }]);
  if (!result.policy) throw new Error(result.issues.map((issue) => issue.message).join('\n'));
  return result.policy;
}

describe('parseOpenApiOperations', () => {
  it('reads every operation of a 3.0 YAML document, with path templates and operation ids', () => {
    const operations = parseOpenApiOperations(readFileSync(join(FIXTURES, 'host-openapi.yaml'), 'utf8'));
    expect(operations).toHaveLength(15);
    expect(operations[3]).toEqual({
      method: 'GET',
      path: '/api/projects/{projectId}',
      operationId: 'getProject',
      segments: [
        { value: 'api', templated: false },
        { value: 'projects', templated: false },
        { value: '{projectId}', templated: true },
      ],
    });
  });

  it('reads a 3.1 JSON document: server base path with variables, $ref path items, HEAD', () => {
    const operations = parseOpenApiOperations(readFileSync(join(FIXTURES, 'versioned-openapi.json'), 'utf8'));
    expect(operations.map((operation) => `${operation.method} ${operation.path}`)).toEqual([
      'GET /api/v2/projects',
      'GET /api/v2/projects/{id}',
      'DELETE /api/v2/projects/{id}',
      'HEAD /api/v2/things/{id}',
    ]);
    const overridden = parseOpenApiOperations(readFileSync(join(FIXTURES, 'versioned-openapi.json'), 'utf8'), { basePath: '/' });
    expect(overridden[0].path).toBe('/projects');
  });

  it.each([
    ['swagger: "2.0"\npaths: {}\n', /Swagger 2.0 is not supported/],
    ['info: {}\n', /not an OpenAPI 3.x document/],
    ['[1, 2]\n', /not an OpenAPI document/],
    ['openapi: 3.0.0\npaths: { "projects": {} }\n', /does not start with/],
    ['openapi: 3.0.0\npaths: [\n', /not valid JSON or YAML/],
  ])('refuses %j', (text, message) => {
    expect(() => parseOpenApiOperations(text)).toThrow(OpenApiError);
    expect(() => parseOpenApiOperations(text)).toThrow(message);
  });
});

describe('computeCoverage', () => {
  it('covers an operation by the route the gateway selects; uncovered ones fall to default', async () => {
    const policy = (await loadPolicyDirectory(join(ROOT, 'policies'))).policy!;
    const report = computeCoverage(policy, parseOpenApiOperations(readFileSync(join(FIXTURES, 'host-openapi.yaml'), 'utf8')));
    expect(report.uncovered.map((operation) => operation.operationId)).toEqual(['listMembers', 'yearlyReport']);
    expect(report.unusedRoutes.map((route) => route.pattern)).toEqual(['/']);
    const byId = new Map(report.operations.map(({ operation, route }) => [operation.operationId, route?.pattern]));
    expect(byId.get('adminStats')).toBe('/api/admin/**');
    expect(byId.get('getProject')).toBe('/api/projects/:projectId');
  });

  it('matches templates against static route segments, methods (GET covers HEAD) and ** routes', () => {
    const policy = policyOf(`version: 1
routes:
  - { path: /api/v2/projects, methods: [GET], permission: p:list }
  - { path: /api/v2/projects/new, methods: [GET], permission: p:create }
  - { path: /api/v2/projects/:id, methods: [DELETE], permission: p:delete }
  - { path: /api/v2/things/:id, methods: [GET], permission: t:read }
  - { path: /api/v2/old/**, methods: ["*"], permission: o:any }
  - { path: /api/v2/projects/:id/archive, methods: [POST], permission: p:archive }
`);
    const report = computeCoverage(policy, parseOpenApiOperations(readFileSync(join(FIXTURES, 'versioned-openapi.json'), 'utf8')));
    // GET /projects/{id} has no GET route for a parameter (only the static /new): uncovered.
    expect(report.uncovered.map((operation) => `${operation.method} ${operation.path}`)).toEqual(['GET /api/v2/projects/{id}']);
    // /projects/new could be one of /projects/{id}: it matches the GET operation; /old/** and /archive match none.
    expect(report.unusedRoutes.map((route) => route.pattern)).toEqual(['/api/v2/old/**', '/api/v2/projects/:id/archive']);
  });
});

describe('iam-gateway policy coverage', () => {
  it('prints the report and exits 0 although operations are uncovered', async () => {
    const result = await cli(['--openapi', 'test/fixtures/policy-coverage/host-openapi.yaml', '--dir', 'policies']);
    expect(result.code).toBe(0);
    expect(result.lines).toEqual([
      'openapi: test/fixtures/policy-coverage/host-openapi.yaml, 15 operations; policy: policies, 12 routes',
      'uncovered operations (no route matches; they fall to default: deny):',
      '  GET /api/projects/{projectId}/members (listMembers)',
      '  GET /api/reports/{year}.csv (yearlyReport)',
      'routes matching no operation:',
      expect.stringMatching(/^ {2}example\.yaml:\d+ {2}GET \/$/),
      '13 of 15 operations covered, 2 uncovered; 1 of 12 routes match no operation',
    ]);
  });

  it('exits 1 with --fail-on-uncovered when something is uncovered, 0 when nothing is', async () => {
    expect((await cli(['--openapi', 'test/fixtures/policy-coverage/host-openapi.yaml', '--fail-on-uncovered'])).code).toBe(1);
    const full = await cli(['--openapi', 'test/fixtures/policy-coverage/versioned-openapi.json', '--base-path', '/api/admin', '--dir', 'test/fixtures/policy-check/clean', '--fail-on-uncovered']);
    expect(full.lines).toContain('uncovered operations: none');
    expect(full.code).toBe(0);
  });

  it('lists covered operations with their route when verbose', async () => {
    const result = await cli(['--openapi', 'test/fixtures/policy-coverage/host-openapi.yaml', '--verbose']);
    expect(result.lines).toContain('covered operations:');
    expect(result.lines.some((line) => /^ {2}POST \/api\/admin\/reindex \(reindex\) → example\.yaml:\d+ \* \/api\/admin\/\*\*$/.test(line))).toBe(true);
  });

  it('exits 1 on an unreadable or invalid description, 2 without --openapi', async () => {
    const missing = await cli(['--openapi', 'nope.yaml']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read nope\.yaml: ENOENT/);
    const invalid = await cli(['--openapi', 'policies/example.yaml']);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/not an OpenAPI 3\.x document/);
    expect((await cli([])).code).toBe(2);
  });
});
