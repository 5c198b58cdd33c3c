/**
 * `policy check` (docs/policy-format.md): the loader's errors and warnings plus whole-table lint, all reported
 * at once with file:line. Lint never changes what the gateway does; it finds routes that cannot do what
 * their author meant. Definitions (matching is most-specific-wins, docs/policy-format.md):
 *
 * - `unreachable` (warning): no request is ever decided by the route. Either its pattern can never equal a
 *   normalized request path (the gateway refuses such paths, or rewrites them first: `%7e` arrives as
 *   `~`, lower-case hex as upper case, raw non-ASCII is refused), or it only declares `CONNECT` (never
 *   routed: the gateway does not tunnel), or every request it matches, for every method it declares, is
 *   taken by more specific routes (e.g. `/a/**` next to `/a` and `/a/:x/**` for the same methods). A
 *   route hidden only by same-shape routes is the loader's `duplicate` warning and is not repeated.
 * - `shadowed` (warning): a more specific route takes requests away from a broader one and checks less
 *   for them: public or shadow mode (lets everything through) over a route that needs a session, no
 *   permission over a route that needs one, or no resource (no scope check) over a route that checks one,
 *   or READ over WRITE on the same resource type. `/api/admin/stats` public under `/api/admin/**` is the
 *   classic hole; `/api/projects/:id/export` without a resource under `/api/projects/:id/**` with one is
 *   another (a user scoped to project 1 exports project 2); a `HEAD` route that is weaker than the `GET`
 *   route of the same path is a third. A more specific route never inherits a broader route's checks (its
 *   own fields are what it checks): the warning is how an author learns. A site-wide `/**` is not counted:
 *   like `default`, it exists to have exceptions.
 * - `unknown-permission` (warning): a route asks for a permission code that no known template grants
 *   (exactly, through `<resource>:*`, or `*:*`), so nobody can pass it. Only when templates are given.
 * - `path-syntax` (warning): a static segment written like another router's parameter (`{id}`, `<id>`):
 *   it is matched literally; parameters are `:id`.
 * - `unfiltered-list` (warning): a `GET` route whose last segment is not a parameter (a list, `/projects`), with neither
 *   `resource` nor `filter`, whose path is the parent of a route checking a resource of type T (`/projects/:id`):
 *   "lists T without filtering: a scoped profile sees every T". The 403 on `/projects/2` is undone by the list.
 * - `refused-method` (warning): methods a pattern does not list that are refused rather than decided by a
 *   weaker broader route (see policy-lint-methods.ts).
 * - from the loader: errors `conflict`, `case-duplicate`, `match-mismatch`, `default-mismatch`, `public-conflict`;
 *   warnings `duplicate`, `no-resolver`, `empty-group`.
 */
import { normalizeRequestTarget } from '../http/normalize-target';
import type { CompiledPolicy, CompiledRoute, PolicyIssue, PolicyLoadResult } from '../policy/compiled-policy';
import { compilePolicyFiles, readPolicyDirectory, type PolicyLoadOptions } from '../policy/load-policy-directory';
import { RouteTree, type PatternSegment } from '../policy/route-tree';
import { refusedMethods } from './policy-lint-methods';
import { probeMethods, segmentsOf, standInPaths } from './request-classes';
import { foldAsciiCase } from '../policy/route-strictness';

/** What lint knows besides the policy. */
export interface PolicyLintOptions {
  /** Templates of the deployment (provisioning file, database); absent = the permission check is skipped. */
  templates?: ReadonlyArray<{ versionId: string; permissions: readonly string[] }>;
  /** Where the templates came from, for messages (e.g. `config/provision.example.yaml`). */
  templatesOrigin?: string;
  /** `iam.gateway.allow-path-parameters`: whether `;` can appear in request paths. */
  allowPathParameters?: boolean;
}


/**
 * Loads `dir` like the gateway does and lints the result: every issue, sorted by file and line. `policy`
 * is null when there is an error (lint that needs a compiled policy then does not run).
 */
