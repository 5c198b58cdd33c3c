/**
 * What the CLI prints from outside (an access log's fields, a path on the command line, a command name quoted in an
 * error) never reaches the terminal as a control sequence: `\x1b]0;…\x07` would retitle the window and `\x1b[2J`
 * clear the screen. Real processes (`node bin/iam-gateway.js …` over the compiled dist), as an operator runs them;
 * src/observability/terminal-text.ts is the one filter.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '../support/database';
import { testDatabaseUrl } from '../support/env';
import { ensureBuilt, runUntilExit } from '../support/gateway-process';

const RETITLE = '\x1b]0;pwned\x07';
const CLEAR = '\x1b[2J';
const PATH = `/x/${RETITLE}${CLEAR}\x9b2J\u202egnp.exe`;
/** ESC, BEL, a C1 CSI, a bidirectional override: none may be written raw. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const RAW_CONTROL = /[\x07\x1b\x9b\u202e]/;

let root: string;

beforeAll(async () => {
  ensureBuilt();
  await (await createTestDatabase()).close();
  root = mkdtempSync(join(tmpdir(), 'iam-terminal-'));
  // The live policy let everyone in under /x; the new one needs a session: the recorded request is an example.
  for (const [dir, rule] of [['live', 'public: true'], ['new', 'profile: optional']]) {
    mkdirSync(join(root, dir));
    writeFileSync(join(root, dir, 'routes.yaml'), `version: 1\nroutes:\n  - { path: /x/**, methods: [GET], ${rule} }\n`);
  }
  const line = { msg: 'access', method: 'GET', path: PATH, decision: 'allow', userId: null, profileId: null, clientType: null, route: '/x/**', step: null };
  writeFileSync(join(root, 'access.log'), `${JSON.stringify(line)}\n`);
}, 180_000);

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

const run = (args: string[]): ReturnType<typeof runUntilExit> =>
  runUntilExit(args, { DATABASE_URL: testDatabaseUrl(), REDIS_URL: '', IAM_POLICIES_DIR: join(root, 'live') }, 60_000);

describe('the CLI shows control characters from its input escaped', () => {
  it('policy replay: a recorded path with a retitle and a clear-screen sequence', async () => {
    const answer = await run(['policy', 'replay', join(root, 'new'), '--access-log', join(root, 'access.log')]);
    expect([answer.code, answer.stderr]).toEqual([0, '']);
    expect(answer.stdout).toContain('1 allow→deny');
    expect(answer.stdout).not.toMatch(RAW_CONTROL);
    expect(answer.stdout).toContain('/x/\\u001b]0;pwned\\u0007\\u001b[2J\\u009b2J\\u202egnp.exe');
  }, 60_000);

  it('policy replay --json: the escapes are JSON\'s own, so the value read back is the recorded path', async () => {
    const answer = await run(['policy', 'replay', join(root, 'new'), '--access-log', join(root, 'access.log'), '--json']);
    expect(answer.code).toBe(0);
    expect(answer.stdout).not.toMatch(RAW_CONTROL);
    const report = JSON.parse(answer.stdout) as { routes: Array<{ examples: Array<{ path: string }> }> };
    expect(report.routes.flatMap((route) => route.examples.map((example) => example.path))).toEqual([PATH]);
  }, 60_000);

  it.each([
    ['policy explain, the path argument', ['policy', 'explain', 'GET', PATH, '--dir', 'live']],
    ['policy, an unknown subcommand quoted in the error', ['policy', CLEAR]],
    ['main, an unknown command quoted in the error', [RETITLE]],
    ['a usage error quoting an argument', ['tokens', `purge${CLEAR}`]],
  ])('%s', async (_name, args) => {
    const answer = await runUntilExit(args.map((arg) => (arg === 'live' ? join(root, 'live') : arg)), { REDIS_URL: '' }, 60_000);
    expect(answer.stdout + answer.stderr).toMatch(/\\u001b/);
    expect(answer.stdout).not.toMatch(RAW_CONTROL);
    expect(answer.stderr).not.toMatch(RAW_CONTROL);
  }, 60_000);
});
