/**
 * The `iam-gateway` command line itself: `--version`, every command's `--help` (exit 0, its options named),
 * usage errors (exit 2 with the usage), and the docs, examples, configuration comments and usage texts showing the
 * CLI as the installed binary, `npx --no-install iam-gateway …`, never an unscoped `npx` of it.
 * What the commands do is tested with their subjects (provision-cli, tokens-purge, migrations, audit-trail,
 * policy-*); the installed package's `npx --no-install iam-gateway --version` in package-install.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli } from '../support/cli';

const ROOT = join(__dirname, '..', '..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

it('prints the package version for --version, -v and version', async () => {
  expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
  for (const flag of ['--version', '-v', 'version']) {
    expect(await runCli([flag])).toEqual({ code: 0, out: `${VERSION}\n`, err: '' });
  }
});

it('lists every command for --help, -h and help (exit 0); no command at all is a usage error', async () => {
  for (const flag of ['--help', '-h', 'help']) {
    const { code, out, err } = await runCli([flag]);
    expect({ code, err }).toEqual({ code: 0, err: '' });
    for (const command of ['serve', 'migrate up|down|status', 'policy check', 'policy test', 'policy explain', 'policy coverage', 'provision FILE', 'tokens purge', 'oidc test-claims FILE', 'audit purge', 'hash-password', 'version']) {
      expect(out).toContain(`  ${command}`);
    }
    expect(out).toContain('--help');
  }
  const none = await runCli([]);
  expect(none.code).toBe(2);
  expect(none.err).toMatch(/^usage: iam-gateway <command>/);
});

describe('every command answers --help and -h with its usage and options, exit 0', () => {
  const commands: Array<{ args: string[]; mentions: string[] }> = [
    { args: ['serve'], mentions: ['usage: iam-gateway serve', 'PORT', 'MANAGEMENT_PORT', 'IAM_CONFIG'] },
    { args: ['migrate'], mentions: ['usage: iam-gateway migrate up|down|status', 'up ', 'down ', 'status ', 'iam.schema.history-table'] },
    { args: ['migrate', 'up'], mentions: ['usage: iam-gateway migrate up|down|status'] },
    { args: ['provision'], mentions: ['usage: iam-gateway provision FILE [--overwrite]', '--overwrite '] },
    { args: ['tokens'], mentions: ['usage: iam-gateway tokens purge', 'iam.token.store-prefix'] },
    { args: ['tokens', 'purge'], mentions: ['usage: iam-gateway tokens purge'] },
    { args: ['audit'], mentions: ['usage: iam-gateway audit purge [--older-than DURATION]', '--older-than DURATION ', 'iam.audit.retention'] },
    { args: ['hash-password'], mentions: ['usage: iam-gateway hash-password [PASSWORD]', 'standard input', '--'] },
    { args: ['oidc'], mentions: ['usage: iam-gateway oidc test-claims FILE [--config FILE]', '--config', 'JWT', 'Exit codes'] },
    { args: ['policy'], mentions: ['usage: iam-gateway policy <command>', 'check [DIR]', 'test [DIR]', 'explain METHOD PATH', 'coverage --openapi FILE'] },
    { args: ['policy', 'check'], mentions: ['usage: iam-gateway policy check [DIR] [--provision FILE] [--database]', 'iam.policy.dir'] },
    { args: ['policy', 'test'], mentions: ['usage: iam-gateway policy test [DIR] [--provision FILE] [--verbose]'] },
    { args: ['policy', 'explain'], mentions: ['usage: iam-gateway policy explain METHOD PATH [--dir DIR]'] },
    { args: ['policy', 'coverage'], mentions: ['usage: iam-gateway policy coverage --openapi FILE [--dir DIR] [--base-path PATH] [--fail-on-uncovered] [--verbose]'] },
  ];
  it.each(commands)('$args', async ({ args, mentions }) => {
    for (const flag of ['--help', '-h']) {
      const { code, out, err } = await runCli([...args, flag]);
      expect({ code, err }).toEqual({ code: 0, err: '' });
      for (const text of mentions) expect(out).toContain(text);
    }
  });
});

it('hash-password --help prints the usage, not a hash of "--help"; after -- it is the password', async () => {
  const help = await runCli(['hash-password', '--help']);
  expect(help.code).toBe(0);
  expect(help.out).toMatch(/^usage: iam-gateway hash-password/);
  expect(help.out).not.toContain('$argon2id$');
  const hashed = await runCli(['hash-password', '--', '--help']);
  expect(hashed.code).toBe(0);
  expect(hashed.out).toMatch(/^\$argon2id\$v=19\$\S+\n$/);
});

describe('an unknown option or argument is a usage error: exit 2, the message and the usage on stderr', () => {
  const cases: Array<{ args: string[]; message: RegExp; usage: string }> = [
    { args: ['--frobnicate'], message: /unknown option "--frobnicate"/, usage: 'usage: iam-gateway <command>' },
    { args: ['frobnicate'], message: /unknown command "frobnicate"/, usage: 'usage: iam-gateway <command>' },
    { args: ['serve', '--port', '8080'], message: /Unknown option '--port'/, usage: 'usage: iam-gateway serve' },
    { args: ['serve', 'now'], message: /unexpected argument "now"/, usage: 'usage: iam-gateway serve' },
    { args: ['migrate', 'up', '--all'], message: /Unknown option '--all'/, usage: 'usage: iam-gateway migrate' },
    { args: ['migrate', 'sideways'], message: /unknown migrate action "sideways"/, usage: 'usage: iam-gateway migrate' },
    { args: ['migrate'], message: /missing the action/, usage: 'usage: iam-gateway migrate' },
    { args: ['provision', 'file.yaml', '--force'], message: /Unknown option '--force'/, usage: 'usage: iam-gateway provision' },
    { args: ['provision', 'a.yaml', 'b.yaml'], message: /unexpected argument "b.yaml"/, usage: 'usage: iam-gateway provision' },
    { args: ['tokens', 'purge', '--all'], message: /Unknown option '--all'/, usage: 'usage: iam-gateway tokens purge' },
    { args: ['audit', 'purge', '--before', '1d'], message: /Unknown option '--before'/, usage: 'usage: iam-gateway audit purge' },
    { args: ['audit', 'purge', '--older-than'], message: /--older-than/, usage: 'usage: iam-gateway audit purge' },
    { args: ['hash-password', '--salt', 'x'], message: /Unknown option '--salt'/, usage: 'usage: iam-gateway hash-password' },
    { args: ['policy', 'check', '--strict'], message: /Unknown option '--strict'/, usage: 'usage: iam-gateway policy' },
  ];
  it.each(cases)('$args', async ({ args, message, usage }) => {
    const { code, out, err } = await runCli(args);
    expect({ code, out }).toEqual({ code: 2, out: '' });
    expect(err).toMatch(message);
    expect(err).toContain(usage);
  });
});

/**
 * Where an unscoped `npx iam-gateway` is: each `npx` (or `npm exec`, `npm x`) whose command is `iam-gateway` without
 * `--no-install` before it. The package is in no registry: such an npx, run where the package is not installed,
 * downloads and runs whatever package of that name a registry holds.
 */
