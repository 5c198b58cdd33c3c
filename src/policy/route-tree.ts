import type { CompiledRoute, DefaultAction, MethodRefusal, RouteMatch } from './compiled-policy';
import { parseRoutePattern, type PatternSegment } from './route-pattern';
import { coversRoute, foldAsciiCase } from './route-strictness';

export { parseRoutePattern, type ParsedPattern, type PatternSegment } from './route-pattern';

/** Optional instrumentation of {@link RouteTree.match}: counts tree nodes visited (tests, benchmarks). */
export interface MatchCounter {
  visits: number;
}

/** How a {@link RouteTree} matches. */
export interface RouteTreeOptions {
  /**
   * Static segments compare exactly (policy `match: { case-sensitive: true }`). Default false: ASCII letters
   * compare case-insensitively, like Express, @koa/router and ASP.NET route (#11.5).
   */
  caseSensitive?: boolean;
  /** The policy's `default`: what a method not listed at a declared path would otherwise fall to. */
  defaultAction?: DefaultAction;
}

interface Terminal {
  route: CompiledRoute;
  /** Names of the pattern's `:param` segments, in path order (param names may differ between routes). */
  paramNames: readonly string[];
  /** Index of the path segment holding the resource id, or -1. */
  resourceSegment: number;
}

interface TreeNode {
  /** Static children keyed by their segment, ASCII-folded unless the tree is case-sensitive. */
  readonly staticChildren: Map<string, TreeNode>;
  /** The segment as first written, for {@link RouteTree.prettyPrint}. */
  label: string;
  paramChild: TreeNode | null;
  /** The `**` slot: a node holding terminals only (`**` is always last). */
  wildcard: TreeNode | null;
  /** Method (`GET`, …, or `*`) → route ending here. */
  readonly terminals: Map<string, Terminal>;
}

/** One lookup's state: the path (as given and case-folded), the param values, what was declared. */
interface Walk {
  method: string;
  path: string;
  /** `path` with ASCII letters folded (the same string when case-sensitive): used for static segments only. */
  folded: string;
  end: number;
  values: string[];
  counter: MatchCounter | undefined;
  /** The most specific node whose pattern matches the whole path but lists no route for the method. */
  declared: TreeNode | null;
}

function newNode(label: string): TreeNode {
  return { staticChildren: new Map(), label, paramChild: null, wildcard: null, terminals: new Map() };
}

/**
 * The route matcher: one segment tree whose nodes hold a static-children map, one `:param` child, one
 * `**` slot and terminal routes keyed by method. A lookup walks the request path once, segment by segment
 * (static > `:param` > `**`, backtracking when a more specific subtree has no route for the method),
 * so its cost depends on the path's depth, never on the number of routes. Static segments are compared
 * ASCII-case-insensitively unless {@link RouteTreeOptions.caseSensitive}: the path is folded once per
 * lookup, parameter values keep the case the client sent.
 *
 * A method that no route of the most specific matching pattern lists falls through to a broader route (or
 * `default`) only when that one checks at least as much as every route of that pattern ({@link coversRoute});
 * otherwise the lookup is a {@link MethodRefusal} and {@link match} answers null (#11.30).
 */
export class RouteTree {
  private readonly root: TreeNode = newNode('');
  private readonly caseSensitive: boolean;
  private readonly defaultAction: DefaultAction;

  constructor(options: RouteTreeOptions = {}) {
    this.caseSensitive = options.caseSensitive ?? false;
    this.defaultAction = options.defaultAction ?? 'deny';
  }

