/**
 * The README and the docs cannot drift from the CLI: every `npx --no-install iam-gateway …` line they show names a
 * command that exists, and every option it shows is one that command's `--help` lists. (The walkthrough's curl commands run
 * against the demo in test/integration/default-config.test.ts.)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli } from '../support/cli';

const ROOT = join(__dirname, '..', '..');
const README = ['README.md', 'CONTRIBUTING.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join('docs', name))]
  .map((file) => readFileSync(join(ROOT, file), 'utf8'))
  .join('\n');

/** `npx --no-install iam-gateway policy check [DIR] [--provision FILE]  # …` → words before the comment. */
const shown = [...README.matchAll(/^npx --no-install iam-gateway ([^#\n]*)/gm)].map((match) => match[1]!.trim());

/** The command words: up to the first placeholder, option or alternative (`migrate up|down|status` → migrate). */
function commandOf(line: string): string[] {
  const words: string[] = [];
  for (const word of line.split(/\s+/)) {
    if (/^[a-z][a-z-]*$/.test(word)) words.push(word);
    else break;
  }
  return words;
}

it('shows the CLI in the README (the check below has something to check)', () => {
  expect(shown.length).toBeGreaterThanOrEqual(12);
});

it.each(shown.filter((line) => !line.startsWith('-')).map((line) => [line]))('README: npx --no-install iam-gateway %s — the command exists and --help lists each option shown', async (line) => {
  const command = commandOf(line);
  const help = await runCli([...command, '--help']);
  expect({ line, code: help.code, err: help.err }).toEqual({ line, code: 0, err: '' });
  for (const option of line.match(/--[a-z][a-z-]*/g) ?? []) {
    if (option === '--help') continue;
    expect({ line, option, listed: help.out.includes(option) }).toEqual({ line, option, listed: true });
  }
});

it('README: npx --no-install iam-gateway --version and --help work as shown', async () => {
  for (const line of shown.filter((entry) => entry.startsWith('-'))) {
    const flag = line.split(/\s+/)[0]!;
    expect({ line, code: (await runCli([flag])).code }).toEqual({ line, code: 0 });
  }
});
