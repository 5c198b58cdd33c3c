import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { PolicyIssue, PolicyLoadResult } from './compiled-policy';
import { compilePolicy } from './policy-compiler';
import { parsePolicyFile } from './policy-parser';

/** Options of {@link loadPolicyDirectory} and {@link compilePolicyFiles}. */
export interface PolicyLoadOptions {
  /** Timeout of resource resolvers that set none (`iam.authz.resolver-timeout`); default 2000 ms. */
  defaultResolverTimeoutMs?: number;
  /**
   * `upstream.url`: resolver URLs written as paths (`/internal/…/{id}`) are resolved against it. Without it (the
   * policy tools) they stay paths.
   */
  upstreamUrl?: string | null;
}

/** One policy file's name (relative to the policies directory) and text. */
export interface PolicyFileText {
  file: string;
  text: string;
}

const DEFAULT_RESOLVER_TIMEOUT_MS = 2000;
const POLICY_EXTENSIONS = ['.yaml', '.yml', '.json'];

/**
 * sha256 hex over the files sorted by name, each contributing `name`, NUL, `content` (UTF-8): it changes
 * exactly when a file is added, removed, renamed or edited. Also used by the periodic checksum check.
 */
export function hashPolicyFiles(files: readonly PolicyFileText[]): string {
  const hash = createHash('sha256');
  for (const { file, text } of sortByName(files)) hash.update(file).update('\u0000').update(text);
  return hash.digest('hex');
}

/**
 * Parses, validates and compiles policy files given as text (pure: no I/O). Used by the loader, by
 * `policy check`, by hot reload and by tests. Files are processed in name order, so the result does
 * not depend on the order of `files`.
 */
export function compilePolicyFiles(files: readonly PolicyFileText[], options: PolicyLoadOptions = {}): PolicyLoadResult {
  if (files.length === 0) {
    return { policy: null, issues: [{ severity: 'error', kind: 'empty', message: 'no policy files (*.yaml, *.yml, *.json)', source: null }] };
  }
  const sorted = sortByName(files);
  return compilePolicy(
    sorted.map(({ file, text }) => parsePolicyFile(file, text)),
    {
      hash: hashPolicyFiles(sorted),
      defaultResolverTimeoutMs: options.defaultResolverTimeoutMs ?? DEFAULT_RESOLVER_TIMEOUT_MS,
      upstreamUrl: options.upstreamUrl ?? null,
      fileBytes: Object.freeze(Object.fromEntries(sorted.map(({ file, text }) => [file, Buffer.byteLength(text)]))),
    },
  );
}

/** A top-level `*.yaml`, `*.yml` or `*.json` name that is not a dot file: the names the loader reads. */
export function isPolicyFileName(name: string): boolean {
  return !name.startsWith('.') && POLICY_EXTENSIONS.some((extension) => name.endsWith(extension));
}

/**
 * Reads the top-level `*.yaml`, `*.yml` and `*.json` files of `dir` (sorted by name). Subdirectories
 * (e.g. `tests/`) and dot files (editor swap files, Kubernetes ConfigMap `..data`) are skipped; symlinks
 * to files are followed, as ConfigMap mounts consist of them. A missing directory, an unreadable file or
 * no policy file at all is an issue.
 */
export async function readPolicyDirectory(dir: string): Promise<{ files: PolicyFileText[]; issues: PolicyIssue[] }> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message = code === 'ENOENT' ? `policy directory ${dir} does not exist` : `cannot read policy directory ${dir}: ${code ?? String(error)}`;
    return { files: [], issues: [{ severity: 'error', kind: 'io', message, source: null }] };
  }
  const files: PolicyFileText[] = [];
  const issues: PolicyIssue[] = [];
  for (const name of names.sort(compareNames)) {
    if (!isPolicyFileName(name)) continue;
    const path = join(dir, name);
    try {
      if (!(await stat(path)).isFile()) continue;
      files.push({ file: name, text: await readFile(path, 'utf8') });
    } catch (error) {
      issues.push({ severity: 'error', kind: 'io', message: `cannot read ${name}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, source: { file: name, line: 1 } });
    }
  }
  if (files.length === 0 && issues.length === 0) {
    issues.push({ severity: 'error', kind: 'empty', message: `no policy files (*.yaml, *.yml, *.json) in ${dir}`, source: null });
  }
  return { files, issues };
}

/**
 * Loads and compiles every policy file of `dir` (docs/policy-format.md). The result carries all issues; its
 * `policy` is null when any of them is an error, so a caller can keep serving its last good policy.
 */
export async function loadPolicyDirectory(dir: string, options: PolicyLoadOptions = {}): Promise<PolicyLoadResult> {
  const { files, issues } = await readPolicyDirectory(dir);
  if (files.length === 0) return { policy: null, issues };
  const result = compilePolicyFiles(files, options);
  if (issues.length === 0) return result;
  return { policy: null, issues: [...issues, ...result.issues] };
}

/** Code-unit order: deterministic across locales. */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortByName(files: readonly PolicyFileText[]): PolicyFileText[] {
  return [...files].sort((a, b) => compareNames(a.file, b.file));
}
