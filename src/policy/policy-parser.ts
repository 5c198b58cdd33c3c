import type { ErrorObject } from 'ajv';
import { constructFromEvents, CORE_SCHEMA, EVENT_ID, getScalarValue, parseEvents, SCALAR_STYLE, type Event as YamlEvent } from 'js-yaml';
import { yamlErrorReports } from './yaml-errors';
import { CST, isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, Parser, type Document, type Node } from 'yaml';
import { displayPath, pointerSegments } from '../domain/schema-errors';
import type { PolicyIssue } from './compiled-policy';
import { PATTERN_MEANINGS, policyFileValidator, type PolicyFileDocument } from './policy-schema';

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
 * Parses one policy file (YAML, or JSON — JSON is YAML 1.2 too, so both keep line numbers) and validates it
 * against the policy schema. Never throws: every problem becomes an issue.
 *
 * Two readers, one meaning: a well-formed file without aliases is read by js-yaml's event parser, about ten
 * times faster than the `yaml` library's document model (a 10,000-route file in ~0.1 s instead of ~1.5 s,
 * which is what keeps `policy diff` and a reload of a large policy fast); lines come from the parser's source
 * offsets (the line table is built when a line is first asked for). Anything else — a syntax error, a
 * duplicate key, an unknown tag, an alias, several documents, an empty file — is read again by `yaml`, whose
 * messages and alias bound (`maxAliasCount`, against "billion laughs") are the ones users see. Both read the YAML 1.2 core schema
 * (no `yes`/`on` booleans, no `<<` merge keys); test/unit/policy-parser-readers.test.ts holds them to the
 * same values. What the two would read differently is refused (see REFUSED_CHARACTER).
 */
export function parsePolicyFile(file: string, text: string): ParsedPolicyFile {
  return parseWellFormed(file, text) ?? parseWithDocument(file, text);
}

/** The fast reader; null when the file needs the thorough one (see parsePolicyFile). Exported for its test. */
export function parseWellFormed(file: string, text: string): ParsedPolicyFile | null {
  if (REFUSED_CHARACTER.test(text) || MAY_HOLD_A_DIRECTIVE.test(text)) return null;
  let events: YamlEvent[];
  let documents: unknown[];
  let index: LocatedNode | null | typeof NOT_FOR_THE_FAST_READER;
  try {
    events = parseEvents(text, { filename: file });
    // One pass over the events before any value is built: it also finds what only `yaml` may read (see indexEvents).
    index = indexEvents(text, events);
    if (index === NOT_FOR_THE_FAST_READER) return null;
    documents = constructFromEvents(events, { source: text, filename: file, schema: CORE_SCHEMA });
  } catch {
    return null;
  }
  if (documents.length !== 1) return null;
  let lineStarts: number[] | undefined;
  const lineOf = (path: ReadonlyArray<string | number>): number => {
    lineStarts ??= startsOfLines(text);
    const offset = locateOffset(index, path);
    return offset === null ? 1 : lineAtOffset(lineStarts, offset);
  };
  return validated(file, documents[0], [], lineOf);
}

/** The thorough reader: the `yaml` library's document model, with its messages for every problem. Exported for its test. */
export function parseWithDocument(file: string, text: string): ParsedPolicyFile {
  const character = REFUSED_CHARACTER.exec(text);
  if (character) {
    // Refused before any reading: where such a file's lines end is the very thing in doubt.
    const line = lineAtOffset(startsOfLines(text), character.index);
    return { file, document: null, issues: [{ severity: 'error', kind: 'parse', message: refusedCharacterMessage(character[0], line), source: { file, line } }], lineOf: () => 1 };
  }
  const lineCounter = new LineCounter();
  // YAML 1.2 core schema (no `yes`/`on` booleans, no `<<` merge keys); duplicate keys are errors.
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: true });
  const lineOf = (path: ReadonlyArray<string | number>): number => lineAt(lineCounter, locateNode(doc, path));
  const issues: PolicyIssue[] = [];
  // The first error and a few after it: one slip makes the library report every line below it.
  for (const error of yamlErrorReports(text, doc.errors)) issues.push({ severity: 'error', kind: 'parse', message: error.message, source: { file, line: error.line } });
  for (const warning of doc.warnings) {
    issues.push({ severity: 'warning', kind: 'parse', message: firstLine(warning.message), source: { file, line: warning.linePos?.[0].line ?? 1 } });
  }
  const refusals = refusedSyntax(file, text, lineCounter);
  issues.push(...refusals);
  if (doc.errors.length > 0 || refusals.length > 0) return { file, document: null, issues, lineOf };

  let value: unknown;
  try {
    // maxAliasCount bounds alias expansion ("billion laughs").
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    issues.push({ severity: 'error', kind: 'parse', message: (error as Error).message, source: { file, line: 1 } });
    return { file, document: null, issues, lineOf };
  }
  return validated(file, value, issues, lineOf);
}

