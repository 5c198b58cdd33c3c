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
 *   for them: public or shadow mode (lets everything through) over a route that needs a session, or no
 *   permission over a route that needs one. `/api/admin/stats` public under `/api/admin/**` is the
 *   classic hole; a `HEAD` route that is weaker than the `GET` route of the same path is another. A
 *   site-wide `/**` is not counted: like `default`, it exists to have exceptions.
 * - `unknown-permission` (warning): a route asks for a permission code that no known template grants
 *   (exactly, through `<resource>:*`, or `*:*`), so nobody can pass it. Only when templates are given.
 * - `path-syntax` (warning): a static segment written like another router's parameter (`{id}`, `<id>`):
 *   it is matched literally; parameters are `:id`.
 * - `refused-method` (warning): methods a pattern does not list that are refused rather than decided by a
 *   weaker broader route (see policy-lint-methods.ts).
 * - from the loader: errors `conflict`, `case-duplicate`, `match-mismatch`, `default-mismatch`, `public-conflict`;
 *   warnings `duplicate`, `no-resolver`, `empty-group`.
 */
import { normalizeRequestTarget } from '../http/normalize-target';
import type { CompiledPolicy, CompiledRoute, PolicyIssue, PolicyLoadResult } from '../policy/compiled-policy';
import { compilePolicyFiles, readPolicyDirectory, type PolicyLoadOptions } from '../policy/load-policy-directory';
import { parseRoutePattern, RouteTree, type PatternSegment } from '../policy/route-tree';
import { refusedMethods } from './policy-lint-methods';
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

/** Methods a route is probed with; an extension method stands for every method not listed. */
const PROBE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND'];

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
    for (const { method, broader } of weakerOverrides(policy, route, segments)) {
      warn(
        'shadowed',
        `${method} ${route.pattern} (${protectionOf(route)}) takes precedence over ${broader.pattern} (${protectionOf(broader)}, ${broader.id}): those requests skip ${broader.permission ?? 'authentication'}`,
        route,
        broader,
      );
    }
  }

  issues.push(...refusedMethods(policy));

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

function segmentsOf(route: CompiledRoute): PatternSegment[] {
  const parsed = parseRoutePattern(route.pattern);
  return parsed.ok ? parsed.segments : [];
}

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

/**
 * Request paths standing for every path the route matches: a fresh value (a control character no static
 * segment can contain) per parameter, and for `**` zero up to one more segment than the deepest route.
 * If the route is selected for some real path it is selected for the stand-in of the same length: any
 * route beating it on the stand-in uses parameters there, so it would match the real path too.
 */
function standInPaths(segments: readonly PatternSegment[], maxDepth: number): string[] {
  const prefix: string[] = [];
  let wildcard = false;
  segments.forEach((segment, index) => {
    if (segment.kind === 'wildcard') wildcard = true;
    else prefix.push(segment.kind === 'static' ? segment.value : `\u0001${index}`);
  });
  const join = (parts: string[]): string => `/${parts.join('/')}`;
  if (!wildcard) return [join(prefix)];
  const paths: string[] = [];
  for (let extra = 0; prefix.length + extra <= maxDepth + 1; extra++) {
    paths.push(join([...prefix, ...Array.from({ length: extra }, (_unused, i) => `\u0002${i}`)]));
  }
  return paths;
}

function probeMethods(route: CompiledRoute): string[] {
  if (route.methods[0] === '*') return PROBE_METHODS;
  const methods = route.methods.filter((method) => method !== 'CONNECT');
  if (methods.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD');
  return methods;
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

/** 0 lets every request through (public, shadow mode), 1 needs a session, 2 needs a permission. */
function protectionLevel(route: CompiledRoute): number {
  if (route.public || route.mode === 'shadow') return 0;
  return route.permission === null ? 1 : 2;
}

function protectionOf(route: CompiledRoute): string {
  if (route.public) return 'public';
  if (route.mode === 'shadow') return `shadow mode${route.permission ? `, ${route.permission} not enforced` : ''}`;
  return route.permission ?? 'any session, no permission';
}

/** Broader routes that would decide the route's requests if it did not exist, and check more. */
function weakerOverrides(policy: CompiledPolicy, route: CompiledRoute, segments: readonly PatternSegment[]): Array<{ method: string; broader: CompiledRoute }> {
  const level = protectionLevel(route);
  if (level === 2) return [];
  let without: RouteTree | null = null;
  const found = new Map<string, { method: string; broader: CompiledRoute }>();
  for (const method of probeMethods(route)) {
    for (const path of standInPaths(segments, segments.length)) {
      if (policy.match(method, path)?.route !== route) continue;
      without ??= RouteTree.fromRoutes(policy.routes.filter((other) => other !== route), { caseSensitive: policy.caseSensitive, defaultAction: policy.defaultAction });
      const broader = without.match(method, path)?.route;
      // `/**` plays the part of `default`: exceptions to it are the point, not a hole.
      if (broader && broader.pattern !== '/**' && protectionLevel(broader) > level && !found.has(broader.id)) found.set(broader.id, { method, broader });
    }
  }
  return [...found.values()];
}

function describeMethods(route: CompiledRoute): string {
  return route.methods.join(',');
}
