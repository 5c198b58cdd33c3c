import * as path from 'node:path';
import { isMap, isScalar, isSeq, type Node } from 'yaml';

/** One thing wrong with the configuration. */
export interface ConfigProblem {
  /** Dotted key (`iam.token.ttl`, `iam.client-types[1]`); `''` for the file as a whole. */
  key: string;
  /** What is wrong, naming the key. */
  message: string;
  /** The environment variable the bad value came from. */
  env?: string;
  /** 1-based line in the file, when the value is written there. */
  line?: number;
  /** A likely fix, e.g. `did you mean "iam.token"?`. */
  hint?: string;
}

/** The configuration cannot be used; `problems` lists everything found, `key` names the first. */
export class ConfigError extends Error {
  readonly key: string;
  readonly problems: readonly ConfigProblem[];
  /** The config file as shown in messages (relative to cwd when inside it). */
  readonly file: string;

  constructor(problems: readonly ConfigProblem[], file: string) {
    const lines = problems.map(
      (problem) => problem.message + whereOf(problem, file) + (problem.hint === undefined ? '' : ` (${problem.hint})`),
    );
    const list = lines.length === 1 ? lines[0] : `${lines.length} problems:\n  - ${lines.join('\n  - ')}`;
    super(`config: ${list}`);
    this.name = 'ConfigError';
    this.key = problems[0]?.key ?? '';
    this.problems = problems;
    this.file = file;
  }
}

/** One step of a path into the configuration: a key, or an index where the data is a list. */
export type Segment = string | number;

/** A problem found while loading, before it is tied to a file line or environment variable. */
export interface Problem {
  path: Segment[];
  message: string;
  env?: string;
  hint?: string;
  /** Where to point in the file when the value itself is not written there. */
  at?: Segment[];
}

/** Ties a problem to where its value came from: the environment variable, else the line in the file. */
export function locate(
  problem: Problem,
  sources: Map<string, string>,
  lineOf: (segments: Segment[]) => number | undefined,
): ConfigProblem {
  const located: ConfigProblem = { key: keyOf(problem.path), message: problem.message };
  if (problem.hint !== undefined) located.hint = problem.hint;
  const leaf = problem.path.filter((segment): segment is string => typeof segment === 'string').join('.');
  const env = problem.env ?? sources.get(leaf);
  if (env !== undefined) located.env = env;
  else {
    const line = lineOf(problem.path) ?? (problem.at === undefined ? undefined : lineOf(problem.at));
    if (line !== undefined) located.line = line;
  }
  return located;
}

function whereOf(problem: ConfigProblem, file: string): string {
  if (problem.env !== undefined) return ` (environment variable ${problem.env})`;
  return ` in ${file}${problem.line === undefined ? '' : `:${problem.line}`}`;
}

/** The YAML node written at `segments` (the key node for the last map entry), if any. */
export function findNode(root: unknown, segments: Segment[]): Node | undefined {
  let node = root;
  for (const [index, segment] of segments.entries()) {
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === String(segment));
      if (pair === undefined) return undefined;
      if (index === segments.length - 1) return pair.key as Node;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      node = node.items[segment];
    } else {
      return undefined;
    }
  }
  return node as Node | undefined;
}

/** `['iam', 'client-types', 1]` → `iam.client-types[1]`. */
export function keyOf(segments: Segment[]): string {
  return segments.reduce<string>((key, segment) => {
    if (typeof segment === 'number') return `${key}[${segment}]`;
    return key === '' ? segment : `${key}.${segment}`;
  }, '');
}

/** The config file as shown in messages: relative to `cwd` when inside it. */
export function showPath(file: string, cwd: string): string {
  const relative = path.relative(cwd, file);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}

/** Drops repeats: the same key and message found twice (e.g. by ajv and a cross-check). */
export function unique(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((problem) => {
    const id = `${keyOf(problem.path)}\n${problem.message}`;
    return seen.has(id) ? false : (seen.add(id), true);
  });
}