function unscopedNpx(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/\b(?:npx|npm\s+(?:exec|x))((?:\s+-[^\s`'"]*)*)\s+(?:--\s+)?iam-gateway\b/g)) {
    if (!/(?:^|\s)--no-install\b/.test(match[1]!) || /(?:^|\s)(?:-y|--yes)\b/.test(match[1]!)) found.push(match[0].replace(/\s+/g, ' '));
  }
  return found;
}

/** The text files of the repository a user reads or runs (no dependencies, builds or tests), relative to ROOT. */
function userFacingFiles(dir = ''): string[] {
  const skipped = new Set(['node_modules', 'dist', '.git', 'test', 'coverage', '.data', 'package-lock.json']);
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = dir ? join(dir, entry.name) : entry.name;
    if (skipped.has(entry.name) || entry.isSymbolicLink()) return [];
    if (entry.isDirectory()) return userFacingFiles(path);
    return /\.(md|ya?ml|ts|js|mjs|cjs|sh|json|html|txt|py|toml|conf)$|^(Dockerfile|Caddyfile)$|^[^.]+$/.test(entry.name) ? [path] : [];
  });
}

describe('the CLI as the docs and usage texts show it: the installed binary, never an unscoped `npx iam-gateway`', () => {
  it('finds the unscoped forms and lets the installed ones through', () => {
    expect(unscopedNpx('run `npx iam-gateway serve`')).toEqual(['npx iam-gateway']);
    expect(unscopedNpx('npx -y iam-gateway policy check; npx --yes --no-install iam-gateway')).toEqual(['npx -y iam-gateway', 'npx --yes --no-install iam-gateway']);
    expect(unscopedNpx('`zcat access.log.gz | npx\niam-gateway policy replay`')).toEqual(['npx iam-gateway']);
    expect(unscopedNpx('npm exec iam-gateway -- serve; npm x -- iam-gateway')).toEqual(['npm exec iam-gateway', 'npm x -- iam-gateway']);
    expect(unscopedNpx('npx --no-install iam-gateway serve\nnode_modules/.bin/iam-gateway serve\nnpm exec --no-install iam-gateway')).toEqual([]);
    expect(unscopedNpx('npx redocly lint; npm install ./iam-gateway-0.1.0.tgz')).toEqual([]);
  });

  it('no doc, example, deployment file, configuration comment or CLI usage text has one', async () => {
    const files = userFacingFiles();
    // The places the task names are among those read.
    for (const file of ['README.md', 'docs/your-app.md', 'docs/cli.md', 'config/default.yaml', 'examples/ci/policy-gate.sh', 'deploy/README.md', 'src/cli/main.ts', 'src/cli/hash-password.ts']) expect(files).toContain(file);
    const offenders = files.flatMap((file) => unscopedNpx(readFileSync(join(ROOT, file), 'utf8')).map((found) => `${file}: ${found}`));
    expect(offenders).toEqual([]);
    // What the CLI prints: the main usage and every command's.
    const printed = [(await runCli(['--help'])).out];
    for (const command of [['serve'], ['migrate'], ['policy'], ['provision'], ['tokens', 'purge'], ['audit', 'purge'], ['hash-password'], ['oidc', 'test-claims']]) printed.push((await runCli([...command, '--help'])).out);
    expect(printed.flatMap(unscopedNpx)).toEqual([]);
    expect(printed[0]).toContain('npx --no-install iam-gateway');
  });

  it('the README, docs and config/default.yaml show each command as the installed binary: `npx --no-install iam-gateway …`', () => {
    const files = ['README.md', 'config/default.yaml', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join('docs', name))];
    const commands = 'serve|migrate|policy|provision|tokens|audit|hash-password|oidc|version|--version|--help';
    const offenders: string[] = [];
    let shown = 0;
    for (const file of files) {
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, index) => {
          if (line.includes('.test.ts ›')) return; // cites a test by its title
          shown += [...line.matchAll(new RegExp(`npx --no-install iam-gateway (${commands})\\b`, 'g'))].length;
          if (/node bin\/iam-gateway\.js/.test(line) || new RegExp(`(?<!npx --no-install |node_modules/\\.bin/)\\biam-gateway (${commands})(?![\\w-])`).test(line)) offenders.push(`${file}:${index + 1}: ${line.trim()}`);
        });
    }
    expect(offenders).toEqual([]);
    expect(shown).toBeGreaterThan(10);
  });
});