export async function checkPolicyDirectory(dir: string, options: PolicyLintOptions & PolicyLoadOptions = {}): Promise<PolicyLoadResult> {
  const { files, issues: readIssues } = await readPolicyDirectory(dir);
  if (files.length === 0) return { policy: null, issues: readIssues };
  const compiled = compilePolicyFiles(files, options);
  const issues = [...readIssues, ...compiled.issues];
  if (readIssues.length > 0 || !compiled.policy) return { policy: null, issues: sortIssues(issues) };
  return { policy: compiled.policy, issues: sortIssues([...issues, ...lintPolicy(compiled.policy, options)]) };
}

/** Whole-table checks of a compiled policy (see the file comment for the definitions). */
export function lintPolicy(policy: CompiledPolicy, options: PolicyLintOptions = {}): PolicyIssue[] {
  const issues: PolicyIssue[] = [];
  const warn = (kind: string, message: string, route: CompiledRoute, related?: CompiledRoute): void => {
    issues.push({ severity: 'warning', kind, message, source: route.source, ...(related ? { related: related.source } : {}) });
  };
  const maxDepth = Math.max(0, ...policy.routes.map((route) => segmentsOf(route).length));
  // The routes that check a resource, with their patterns parsed once: the candidates a route could drop a scope check of.
  const parsed = new PrefixIndex(policy.routes.map((route) => ({ route, segments: segmentsOf(route) })), policy.caseSensitive);
  const scopeChecking = new PrefixIndex(parsed.all.filter(({ route }) => route.resource !== null && protectionLevel(route) === 2), policy.caseSensitive);

  for (const route of policy.routes) {
    const segments = segmentsOf(route);
    for (const segment of segments) {
      const foreign = segment.kind === 'static' ? /\{([^}]*)\}|<([^>]*)>/.exec(segment.value) : null;
      if (segment.kind === 'static' && foreign) {
        const name = (foreign[1] ?? foreign[2] ?? '').replace(/^.*:/, '') || 'id';
        warn('path-syntax', `segment "${segment.value}" of ${route.pattern} is matched literally; a path parameter is written :${name}`, route);
      }
    }
    const unmatchable = normalizationProblem(route, segments, options.allowPathParameters ?? false, policy.caseSensitive);
    if (unmatchable) {
      warn('unreachable', unmatchable, route);
      continue;
    }
    if (route.methods.includes('CONNECT')) {
      const only = route.methods.length === 1;
      warn('unreachable', `${only ? 'route' : 'method CONNECT of route'} ${route.pattern} is never used: the gateway does not route CONNECT requests`, route);
      if (only) continue;
    }
    const hidden = hiddenBy(policy, route, segments, maxDepth);
    if (hidden) {
      const names = hidden.map((other) => other.id).join(', ');
      warn('unreachable', `route ${describeMethods(route)} ${route.pattern} is never selected: more specific routes take every request it matches (${names})`, route, hidden[0]);
      continue;
    }
    for (const { method, broader } of weakerOverrides(policy, route, segments, parsed, scopeChecking)) {
      warn(
        'shadowed',
        `${method} ${route.pattern} (${protectionOf(route)}) takes precedence over ${broader.pattern} (${protectionOf(broader)}, ${broader.id}): those requests skip ${skippedBy(route, broader)}`,
        route,
        broader,
      );
    }
  }

  issues.push(...refusedMethods(policy));

  for (const { route, types } of unfilteredLists(policy)) {
    for (const type of types) warn('unfiltered-list', `GET ${route.pattern} lists ${type} without filtering: a scoped profile sees every ${type} (set filter: {type: ${type}, id: /id} on it, or a resource)`, route);
  }

  if (options.templates) {
    const origin = options.templatesOrigin ? ` in ${options.templatesOrigin}` : '';
    const count = options.templates.length;
    for (const route of policy.routes) {
      if (route.permission === null || isGranted(route.permission, options.templates)) continue;
      warn('unknown-permission', `permission ${route.permission} of route ${route.pattern} is granted by no template${origin} (${count} template${count === 1 ? '' : 's'}): nobody can pass it`, route);
    }
  }
  return issues;
}