  /** Builds a tree from compiled routes; the first route wins where two claim the same pattern and method. */
  static fromRoutes(routes: readonly CompiledRoute[], options: RouteTreeOptions = {}): RouteTree {
    const tree = new RouteTree(options);
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
    let resourceSegment = -1;
    parts.forEach((segment, index) => {
      if (segment.kind === 'static') {
        const key = this.caseSensitive ? segment.value : foldAsciiCase(segment.value);
        let child = node.staticChildren.get(key);
        if (!child) node.staticChildren.set(key, (child = newNode(segment.value)));
        node = child;
      } else if (segment.kind === 'param') {
        node.paramChild ??= newNode(`:${segment.name}`);
        paramNames.push(segment.name);
        if (route.resource?.idParam === segment.name) resourceSegment = index;
        node = node.paramChild;
      } else {
        node = node.wildcard ??= newNode('**');
      }
    });
    const terminal: Terminal = { route, paramNames, resourceSegment };
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
   * allocated only on success. Null when no route decides: `default` applies, unless {@link refusal} says
   * the method is refused.
   */
  match(method: string, path: string, counter?: MatchCounter): RouteMatch | null {
    const walk = this.walk(method, path, counter);
    const found = this.find(this.root, walk, 1);
    if (walk.declared !== null && this.refuses(walk.declared, found)) return null;
    if (!found) return null;
    const params: Record<string, string> = {};
    for (let i = 0; i < found.paramNames.length; i++) params[found.paramNames[i]] = walk.values[i];
    return { route: found.route, params };
  }

  /**
   * Why `method` is refused at `path`: a more specific pattern declares routes for the path, none for the
   * method, and what the method would fall through to (a broader route or `default`) checks less. Null
   * when {@link match} finds a route, or when `default` rightly decides.
   */
  refusal(method: string, path: string): MethodRefusal | null {
    const walk = this.walk(method, path, undefined);
    const found = this.find(this.root, walk, 1);
    if (walk.declared === null || !this.refuses(walk.declared, found)) return null;
    return { declared: distinctRoutes(walk.declared), fallback: found?.route ?? null };
  }

  /** A human-readable dump of the tree, one node per line, with the routes ending at each node. */
  prettyPrint(): string {
    const lines: string[] = [`/${describeTerminals(this.root)}`];
    printChildren(this.root, '', lines);
    return lines.join('\n');
  }

  private walk(method: string, path: string, counter: MatchCounter | undefined): Walk {
    let end = path.length;
    if (end > 1 && path.charCodeAt(end - 1) === 0x2f /* '/' */) end--;
    const folded = this.caseSensitive ? path : foldAsciiCase(path);
    return { method, path, folded, end, values: [], counter, declared: null };
  }

  /** True when a method not listed at `declared` must not fall through to `found` (null: `default`). */
  private refuses(declared: TreeNode, found: Terminal | null): boolean {
    const fallback = found ?? this.defaultAction;
    for (const terminal of declared.terminals.values()) if (!coversRoute(fallback, terminal)) return true;
    return false;
  }

  private find(node: TreeNode, walk: Walk, pos: number): Terminal | null {
    if (walk.counter) walk.counter.visits++;
    const end = walk.end;
    if (pos >= end) {
      const here = this.pick(node, walk);
      if (here) return here;
      // `**` also matches zero segments: `/api/admin/**` covers `/api/admin`.
      return node.wildcard ? this.wildcardTerminal(node.wildcard, walk) : null;
    }
    let next = walk.path.indexOf('/', pos);
    if (next === -1 || next > end) next = end;
    if (node.staticChildren.size > 0) {
      const child = node.staticChildren.get(walk.folded.slice(pos, next));
      if (child) {
        const found = this.find(child, walk, next + 1);
        if (found) return found;
      }
    }
    if (node.paramChild && next > pos) {
      walk.values.push(walk.path.slice(pos, next));
      const found = this.find(node.paramChild, walk, next + 1);
      if (found) return found;
      walk.values.pop();
    }
    return node.wildcard ? this.wildcardTerminal(node.wildcard, walk) : null;
  }

  private wildcardTerminal(node: TreeNode, walk: Walk): Terminal | null {
    if (walk.counter) walk.counter.visits++;
    return this.pick(node, walk);
  }

  /** The node's route for the method; remembers the first (most specific) node that has routes but none for it. */
  private pick(node: TreeNode, walk: Walk): Terminal | null {
    const found = pickTerminal(node, walk.method);
    if (found === null && walk.declared === null && node.terminals.size > 0) walk.declared = node;
    return found;
  }
}

/** The exact method, then `GET` for `HEAD`, then the any-method route. */
function pickTerminal(node: TreeNode, method: string): Terminal | null {
  const terminals = node.terminals;
  if (terminals.size === 0) return null;
  return terminals.get(method) ?? (method === 'HEAD' ? terminals.get('GET') : undefined) ?? terminals.get('*') ?? null;
}

function distinctRoutes(node: TreeNode): CompiledRoute[] {
  return [...new Set([...node.terminals.values()].map((terminal) => terminal.route))];
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
  const children: TreeNode[] = [...node.staticChildren.values()].sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
  if (node.paramChild) children.push(node.paramChild);
  if (node.wildcard) children.push(node.wildcard);
  children.forEach((child, index) => {
    const last = index === children.length - 1;
    lines.push(`${indent}${last ? '└── ' : '├── '}${child.label}${describeTerminals(child)}`);
    printChildren(child, indent + (last ? '    ' : '│   '), lines);
  });
}