/**
 * What no policy file may hold, because the two readers (or an editor and the readers) would take the same text
 * two ways; a policy author needs none of it:
 * - a carriage return without a line feed: a line end to an editor and to js-yaml, part of the comment or value
 *   to `yaml`, so `/a # note<CR>    public: true` is public to one and not to the other. CRLF is fine;
 * - the other line ends of YAML 1.1 and Unicode (NEL, U+2028, U+2029), which editors may break a line at and
 *   YAML 1.2 does not; control characters (js-yaml refuses them, `yaml` keeps them in a value); the
 *   bidirectional embeddings, overrides and isolates, which make a line display in another order than it reads.
 * The fast reader leaves any file holding one to this reader, which refuses it with its line.
 */
// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const REFUSED_CHARACTER = /\r(?!\n)|[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\u2028\u2029\u202A-\u202E\u2066-\u2069]/;
/** A directive starts a line; the fast reader leaves every file with a line starting `%` to refusedSyntax. */
const MAY_HOLD_A_DIRECTIVE = /(?:^\uFEFF?|\n)%/;

function refusedCharacterMessage(character: string, line: number): string {
  const code = `U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
  const what = character === '\r' ? 'a carriage return without a line feed (end lines with LF or CRLF)'
    : /[\u202A-\u202E\u2066-\u2069]/.test(character) ? 'a bidirectional override'
      : /[\x85\u2028\u2029]/.test(character) ? 'a line separator YAML does not end a line at'
        : 'a control character';
  return `${code} at line ${line}: ${what}; policy files may not hold one, it would be read differently from how it shows`;
}

/**
 * Directives and tags, refused wherever they are (each as an error at its line):
 * - a directive: `%YAML 1.1` switches `yaml` to YAML 1.1 (`yes` is true) while js-yaml stays on 1.2, and an
 *   unknown one is a warning to one reader and nothing to the other;
 * - a tag, even `!!str` or `!`: `version: !!float 1` is the number 1 to js-yaml and an unresolved tag, the
 *   string "1", to `yaml`'s core schema; a custom tag means nothing to either. A value is written as itself.
 * Read from `yaml`'s syntax tree, which keeps where each directive and tag was written.
 */
function refusedSyntax(file: string, text: string, lineCounter: LineCounter): PolicyIssue[] {
  const refusals: PolicyIssue[] = [];
  if (!/[!%]/.test(text)) return refusals;
  const refuse = (offset: number, message: string): void => {
    const { line } = lineCounter.linePos(offset);
    refusals.push({ severity: 'error', kind: 'parse', message: `${message} at line ${line}`, source: { file, line } });
  };
  for (const token of new Parser().parse(text)) {
    if (token.type === 'directive') {
      refuse(token.offset, `${token.source.split(/\s/, 1)[0]} directive: policy files take no directives (they are YAML 1.2)`);
    } else if (token.type === 'document') {
      CST.visit(token, (item) => {
        for (const part of [...item.start, ...(item.sep ?? [])]) {
          if (part.type === 'tag') refuse(part.offset, `tag ${part.source}: policy files take no tags, write the value itself`);
        }
      });
    }
  }
  return refusals;
}

function validated(file: string, value: unknown, issues: PolicyIssue[], lineOf: ParsedPolicyFile['lineOf']): ParsedPolicyFile {
  const validate = policyFileValidator();
  if (!validate(value)) {
    for (const error of validate.errors ?? []) issues.push(schemaIssue(file, error, lineOf));
    return { file, document: null, issues, lineOf };
  }
  return { file, document: value, issues, lineOf };
}

/** A node of the fast reader's document, just enough to find a path's line: where it starts, and its children. */
type LocatedNode =
  | { offset: number; kind: 'scalar' }
  | { offset: number; kind: 'sequence'; items: LocatedNode[] }
  | { offset: number; kind: 'mapping'; keys: Array<string | null>; keyNodes: LocatedNode[]; values: LocatedNode[] };

/**
 * What only `yaml` may read:
 * - an alias: `yaml` bounds its expansion, and shared references would let one alias multiply the schema
 *   validator's work;
 * - a mapping key that is not a plain word or a quoted string (an empty key, `null`, `true`, a number, a
 *   collection): the two readers turn such keys into property names differently (`[:]` is `{"": null}` to one
 *   and `{"null": null}` to the other), and no policy key looks like that;
 * - a tag, which only the thorough reader refuses with its line (see refusedSyntax).
 */
const NOT_FOR_THE_FAST_READER = Symbol('not for the fast reader');
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const NOT_A_STRING = /^(?:null|Null|NULL|true|True|TRUE|false|False|FALSE)$/;

/** Rebuilds the node tree of the first document from js-yaml's events, or says the file is not for the fast reader. */
function indexEvents(text: string, events: readonly YamlEvent[]): LocatedNode | null | typeof NOT_FOR_THE_FAST_READER {
  const open: Array<Extract<LocatedNode, { kind: 'sequence' | 'mapping' }>> = [];
  let root: LocatedNode | null = null;
  const pendingKey: Array<{ key: string | null; node: LocatedNode } | null> = [];
  let unusual = false;
  const add = (node: LocatedNode, key: string | null): void => {
    const parent = open[open.length - 1];
    if (!parent) {
      root ??= node;
      return;
    }
    if (parent.kind === 'sequence') {
      parent.items.push(node);
      return;
    }
    const waiting = pendingKey[pendingKey.length - 1];
    if (waiting == null) {
      if (key === null) unusual = true;
      pendingKey[pendingKey.length - 1] = { key, node };
    } else {
      parent.keys.push(waiting.key);
      parent.keyNodes.push(waiting.node);
      parent.values.push(node);
      pendingKey[pendingKey.length - 1] = null;
    }
  };
  for (const event of events) {
    switch (event.type) {
      case EVENT_ID.SCALAR: {
        if (event.tagStart !== -1) return NOT_FOR_THE_FAST_READER;
        const value = getScalarValue(text, event);
        const plain = event.style === SCALAR_STYLE.PLAIN;
        const keyLike = event.tagStart === -1 && (plain ? PLAIN_KEY.test(value) && !NOT_A_STRING.test(value) : event.style === SCALAR_STYLE.SINGLE_QUOTED || event.style === SCALAR_STYLE.DOUBLE_QUOTED);
        add({ offset: event.valueStart, kind: 'scalar' }, keyLike ? value : null);
        break;
      }
      case EVENT_ID.SEQUENCE:
      case EVENT_ID.MAPPING: {
        if (event.tagStart !== -1) return NOT_FOR_THE_FAST_READER;
        const node: Extract<LocatedNode, { kind: 'sequence' | 'mapping' }> = event.type === EVENT_ID.SEQUENCE
          ? { offset: event.start, kind: 'sequence', items: [] }
          : { offset: event.start, kind: 'mapping', keys: [], keyNodes: [], values: [] };
        add(node, null);
        open.push(node);
        pendingKey.push(null);
        break;
      }
      case EVENT_ID.ALIAS:
        return NOT_FOR_THE_FAST_READER;
      case EVENT_ID.POP:
        if (open.length > 0) {
          open.pop();
          pendingKey.pop();
        }
        break;
      default:
        break;
    }
    if (unusual) return NOT_FOR_THE_FAST_READER;
    if (root && open.length === 0 && event.type === EVENT_ID.POP) break;
  }
  return root;
}

/** Offset of the node at `path` with locateNode's rules (a map member's key; else the deepest node found). */
function locateOffset(root: LocatedNode | null, path: ReadonlyArray<string | number>): number | null {
  let node: LocatedNode | undefined = root ?? undefined;
  let found: LocatedNode | null = root;
  for (let i = 0; i < path.length && node; i++) {
    const segment = String(path[i]);
    if (node.kind === 'mapping') {
      const at = node.keys.indexOf(segment);
      if (at < 0) break;
      if (i === path.length - 1) return node.keyNodes[at]!.offset;
      node = node.values[at];
    } else if (node.kind === 'sequence') {
      node = node.items[Number(segment)];
    } else {
      break;
    }
    if (node) found = node;
  }
  return found ? found.offset : null;
}

function startsOfLines(text: string): number[] {
  const starts = [0];
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) starts.push(at + 1);
  return starts;
}

/** 1-based line of `offset`. */
function lineAtOffset(starts: readonly number[], offset: number): number {
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (starts[middle]! <= offset) low = middle;
    else high = middle - 1;
  }
  return low + 1;
}

/** Turns one ajv error into an issue located at the offending key or node. */
function schemaIssue(file: string, error: ErrorObject, lineOf: ParsedPolicyFile['lineOf']): PolicyIssue {
  const path = pointerSegments(error.instancePath);
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
    case 'pattern': {
      const pattern = String(error.params.pattern);
      message = `${where}: ${PATTERN_MEANINGS[pattern] ?? `must match ${pattern}`}`;
      line = lineOf(path);
      break;
    }
    case 'not': {
      // `not: {required: [a, b]}`: keys that exclude each other.
      const keys = (error.schema as { required?: unknown } | undefined)?.required;
      message = Array.isArray(keys) ? `${where}: ${keys.map((key) => `"${String(key)}"`).join(' and ')} exclude each other: keep one` : `${where}: ${error.message ?? 'is invalid'}`;
      line = lineOf(Array.isArray(keys) ? [...path, String(keys[keys.length - 1])] : path);
      break;
    }
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
