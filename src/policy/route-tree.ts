import type { CompiledRoute, RouteMatch } from './compiled-policy';

/** One segment of a route pattern. */
export type PatternSegment =
  | { kind: 'static'; value: string }
  | { kind: 'param'; name: string }
  | { kind: 'wildcard' };

/** A parsed route pattern, or why it is not one. */
export type ParsedPattern =
  | { ok: true; /** The pattern without its trailing `/`. */ pattern: string; segments: PatternSegment[] }
  | { ok: false; error: string };

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses a full route pattern (design.md §5.1): static segments, `:param` (one segment), `**` (the rest of
 * the path, zero or more segments, last only). A trailing `/` is ignored; empty segments are refused.
 */
export function parseRoutePattern(pattern: string): ParsedPattern {
  if (!pattern.startsWith('/')) return { ok: false, error: `path "${pattern}" must start with "/"` };
  const trimmed = pattern.length > 1 && pattern.endsWith('/') ? pattern.slice(0, -1) : pattern;
  if (trimmed === '/') return { ok: true, pattern: '/', segments: [] };
  const parts = trimmed.slice(1).split('/');
  const segments: PatternSegment[] = [];
  const names = new Set<string>();
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    const fail = (why: string): ParsedPattern => ({ ok: false, error: `path "${pattern}": ${why}` });
    if (part === '') return fail('empty segment ("//")');
    if (part === '**') {
      if (i !== parts.length - 1) return fail('"**" is only allowed as the last segment');
      segments.push({ kind: 'wildcard' });
    } else if (part.startsWith(':')) {
      const name = part.slice(1);
      // `__proto__` could not be returned as an own property of the params object.
      if (!PARAM_NAME.test(name) || name === '__proto__') return fail(`invalid parameter name "${part}" (expected :[A-Za-z_][A-Za-z0-9_]*)`);
      if (names.has(name)) return fail(`parameter ":${name}" appears twice`);
      names.add(name);
      segments.push({ kind: 'param', name });
    } else {
      if (part.includes('*')) return fail(`"*" is only allowed as a whole "**" segment ("${part}")`);
      // Request paths are normalized before matching (design.md §7): dot segments never reach the matcher.
      if (part === '.' || part === '..') return fail(`dot segment "${part}" can never match a normalized path`);
      if (/[?#\s\u0000-\u001f\u007f]/.test(part)) return fail(`segment "${part}" contains "?", "#", a space or a control character`);
      segments.push({ kind: 'static', value: part });
    }
  }
  return { ok: true, pattern: trimmed, segments };
}

/** Optional instrumentation of {@link RouteTree.match}: counts tree nodes visited (tests, benchmarks). */
export interface MatchCounter {
  visits: number;
}

interface Terminal {
  route: CompiledRoute;
  /** Names of the pattern's `:param` segments, in path order (param names may differ between routes). */
  paramNames: readonly string[];
}

interface TreeNode {
  readonly staticChildren: Map<string, TreeNode>;
  paramChild: TreeNode | null;
  /** The first parameter name inserted here, only for {@link RouteTree.prettyPrint}. */
  paramLabel: string;
  /** The `**` slot: a node holding terminals only (`**` is always last). */
  wildcard: TreeNode | null;
  /** Method (`GET`, …, or `*`) → route ending here. */
  readonly terminals: Map<string, Terminal>;
}

function newNode(): TreeNode {
  return { staticChildren: new Map(), paramChild: null, paramLabel: '', wildcard: null, terminals: new Map() };
}

/**
 * The route matcher: one segment tree whose nodes hold a static-children map, one `:param` child, one
 * `**` slot and terminal routes keyed by method. A lookup walks the request path once, segment by segment
 * (static > `:param` > `**`, backtracking only when a more specific subtree has no route for the method),
 * so its cost depends on the path's depth, never on the number of routes.
 */
export class RouteTree {
  private readonly root: TreeNode = newNode();

  /** Builds a tree from compiled routes; the first route wins where two claim the same pattern and method. */
  static fromRoutes(routes: readonly CompiledRoute[]): RouteTree {
    const tree = new RouteTree();
    for (const route of routes) tree.insert(route);
    return tree;
  }

  /**
   * Adds a route under each of its methods. A method already taken at the same pattern shape keeps its
   * first route (the compiler reports such duplicates); returns the methods that were not added.
   */
  insert(route: CompiledRoute, segments?: readonly PatternSegment[]): string[] {
    let parts = segments;
    if (parts === undefined) {
      const parsed = parseRoutePattern(route.pattern);
      if (!parsed.ok) throw new Error(parsed.error);
      parts = parsed.segments;
    }
    let node = this.root;
    const paramNames: string[] = [];
    for (const segment of parts) {
      if (segment.kind === 'static') {
        let child = node.staticChildren.get(segment.value);
        if (!child) node.staticChildren.set(segment.value, (child = newNode()));
        node = child;
      } else if (segment.kind === 'param') {
        if (!node.paramChild) {
          node.paramChild = newNode();
          node.paramChild.paramLabel = segment.name;
        }
        paramNames.push(segment.name);
        node = node.paramChild;
      } else {
        node = node.wildcard ??= newNode();
      }
    }
    const terminal: Terminal = { route, paramNames };
    const skipped: string[] = [];
    for (const method of route.methods) {
      if (node.terminals.has(method)) skipped.push(method);
      else node.terminals.set(method, terminal);
    }
    return skipped;
  }

  /**
   * The most specific route for `method` and a normalized `path` (starts with `/`, no dot segments, no
   * `//`); one trailing `/` is ignored. `GET` routes also answer `HEAD` (RFC 9110 §9.3.2). Params are
   * allocated only on success.
   */
  match(method: string, path: string, counter?: MatchCounter): RouteMatch | null {
    let end = path.length;
    if (end > 1 && path.charCodeAt(end - 1) === 0x2f /* '/' */) end--;
    const values: string[] = [];
    const found = this.find(this.root, method, path, 1, end, values, counter);
    if (!found) return null;
    const params: Record<string, string> = {};
    for (let i = 0; i < found.paramNames.length; i++) params[found.paramNames[i]] = values[i];
    return { route: found.route, params };
  }

  /** A human-readable dump of the tree, one node per line, with the routes ending at each node. */
  prettyPrint(): string {
    const lines: string[] = [`/${describeTerminals(this.root)}`];
    printChildren(this.root, '', lines);
    return lines.join('\n');
  }

  private find(node: TreeNode, method: string, path: string, pos: number, end: number, values: string[], counter?: MatchCounter): Terminal | null {
    if (counter) counter.visits++;
    if (pos >= end) {
      const here = pickTerminal(node, method);
      if (here) return here;
      // `**` also matches zero segments: `/api/admin/**` covers `/api/admin`.
      return node.wildcard ? this.wildcardTerminal(node.wildcard, method, counter) : null;
    }
    let next = path.indexOf('/', pos);
    if (next === -1 || next > end) next = end;
    if (node.staticChildren.size > 0) {
      const child = node.staticChildren.get(path.slice(pos, next));
      if (child) {
        const found = this.find(child, method, path, next + 1, end, values, counter);
        if (found) return found;
      }
    }
    if (node.paramChild && next > pos) {
      values.push(path.slice(pos, next));
      const found = this.find(node.paramChild, method, path, next + 1, end, values, counter);
      if (found) return found;
      values.pop();
    }
    return node.wildcard ? this.wildcardTerminal(node.wildcard, method, counter) : null;
  }

  private wildcardTerminal(node: TreeNode, method: string, counter?: MatchCounter): Terminal | null {
    if (counter) counter.visits++;
    return pickTerminal(node, method);
  }
}

/** The exact method, then `GET` for `HEAD`, then the any-method route. */
function pickTerminal(node: TreeNode, method: string): Terminal | null {
  const terminals = node.terminals;
  if (terminals.size === 0) return null;
  return terminals.get(method) ?? (method === 'HEAD' ? terminals.get('GET') : undefined) ?? terminals.get('*') ?? null;
}

function describeTerminals(node: TreeNode): string {
  if (node.terminals.size === 0) return '';
  const byRoute = new Map<string, string[]>();
  for (const [method, terminal] of node.terminals) {
    const methods = byRoute.get(terminal.route.id) ?? [];
    methods.push(method);
    byRoute.set(terminal.route.id, methods);
  }
  return `  [${[...byRoute].map(([id, methods]) => `${methods.join(',')} → ${id}`).join('; ')}]`;
}

function printChildren(node: TreeNode, indent: string, lines: string[]): void {
  const children: Array<[string, TreeNode]> = [...node.staticChildren].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (node.paramChild) children.push([`:${node.paramChild.paramLabel}`, node.paramChild]);
  if (node.wildcard) children.push(['**', node.wildcard]);
  children.forEach(([label, child], index) => {
    const last = index === children.length - 1;
    lines.push(`${indent}${last ? '└── ' : '├── '}${label}${describeTerminals(child)}`);
    printChildren(child, indent + (last ? '    ' : '│   '), lines);
  });
}
