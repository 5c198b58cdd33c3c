import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PolicyIssue } from '../../src/policy/compiled-policy';
import { hashPolicyFiles, loadPolicyDirectory } from '../../src/policy/load-policy-directory';

const FIXTURES = join(__dirname, '../fixtures/policies');

function summary(issues: PolicyIssue[]): string[] {
  return issues.map((issue) => {
    const at = issue.source ? `${issue.source.file}:${issue.source.line}` : '-';
    return `${issue.severity} ${issue.kind} ${at}${issue.related ? ` ~ ${issue.related.file}:${issue.related.line}` : ''}`;
  });
}

describe('loadPolicyDirectory: good set', () => {
  it('loads the top-level .yaml/.json files only, merged, with warnings', async () => {
    const result = await loadPolicyDirectory(join(FIXTURES, 'good'), { defaultResolverTimeoutMs: 1200 });
    expect(summary(result.issues)).toEqual(['warning no-resolver 20-reports.json:23']);
    const policy = result.policy;
    if (!policy) throw new Error('expected a policy');
    // README.md, tests/cases.yaml and .editor-swap.yaml are not read (the last two are invalid on purpose)
    expect(policy.files).toEqual(['10-design-example.yaml', '20-reports.json']);
    expect(policy.defaultAction).toBe('deny');
    expect(Object.keys(policy.resources).sort()).toEqual(['ORG', 'PROJECT', 'REPORT', 'TASK']);
    expect(policy.resources.PROJECT.resolver?.timeoutMs).toBe(1200);
    expect(policy.resources.REPORT.resolver).toEqual({ url: 'https://reports.internal/api/{id}', timeoutMs: 500 });
    expect(policy.routes).toHaveLength(11);
    const texts = await Promise.all(policy.files.map(async (file) => ({ file, text: await readFile(join(FIXTURES, 'good', file), 'utf8') })));
    expect(policy.hash).toBe(hashPolicyFiles(texts));
  });

  it.each([
    { method: 'GET', path: '/health', expect: '10-design-example.yaml:9' },
    { method: 'GET', path: '/api/projects/3', expect: '10-design-example.yaml:16', params: { projectId: '3' } },
    { method: 'GET', path: '/api/me', expect: '20-reports.json:11' },
    { method: 'HEAD', path: '/api/reports/r1', expect: '20-reports.json:17', params: { reportId: 'r1' }, mode: 'shadow' },
    { method: 'DELETE', path: '/api/reports/r1', expect: '20-reports.json:18', mode: 'enforce' },
    { method: 'GET', path: '/api/reports/public/summary', expect: '20-reports.json:20' },
    { method: 'PUT', path: '/api/orgs/o1/settings/x', expect: '20-reports.json:23', params: { orgId: 'o1' } },
    { method: 'GET', path: '/api/orgs', expect: null },
  ])('$method $path → $expect', async (c) => {
    const { policy } = await loadPolicyDirectory(join(FIXTURES, 'good'));
    const match = policy?.match(c.method, c.path) ?? null;
    expect(match?.route.id ?? null).toBe(c.expect);
    if (c.params) expect(match?.params).toEqual(c.params);
    if (c.mode) expect(match?.route.mode).toBe(c.mode);
  });
});

describe('loadPolicyDirectory: broken set', () => {
  it('reports every error of every file at once, with file and line', async () => {
    const result = await loadPolicyDirectory(join(FIXTURES, 'broken'));
    expect(result.policy).toBeNull();
    expect(summary(result.issues)).toEqual([
      'error parse a-syntax.yaml:5',
      'error schema b-schema.yaml:5',
      'error schema b-schema.yaml:7',
      'error schema b-schema.yaml:8',
      'error schema b-schema.yaml:9',
      'error path c-semantic.yaml:4',
      'error resource-id c-semantic.yaml:6',
      'error group-methods c-semantic.yaml:11',
      'error resource-without-permission c-semantic.yaml:15',
      'error default-mismatch d-conflict.yaml:2 ~ c-semantic.yaml:2',
      'error conflict e-conflict.json:4 ~ d-conflict.yaml:4',
      'warning duplicate e-conflict.json:5 ~ d-conflict.yaml:7',
    ]);
    const messages = result.issues.map((issue) => issue.message);
    expect(messages).toContain('conflicting routes GET /api/projects/:id at d-conflict.yaml:4 and e-conflict.json:4');
    expect(messages).toContain('routes[0]: unknown key "permision"');
    expect(messages).toContain('routes[1].resource: unknown key "acess"');
  });
});

describe('loadPolicyDirectory: directory problems', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'iam-policies-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a missing directory', async () => {
    const result = await loadPolicyDirectory(join(dir, 'nope'));
    expect(result.policy).toBeNull();
    expect(summary(result.issues)).toEqual(['error io -']);
    expect(result.issues[0].message).toContain('does not exist');
  });

  it('refuses a directory without policy files', async () => {
    await writeFile(join(dir, 'notes.txt'), 'version: 1\n');
    await mkdir(join(dir, 'sub.yaml'));
    const result = await loadPolicyDirectory(dir);
    expect(result.policy).toBeNull();
    expect(summary(result.issues)).toEqual(['error empty -']);
  });

  it('follows symlinks to files, as in a Kubernetes ConfigMap mount', async () => {
    await mkdir(join(dir, '..2024_01_01'));
    await writeFile(join(dir, '..2024_01_01', 'main.yml'), 'version: 1\nroutes:\n  - { path: /x, methods: [GET], public: true }\n');
    await symlink('..2024_01_01', join(dir, '..data'));
    await symlink(join('..data', 'main.yml'), join(dir, 'main.yml'));
    const result = await loadPolicyDirectory(dir);
    expect(result.issues).toEqual([]);
    expect(result.policy?.files).toEqual(['main.yml']);
    expect(result.policy?.match('GET', '/x')?.route.id).toBe('main.yml:3');
  });

  it('gives a new hash when a file changes', async () => {
    await writeFile(join(dir, 'a.yaml'), 'version: 1\n');
    const before = (await loadPolicyDirectory(dir)).policy?.hash;
    await writeFile(join(dir, 'a.yaml'), 'version: 1\ndefault: allow\n');
    const after = await loadPolicyDirectory(dir);
    expect(before).toMatch(/^[0-9a-f]{64}$/);
    expect(after.policy?.hash).not.toBe(before);
    expect(after.policy?.defaultAction).toBe('allow');
  });
});
