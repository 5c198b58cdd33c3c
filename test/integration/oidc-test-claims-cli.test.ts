/**
 * `iam-gateway oidc test-claims FILE [--config FILE]`, run as the installed binary runs it (bin/iam-gateway.js over
 * dist/): what the configuration's iam.oidc.allowed and iam.oidc.profiles rules make of one ID token's claims.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt } from '../support/gateway-process';

const ROOT = join(__dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'iam-gateway.js');
const CONFIG = `iam:
  oidc:
    claims: { user-id: email }
    allowed:
      - { claim: groups, values: [engineering, project-members] }
    profiles:
      - name: engineering
        when: [{ claim: groups, values: [engineering] }]
        profile-name: Engineering
        template-version: editor-v1
        client-types: [WEB]
        scopes:
          - { type: TEAM, claim: teams, access: WRITE }
      - name: projects
        when: [{ claim: groups, values: [project-members] }]
        template-version: reader-v1
        client-types: [WEB]
        scopes:
          - { type: PROJECT, claim: project_ids, access: READ }
      - name: staff
        when: [{ claim: groups, values: [staff] }]
        template-version: reader-v1
        client-types: [WEB]
        unscoped: true
`;
const CLAIMS = { iss: 'https://op.example.test', sub: 's-1', email: 'gina@example.test', groups: ['engineering', 'project-members'], teams: ['t1', 't2'] };

let dir: string;
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

function run(args: string[]): { code: number | null; out: string; err: string } {
  // IAM_CONFIG points elsewhere: --config must win.
  const env: NodeJS.ProcessEnv = { ...process.env, IAM_CONFIG: join(ROOT, 'config', 'default.yaml'), LOG_LEVEL: 'silent' };
  delete env.IAM_OIDC_PROFILES;
  const result = spawnSync(process.execPath, [BIN, 'oidc', 'test-claims', ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 30_000 });
  return { code: result.status, out: result.stdout, err: result.stderr };
}

beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'iam-test-claims-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const EXPECTED = [
  'user: gina@example.test (claim email)',
  'allowed: yes',
  'rule engineering: applies',
  '  profile oidc:engineering:gina@example.test (Engineering)',
  '  template editor-v1, client types WEB',
  '  scopes TEAM t1 WRITE; TEAM t2 WRITE',
  'rule projects: SKIPPED: its scope claim "project_ids" is missing from the ID token (reason missing)',
  'rule staff: not met: its "groups" claim holds none of staff',
  '',
].join('\n');

describe('iam-gateway oidc test-claims', () => {
  it('prints, per rule, the profile it gives, why it is skipped (the claim), or that it is not met; exit 0', () => {
    const config = file('gateway.yaml', CONFIG);
    expect(run([file('claims.json', JSON.stringify(CLAIMS)), '--config', config])).toEqual({ code: 0, out: EXPECTED, err: '' });
  });

  it('reads the payload of a raw JWT the same way', () => {
    const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
    const jwt = `${part({ alg: 'RS256', typ: 'JWT' })}.${part(CLAIMS)}.c2lnbmF0dXJl`;
    expect(run([file('token.jwt', `${jwt}\n`), '--config', file('gateway.yaml', CONFIG)])).toEqual({ code: 0, out: EXPECTED, err: '' });
  });

  it('says when iam.oidc.allowed refuses the token', () => {
    const { code, out } = run([file('outsider.json', JSON.stringify({ ...CLAIMS, groups: ['contractors'] })), '--config', file('gateway.yaml', CONFIG)]);
    expect(code).toBe(0);
    expect(out).toContain('allowed: NO, a sign-in is refused: its "groups" claim holds none of engineering, project-members (iam.oidc.allowed)');
  });

  it.each([
    ['not JSON, not a JWT', 'hello', 'neither a JSON object of claims nor a JWT'],
    ['broken JSON', '{"sub": ', 'not valid JSON'],
    ['a JSON list', '[1, 2]', 'neither a JSON object of claims nor a JWT'],
    ['a JWT whose payload is no JSON', 'eyJhbGciOiJub25lIn0.bm90LWpzb24.', 'a JWT whose payload is not JSON'],
  ])('bad input (%s): exit 2, one line naming the file, no stack trace', (_case, text, words) => {
    const path = file('bad.txt', text);
    const { code, out, err } = run([path, '--config', file('gateway.yaml', CONFIG)]);
    expect({ code, out }).toEqual({ code: 2, out: '' });
    expect(err.split('\n')).toEqual([`iam-gateway oidc test-claims: ${path}: ${err.split('\n')[0]!.split(': ').slice(2).join(': ')}`, '']);
    expect(err).toContain(`${path}: `);
    expect(err).toContain(words);
    expect(err).not.toMatch(/\n\s+at /);
  });

  it('a missing file and a missing argument: exit 2', () => {
    const missing = run([join(dir, 'nothing-here.json')]);
    expect({ code: missing.code, err: missing.err }).toEqual({ code: 2, err: `iam-gateway oidc test-claims: ${join(dir, 'nothing-here.json')}: cannot be read (ENOENT)\n` });
    const none = run([]);
    expect(none.code).toBe(2);
    expect(none.err).toContain('missing the claims FILE');
    expect(none.err).toContain('usage: iam-gateway oidc test-claims FILE [--config FILE]');
  });
});