/** `file:line: severity kind: message`; issues without a file are prefixed with `where` (the directory). */
export function formatPolicyIssue(issue: PolicyIssue, where: string, fileLabel: (file: string) => string = (file) => file): string {
  const at = issue.source ? `${fileLabel(issue.source.file)}:${issue.source.line}` : where;
  return `${at}: ${issue.severity} ${issue.kind}: ${issue.message}`;
}

/** Stable sort by file then line; issues without a location first. */
export function sortIssues(issues: readonly PolicyIssue[]): PolicyIssue[] {
  return [...issues].sort((a, b) => {
    if (!a.source || !b.source) return (a.source ? 1 : 0) - (b.source ? 1 : 0);
    if (a.source.file !== b.source.file) return a.source.file < b.source.file ? -1 : 1;
    return a.source.line - b.source.line;
  });
}

/** True when some template grants `code` exactly, through `<resource>:*`, or through `*:*` (docs/policy-format.md). */
export function isGranted(code: string, templates: ReadonlyArray<{ permissions: readonly string[] }>): boolean {
  const resource = code.slice(0, code.indexOf(':'));
  const anyAction = `${resource}:*`;
  return templates.some((template) => template.permissions.some((granted) => granted === code || granted === anyAction || granted === '*:*'));
}

// ---------------------------------------------------------------- helpers


/**
 * Why no normalized request path can equal the pattern, or null. The pattern's static segments are run
 * through the gateway's own normalizer (docs/http-contract.md), with a plain value for each parameter.
 */
function normalizationProblem(route: CompiledRoute, segments: readonly PatternSegment[], allowPathParameters: boolean, caseSensitive: boolean): string | null {
  const parts = segments.filter((segment) => segment.kind !== 'wildcard').map((segment) => (segment.kind === 'static' ? segment.value : 'x'));
  const sample = `/${parts.join('/')}`;
  const normalized = normalizeRequestTarget(sample, { allowPathParameters, host: undefined });
  if (!normalized.ok) {
    const hint = /non-ASCII/.test(normalized.reason) ? `; write it percent-encoded: ${encodeURI(route.pattern)}` : '';
    return `path ${route.pattern} can never match: the gateway refuses such request paths (${normalized.reason})${hint}`;
  }
  // Case-insensitive matching folds both sides: `%c3%a9` then matches the normalized `%C3%A9`.
  if (caseSensitive ? normalized.path !== sample : foldAsciiCase(normalized.path) !== foldAsciiCase(sample)) {
    return `path ${route.pattern} can never match: requests for it arrive normalized as ${normalized.path}; write the pattern in that form`;
  }
  return null;
}



/** Routes with equal shapes match the same paths (static segments folded unless the policy is case-sensitive). */
function shapeOf(route: CompiledRoute, caseSensitive: boolean): string {
  const shape = segmentsOf(route)
    .map((segment) => (segment.kind === 'static' ? segment.value : segment.kind === 'param' ? ':' : '**'))
    .join('/');
  return caseSensitive ? shape : foldAsciiCase(shape);
}

/**
 * The routes that take every request `route` matches, or null when it is selected for some request (or
 * is hidden only by same-shape routes: the loader's `duplicate`).
 */
function hiddenBy(policy: CompiledPolicy, route: CompiledRoute, segments: readonly PatternSegment[], maxDepth: number): CompiledRoute[] | null {
  const winners = new Map<string, CompiledRoute>();
  for (const method of probeMethods(route)) {
    for (const path of standInPaths(segments, maxDepth)) {
      const match = policy.match(method, path);
      if (match?.route === route) return null;
      // The route's own stand-in matches nothing only when a more specific pattern refuses the method there.
      const takenBy = match ? [match.route] : (policy.refusal(method, path)?.declared ?? null);
      if (takenBy === null) return null;
      for (const other of takenBy) winners.set(other.id, other);
    }
  }
  const shape = shapeOf(route, policy.caseSensitive);
  const others = [...winners.values()];
  return others.every((other) => shapeOf(other, policy.caseSensitive) === shape) ? null : others;
}

/**
 * The `GET` routes that list a resource type without a scope check (see `unfiltered-list` in the file comment), each
 * with the types its child routes check, in first-seen order.
 */
