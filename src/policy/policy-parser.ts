import type { ErrorObject } from 'ajv';
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import type { PolicyIssue } from './compiled-policy';
import { policyFileValidator, type PolicyFileDocument } from './policy-schema';

/** One policy file after parsing and schema validation, with a way back to its lines. */
export interface ParsedPolicyFile {
  /** Name relative to the policies directory. */
  file: string;
  /** The validated document; null when the file has a parse or schema error (see `issues`). */
  document: PolicyFileDocument | null;
  /** Parse and schema problems of this file, each with its 1-based line. */
  issues: PolicyIssue[];
  /**
   * 1-based line of the node at `path` (object keys and array indexes from the document root); for an
   * object member, the line of its key. Falls back to the deepest node that exists.
   */
  lineOf(path: ReadonlyArray<string | number>): number;
}

/**
 * Parses one policy file (YAML, or JSON — JSON is read by the same YAML 1.2 parser so both keep line
 * numbers) and validates it against the policy schema. Never throws: every problem becomes an issue.
 */
export function parsePolicyFile(file: string, text: string): ParsedPolicyFile {
  const lineCounter = new LineCounter();
  // YAML 1.2 core schema (no `yes`/`on` booleans, no `<<` merge keys); duplicate keys are errors.
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: true });
  const lineOf = (path: ReadonlyArray<string | number>): number => lineAt(lineCounter, locateNode(doc, path));
  const issues: PolicyIssue[] = [];
  for (const error of doc.errors) {
    issues.push({
      severity: 'error',
      kind: 'parse',
      message: firstLine(error.message),
      source: { file, line: error.linePos?.[0].line ?? 1 },
    });
  }
  for (const warning of doc.warnings) {
    issues.push({ severity: 'warning', kind: 'parse', message: firstLine(warning.message), source: { file, line: warning.linePos?.[0].line ?? 1 } });
  }
  if (doc.errors.length > 0) return { file, document: null, issues, lineOf };

  let value: unknown;
  try {
    // maxAliasCount bounds alias expansion ("billion laughs").
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    issues.push({ severity: 'error', kind: 'parse', message: (error as Error).message, source: { file, line: 1 } });
    return { file, document: null, issues, lineOf };
  }
  const validate = policyFileValidator();
  if (!validate(value)) {
    for (const error of validate.errors ?? []) issues.push(schemaIssue(file, error, lineOf));
    return { file, document: null, issues, lineOf };
  }
  return { file, document: value, issues, lineOf };
}

/** Turns one ajv error into an issue located at the offending key or node. */
function schemaIssue(file: string, error: ErrorObject, lineOf: ParsedPolicyFile['lineOf']): PolicyIssue {
  const path = parsePointer(error.instancePath);
  const where = displayPath(path);
  let message: string;
  let line: number;
  switch (error.keyword) {
    case 'additionalProperties': {
      const key = String(error.params.additionalProperty);
      message = `${where}: unknown key "${key}"`;
      line = lineOf([...path, key]);
      break;
    }
    case 'required':
      message = `${where}: missing required key "${String(error.params.missingProperty)}"`;
      line = lineOf(path);
      break;
    case 'enum':
      message = `${where}: must be one of ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
      line = lineOf(path);
      break;
    case 'const':
      message = `${where}: must be ${JSON.stringify(error.params.allowedValue)}`;
      line = lineOf(path);
      break;
    case 'pattern':
      message = path[path.length - 1] === 'permission'
        ? `${where}: not a permission code "<resource>:<action>" (resource and action [A-Za-z0-9_.-]+, action may be "*", or "*:*")`
        : `${where}: must match ${String(error.params.pattern)}`;
      line = lineOf(path);
      break;
    case 'propertyNames':
      message = `${where}: invalid key "${String(error.params.propertyName)}"`;
      line = lineOf([...path, String(error.params.propertyName)]);
      break;
    default:
      message = `${where}: ${error.message ?? 'is invalid'}`;
      line = lineOf(path);
  }
  return { severity: 'error', kind: 'schema', message, source: { file, line } };
}

/** RFC 6901 JSON Pointer → path segments. */
function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer.slice(1).split('/').map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** `['routes', '1', 'methods']` → `routes[1].methods` (the root is shown as `(top level)`). */
function displayPath(path: readonly string[]): string {
  if (path.length === 0) return '(top level)';
  let out = '';
  for (const segment of path) {
    if (/^[0-9]+$/.test(segment)) out += `[${segment}]`;
    else out += out === '' ? segment : `.${segment}`;
  }
  return out;
}

/** The deepest node along `path`; for a map member that is the last segment, its key node. */
/** The deepest YAML node along `path` (for a map member that is the last segment, its key); aliases followed. */
export function locateNode(doc: Document, path: ReadonlyArray<string | number>): Node | null {
  let node: unknown = doc.contents;
  let found: Node | null = (node as Node | null) ?? null;
  for (let i = 0; i < path.length; i++) {
    if (isAlias(node)) node = node.resolve(doc);
    const segment = path[i];
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === String(segment));
      if (!pair) return found;
      if (i === path.length - 1 && isScalar(pair.key)) return pair.key;
      node = pair.value;
    } else if (isSeq(node)) {
      node = node.items[Number(segment)];
    } else {
      return found;
    }
    if (node === null || node === undefined) return found;
    found = node as Node;
  }
  return found;
}

function lineAt(lineCounter: LineCounter, node: Node | null): number {
  const offset = node?.range?.[0];
  return offset === undefined ? 1 : lineCounter.linePos(offset).line;
}

function firstLine(message: string): string {
  const line = message.split('\n', 1)[0];
  return line.replace(/:$/, '');
}
