/**
 * One slip in a YAML file (a tab, a missing space after a colon, a key that lost its colon) makes the `yaml` library
 * report every line after it: 85 to 379 errors. Every reader of a YAML file (policies, the configuration, the
 * provisioning and users files, policy test cases) reports the first error, naming its line and column, and at most
 * three after it; the last says how many were left out. Each case is a one-character slip in a copy of a shipped file.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import { loadProvisioningFile, ProvisioningFileError } from '../../src/auth/provisioning-file';
import { readUsersFile } from '../../src/auth/users-file-authenticator';
import { ConfigError, loadConfig } from '../../src/config';
import { parsePolicyFile } from '../../src/policy/policy-parser';
import { MAX_YAML_ERRORS, yamlErrorReports } from '../../src/policy/yaml-errors';
import { ROOT } from '../support/gateway';

const work = mkdtempSync(join(tmpdir(), 'iam-yaml-errors-'));

/** The shipped file `relative` with `line` (1-based) changed by `slip`; the text and the line's number. */
function slipped(relative: string, find: string, slip: (line: string) => string): { text: string; line: number } {
  const lines = readFileSync(join(ROOT, relative), 'utf8').split('\n');
  const index = lines.findIndex((line) => line === find);
  if (index < 0) throw new Error(`${relative} has no line ${JSON.stringify(find)}`);
  lines[index] = slip(lines[index]!);
  return { text: lines.join('\n'), line: index + 1 };
}

function write(name: string, text: string): string {
  const path = join(work, name);
  writeFileSync(path, text);
  return path;
}

function thrown(work: () => unknown): Error {
  try {
    work();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected an error');
}

describe('the policy parser', () => {
  it('a missing space after a colon: the first error names that line and column, at most 4 errors, not 280', () => {
    const { text, line } = slipped('policies/example.yaml', '    resolver: { url: "/internal/resources/projects/{id}" }', (l) => l.replace('resolver: ', 'resolver:'));
    // What the library itself reports for this one character.
    expect(parseDocument(text).errors.length).toBeGreaterThan(80);
    const errors = parsePolicyFile('example.yaml', text).issues.filter((issue) => issue.severity === 'error');
    expect(errors.length).toBeLessThanOrEqual(MAX_YAML_ERRORS);
    expect(errors[0]).toMatchObject({ kind: 'parse', source: { file: 'example.yaml', line } });
    expect(errors[0]!.message).toBe(
      `no space after the colon of "resolver:{" (YAML reads it as one text, not a key and its value; write "resolver: {") at line ${line}, column 14`,
    );
    expect(errors.at(-1)!.message).toMatch(/\(and \d+ more YAML errors after it, most likely caused by the first\)$/);
  });

  it('a tab: the first error is the tab\'s line and column', () => {
    const { text, line } = slipped('policies/example.yaml', '  PROJECT:', (l) => `\t${l.trimStart()}`);
    const errors = parsePolicyFile('example.yaml', text).issues.filter((issue) => issue.severity === 'error');
    expect(errors.length).toBeLessThanOrEqual(MAX_YAML_ERRORS);
    expect(errors[0]).toMatchObject({ source: { line }, message: `Tabs are not allowed as indentation at line ${line}, column 1` });
  });
});

describe('the configuration file', () => {
  it('a missing space after a colon: one problem per error line, at most 4, the first naming the line of the slip', () => {
    const { text, line } = slipped('config/default.yaml', '  port: 8080', (l) => l.replace(': ', ':'));
    const error = thrown(() => loadConfig({ file: write('config.yaml', text), env: {} }));
    expect(error).toBeInstanceOf(ConfigError);
    const problems = error.message.split('\n').filter((l) => l.startsWith('  - '));
    expect(problems.length).toBeLessThanOrEqual(MAX_YAML_ERRORS);
    expect(problems[0]).toBe(
      `  - YAML: no space after the colon of "port:8080" (YAML reads it as one text, not a key and its value; write "port: 8080") at line ${line}, column 8 in ${join(work, 'config.yaml')}:${line}`,
    );
  });
});

describe('the provisioning file', () => {
  it('a key without its colon: 4 problems instead of 379, the first naming it', () => {
    const { text, line } = slipped('config/provision.example.yaml', 'templates:', () => 'templates');
    expect(parseDocument(text).errors.length).toBeGreaterThan(300);
    const error = thrown(() => loadProvisioningFile(write('provision.yaml', text)));
    expect(error).toBeInstanceOf(ProvisioningFileError);
    const problems = (error as ProvisioningFileError).problems;
    expect(problems).toHaveLength(MAX_YAML_ERRORS);
    expect(problems[0]).toEqual({ pointer: '', line, message: `"templates" alone on its line: a key without its colon? (write "templates:") at line ${line}, column 10` });
    expect(error.message.split('\n')).toHaveLength(1 + MAX_YAML_ERRORS);
  });
});

describe('the users file', () => {
  it('a tab: the first error with its line and column, at most 4 lines', () => {
    const { text, line } = slipped('config/users.example.yaml', '  - username: alice', (l) => `\t${l.trimStart()}`);
    const error = thrown(() => readUsersFile(write('users.yaml', text)));
    const lines = error.message.split('\n');
    expect(lines.length).toBeLessThanOrEqual(MAX_YAML_ERRORS);
    expect(lines[0]).toBe(`users file ${join(work, 'users.yaml')}: Tabs are not allowed as indentation at line ${line}, column 1`);
  });
});

describe('yamlErrorReports', () => {
  it('keeps the library\'s reports in file order when nothing before the first error looks like a slip', () => {
    const text = 'a: 1\nb: [1, 2\nc: 3\n';
    const reports = yamlErrorReports(text, parseDocument(text).errors);
    expect(reports.length).toBeGreaterThan(0);
    expect(reports.length).toBeLessThanOrEqual(MAX_YAML_ERRORS);
    expect(reports.map((report) => report.line)).toEqual([...reports.map((report) => report.line)].sort((x, y) => x - y));
    expect(reports[0]!.message).not.toContain('no space after the colon');
  });
});