function unfilteredLists(policy: CompiledPolicy): Array<{ route: CompiledRoute; types: string[] }> {
  const fold = (value: string): string => (policy.caseSensitive ? value : foldAsciiCase(value));
  const keyOf = (segments: readonly PatternSegment[]): string | null =>
    segments.every((segment) => segment.kind !== 'wildcard') ? segments.map((segment) => (segment.kind === 'static' ? `s:${fold(segment.value)}` : 'p')).join('/') : null;
  // Each parent path (as a shape key) → the resource types of the routes one parameter below it.
  const childTypes = new Map<string, Set<string>>();
  for (const route of policy.routes) {
    if (route.resource === null) continue;
    const segments = segmentsOf(route);
    segments.forEach((segment, index) => {
      if (segment.kind !== 'param' || index === 0) return;
      const parent = keyOf(segments.slice(0, index));
      if (parent !== null) (childTypes.get(parent) ?? childTypes.set(parent, new Set()).get(parent)!).add(route.resource!.type);
    });
  }
  const lists: Array<{ route: CompiledRoute; types: string[] }> = [];
  for (const route of policy.routes) {
    if (route.resource !== null || route.filter !== undefined) continue;
    if (!route.methods.includes('GET') && !route.methods.includes('*')) continue;
    const segments = segmentsOf(route);
    if (segments.length === 0 || segments.at(-1)!.kind !== 'static') continue;
    const key = keyOf(segments);
    const types = key === null ? undefined : childTypes.get(key);
    if (types !== undefined) lists.push({ route, types: [...types] });
  }
  return lists;
}

/** 0 lets every request through (public, shadow mode), 1 needs a session, 2 needs a permission. */
function protectionLevel(route: CompiledRoute): number {
  if (route.public || route.mode === 'shadow') return 0;
  return route.permission === null ? 1 : 2;
}

function protectionOf(route: CompiledRoute): string {
  if (route.public) return 'public';
  if (route.mode === 'shadow') return `shadow mode${route.permission ? `, ${route.permission} not enforced` : ''}`;
  if (route.permission === null) return 'any session, no permission';
  return route.resource === null ? route.permission : `${route.permission} on ${route.resource.type} ${route.resource.access}`;
}

/**
 * Whether `route` checks less than `broader` for the requests it takes from it (see `shadowed` above). A dropped scope
 * check counts only when the route's requests name the resource the broader route checks: the segment the broader
 * route takes the resource id from is a parameter in the route too (`/projects/:id/export` under `/projects/:id/**`),
 * not a static name (`/projects/archived` next to `/projects/:id` is another endpoint, not project "archived").
 */
function checksLess(route: CompiledRoute, broader: CompiledRoute): boolean {
  const level = protectionLevel(route);
  const broaderLevel = protectionLevel(broader);
  if (level !== broaderLevel) return level < broaderLevel;
  if (level < 2 || broader.resource === null) return false;
  const idParam = broader.resource.idParam;
  const at = segmentsOf(broader).findIndex((segment) => segment.kind === 'param' && segment.name === idParam);
  if (at === -1 || segmentsOf(route)[at]?.kind !== 'param') return false;
  if (route.resource === null) return true;
  return route.resource.type === broader.resource.type && route.resource.access === 'READ' && broader.resource.access === 'WRITE';
}

/** What the requests a weaker route takes skip of the broader route's checks. */
function skippedBy(route: CompiledRoute, broader: CompiledRoute): string {
  if (protectionLevel(route) < protectionLevel(broader)) return broader.permission ?? 'authentication';
  if (route.resource === null) return `the scope check on ${broader.resource!.type}`;
  return `the ${broader.resource!.type} WRITE scope check (READ is checked)`;
}

/**
 * Whether the pattern can match the stand-in path given as its segments (a parameter stand-in matches any parameter;
 * `**` is taken to match any rest, even an empty one: a superset, for pre-filtering only).
 */
