/**
 * `policy explain METHOD PATH`: the normalized path (or the refusal), the selected route with file:line,
 * its permission, resource and mode, or why nothing matched and what `default` then does.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runPolicyCommand } from '../../src/cli/policy-command';
import type { CompiledPolicy } from '../../src/policy/compiled-policy';
import { compilePolicyFiles, loadPolicyDirectory } from '../../src/policy/load-policy-directory';
import { explainRequest, formatExplanation } from '../../src/policy-tools/policy-explain';

const ROOT = join(__dirname, '../..');

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const stream = (append: (text: string) => void): Writable =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        append(chunk.toString());
        done();
      },
    });
  const code = await runPolicyCommand(['explain', ...args], {
    stdout: stream((text) => (stdout += text)),
    stderr: stream((text) => (stderr += text)),
    env: {},
    cwd: ROOT,
  });
  return { code, stdout, stderr };
}

/** `example.yaml:<line>` of the first line of policies/example.yaml containing `snippet` (the file may be edited). */
function at(snippet: string): string {
  const index = readFileSync(join(ROOT, 'policies/example.yaml'), 'utf8').split('\n').findIndex((line) => line.includes(snippet));
  if (index < 0) throw new Error(`policies/example.yaml has no line with ${snippet}`);
  return `example.yaml:${index + 1}`;
}
const HEALTH = at('- path: /health');
const PROJECT_GET = at('{ methods: [GET], path: /:projectId,');
const PROJECT_UPDATE = at('{ methods: [PUT, PATCH], path: /:projectId,');
const TASK_GET = at('- path: /api/tasks/:taskId');
const ADMIN = at('- path: /api/admin/**');

let example: CompiledPolicy;
beforeAll(async () => {
  example = (await loadPolicyDirectory(join(ROOT, 'policies'))).policy!;
});

describe('explainRequest', () => {
  it('names the most specific route with its params, permission and resource', () => {
    const explanation = explainRequest(example, 'put', '/api/projects/7?x=1');
    expect(explanation.normalized).toEqual({ ok: true, path: '/api/projects/7', search: '?x=1' });
    expect(explanation.match?.route).toMatchObject({
      id: PROJECT_UPDATE,
      pattern: '/api/projects/:projectId',
      permission: 'project:update',
      resource: { type: 'PROJECT', idParam: 'projectId', access: 'WRITE', resolve: 'required' },
      mode: 'enforce',
    });
    expect(explanation.match?.params).toEqual({ projectId: '7' });
    expect(explanation.resolver?.url).toBe('/internal/resources/projects/{id}');
  });

  it('normalizes first, exactly like the proxy', () => {
    expect(explainRequest(example, 'GET', '/api/projects/%31/tasks/../').normalized).toEqual({ ok: true, path: '/api/projects/1/', search: '' });
    expect(explainRequest(example, 'GET', '/api/projects/1/tasks/../').match?.route.id).toBe(PROJECT_GET);
    expect(explainRequest(example, 'GET', '/api/%2e%2e%2fadmin').normalized).toEqual({ ok: false, reason: "encoded '/' in path" });
  });

  it('lists the methods that do match when the asked one is not declared', () => {
    const explanation = explainRequest(example, 'DELETE', '/api/projects/3');
    expect(explanation.match).toBeNull();
    expect(explanation.otherMethods.map(({ method, route }) => `${method} ${route.id}`)).toEqual([
      `GET ${PROJECT_GET}`,
      `HEAD ${PROJECT_GET}`,
      `PUT ${PROJECT_UPDATE}`,
      `PATCH ${PROJECT_UPDATE}`,
    ]);
  });

  it('says /iam is the gateway’s own', () => {
    expect(explainRequest(example, 'GET', '/iam/auth/me')).toMatchObject({ iam: true, match: null });
  });
});