function patternMatches(segments: readonly PatternSegment[], parts: readonly string[], caseSensitive: boolean): boolean {
  if (segments.length > parts.length + 1) return false;
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment.kind === 'wildcard') return true;
    const part = parts[i];
    if (part === undefined) return false;
    if (segment.kind === 'static' && (caseSensitive ? segment.value !== part : foldAsciiCase(segment.value) !== foldAsciiCase(part))) return false;
  }
  return parts.length === segments.length;
}

/** Broader routes that would decide the route's requests if it did not exist, and check more. */
function weakerOverrides(
  policy: CompiledPolicy,
  route: CompiledRoute,
  segments: readonly PatternSegment[],
  parsed: PrefixIndex,
  scopeChecking: PrefixIndex,
): Array<{ method: string; broader: CompiledRoute }> {
  const level = protectionLevel(route);
  const paths = standInPaths(segments, segments.length);
  const pathParts = paths.map((path) => path.split('/').slice(1));
  /** The routes of `index` other than this one whose patterns can match one of its stand-in paths. */
  const matching = (index: PrefixIndex): CompiledRoute[] => {
    const found = new Set<CompiledRoute>();
    for (const parts of pathParts) for (const other of index.candidates(parts)) if (other.route !== route && patternMatches(other.segments, parts, policy.caseSensitive)) found.add(other.route);
    return [...found];
  };
  // A route that checks a permission can only check less than a broader one on the resource: look further only when
  // some other route checking a resource matches its requests (cheap, and keeps large policies fast).
  if (level === 2) {
    if (route.resource !== null && route.resource.access === 'WRITE') return [];
    if (matching(scopeChecking).length === 0) return [];
  }

  const found = new Map<string, { method: string; broader: CompiledRoute }>();
  // What would decide these paths without the route: a tree of only the other routes that can match them (a
  // superset is fine: the tree picks the most specific), built once per route, never of the whole table.
  let without: RouteTree | null = null;
  for (const method of probeMethods(route)) {
    for (const path of paths) {
      if (policy.match(method, path)?.route !== route) continue;
      without ??= RouteTree.fromRoutes(
        matching(parsed),
        { caseSensitive: policy.caseSensitive, defaultAction: policy.defaultAction },
      );
      const broader = without.match(method, path)?.route;
      // `/**` plays the part of `default`: exceptions to it are the point, not a hole.
      if (broader && broader.pattern !== '/**' && checksLess(route, broader) && !found.has(broader.id)) found.set(broader.id, { method, broader });
    }
  }
  return [...found.values()];
}

function describeMethods(route: CompiledRoute): string {
  return route.methods.join(',');
}

interface ParsedRoute {
  route: CompiledRoute;
  segments: readonly PatternSegment[];
}

/**
 * Routes by their leading static segments, so finding the routes that may match a path looks only at patterns that
 * share its static prefix (lint of a 10,000-route table stays linear-ish instead of comparing every pair).
 */
class PrefixIndex {
  private readonly root: PrefixNode = { children: new Map(), here: [] };

  constructor(
    readonly all: ParsedRoute[],
    private readonly caseSensitive: boolean,
  ) {
    for (const entry of all) {
      let node = this.root;
      for (const segment of entry.segments) {
        if (segment.kind !== 'static') break;
        const key = this.key(segment.value);
        let child = node.children.get(key);
        if (!child) node.children.set(key, (child = { children: new Map(), here: [] }));
        node = child;
      }
      node.here.push(entry);
    }
  }

  /** Every route whose leading static segments are a prefix of `parts` (a superset of those that match it). */
  candidates(parts: readonly string[]): ParsedRoute[] {
    const out: ParsedRoute[] = [];
    let node: PrefixNode | undefined = this.root;
    for (let i = 0; node !== undefined; i++) {
      out.push(...node.here);
      node = i < parts.length ? node.children.get(this.key(parts[i]!)) : undefined;
    }
    return out;
  }

  private key(value: string): string {
    return this.caseSensitive ? value : foldAsciiCase(value);
  }
}

interface PrefixNode {
  children: Map<string, PrefixNode>;
  /** Routes whose static prefix ends here (their next segment is a parameter or `**`, or they end here). */
  here: ParsedRoute[];
}