describe('formatExplanation', () => {
  it('a protected route with a resolver', () => {
    expect(formatExplanation(explainRequest(example, 'GET', '/api/tasks/a%20b'))).toEqual([
      'request     GET /api/tasks/a%20b',
      'normalized  /api/tasks/a%20b',
      `route       ${TASK_GET}  GET /api/tasks/:taskId  (taskId=a%20b)`,
      'mode        enforce',
      'permission  task:read',
      'resource    TASK "a b" (from :taskId), access READ, resolve optional',
      'resolver    GET /internal/resources/tasks/a%20b on upstream.url (timeout 2000 ms; 404 → 404 IAM_RESOURCE_NOT_FOUND)',
      'scopes      read from the answer {"scopes": [{type, id}, …]} (none: the resource itself); another answer → 502',
      'needs       a valid session (401), then an active profile for the client type, then permission task:read (403 PERMISSION_DENIED), ' +
        'then a scope covering the scopes the resolver answers for TASK a b for READ (403 SCOPE_DENIED; unscoped profiles pass)',
    ]);
  });

  it('a filtered list says which elements a caller sees', () => {
    const lines = formatExplanation(explainRequest(example, 'GET', '/api/projects'));
    expect(lines).toContain(
      'filter      the array at "/projects" keeps the elements whose "/id" is a PROJECT the caller\'s profile covers for READ; ' +
        'a profile covering every PROJECT gets the answer untouched; an answer that cannot be filtered is 502 IAM_FILTER_FAILED',
    );
    expect(formatExplanation(explainRequest(example, 'POST', '/api/projects')).some((line) => line.startsWith('filter'))).toBe(false);
  });

  it("a resolver that reads the host's own representation says how: pointers, or self", () => {
    const result = compilePolicyFiles([
      {
        file: 'p.yaml',
        text:
          'version: 1\nresources:\n  TASK: { resolver: { url: "/tasks/{id}", scopes: [{ type: PROJECT, id: /projectId }, { type: TEAM, id: "/a~1b/~0c" }] } }\n' +
          '  PROJECT: { resolver: { url: "/projects/{id}", self: true } }\nroutes:\n' +
          '  - { path: /tasks/:id, methods: [GET], permission: task:read, resource: { type: TASK, id: id } }\n' +
          '  - { path: /projects/:id, methods: [GET], permission: project:read, resource: { type: PROJECT, id: id } }\n',
      },
    ]);
    const policy = result.policy!;
    expect(formatExplanation(explainRequest(policy, 'GET', '/tasks/3'))).toContain(
      'scopes      PROJECT from "/projectId", TEAM from "/a~1b/~0c" in the host\'s own answer (an array: one scope per element); a missing value, or one not a string or an integer → 502',
    );
    expect(formatExplanation(explainRequest(policy, 'GET', '/projects/2'))).toContain('scopes      PROJECT 2 itself, on any JSON 200 (self); an answer that is not JSON → 502');
  });

  it('a public route answering HEAD through GET', () => {
    expect(formatExplanation(explainRequest(example, 'HEAD', '/health'))).toEqual([
      'request     HEAD /health',
      'normalized  /health',
      `route       ${HEALTH}  GET /health  (HEAD is answered by the GET route)`,
      'mode        enforce',
      'needs       nothing: public route, no token needed',
    ]);
  });

  it('no route, with the default and the methods that would match', () => {
    expect(formatExplanation(explainRequest(example, 'POST', '/health'))).toEqual([
      'request     POST /health',
      'normalized  /health',
      'route       none declares POST /health',
      `other       GET,HEAD /health at ${HEALTH}`,
      'default     deny: 403 IAM_ACCESS_DENIED, step ROUTE_NOT_DECLARED',
    ]);
  });

  it('a refused path', () => {
    expect(formatExplanation(explainRequest(example, 'GET', '/a/..;/admin'))).toEqual([
      'request     GET /a/..;/admin',
      "normalized  refused: ';' path parameter in path",
      'outcome     400 IAM_BAD_REQUEST; no route is consulted',
    ]);
  });

  it('shadow mode, no resolver, and default authenticated', () => {
    const policy = compilePolicyFiles([
      {
        file: 'p.yaml',
        text: `version: 1
default: authenticated
routes:
  - { path: /r/:id, methods: [GET], permission: r:read, mode: shadow, resource: { type: R, id: id } }
  - { path: /q/:id, methods: [DELETE], permission: q:delete, resource: { type: Q, id: id, resolve: required } }
`,
      },
    ]).policy!;
    const shadow = formatExplanation(explainRequest(policy, 'GET', '/r/1'));
    expect(shadow).toContain('mode        shadow: decided and logged, but a denial lets the request through');
    expect(shadow).toContain('resolver    none for R: R 1 is checked as its own scope');
    expect(formatExplanation(explainRequest(policy, 'DELETE', '/q/1'))).toContain('resolver    none for Q: requests answer 500 IAM_RESOURCE_RESOLUTION_UNAVAILABLE');
    expect(formatExplanation(explainRequest(policy, 'GET', '/elsewhere'))).toContain('default     authenticated: any valid session with a valid active profile passes (401 without one)');
    expect(formatExplanation(explainRequest({ ...policy, defaultAction: 'allow' }, 'GET', '/elsewhere'))).toContain(
      'default     allow: forwarded without any check',
    );
  });
});

describe('iam-gateway policy explain', () => {
  it('prints the explanation for the configured directory (exit 0)', async () => {
    const result = await cli(['GET', '/api/admin/users/7']);
    expect(result.code).toBe(0);
    expect(result.stdout.split('\n')[2]).toBe(`route       ${ADMIN}  * /api/admin/**`);
  });

  it('takes --dir', async () => {
    const result = await cli(['GET', '/api/reports/r1', '--dir', 'test/fixtures/policies/good']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('route       20-reports.json:17');
    expect(result.stdout).toContain('mode        shadow');
  });

  it('exits 1 when the policy does not load, printing its errors', async () => {
    const result = await cli(['GET', '/x', '--dir', 'test/fixtures/policy-check/errors']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('test/fixtures/policy-check/errors/c.yaml:5: error conflict:');
  });

  it('exits 2 on a usage error', async () => {
    expect((await cli(['GET'])).code).toBe(2);
    expect((await cli(['G3T', '/x'])).code).toBe(2);
    expect((await cli(['GET', '/x', '/y'])).code).toBe(2);
  });
});
