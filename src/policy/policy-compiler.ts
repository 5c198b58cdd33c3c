import type {
  AccessMode,
  CompiledPolicy,
  CompiledRoute,
  DefaultAction,
  PolicyIssue,
  PolicyLoadResult,
  ResolverAnswerMapping,
  ResourceResolverConfig,
  RouteFilter,
  SourceLocation,
} from './compiled-policy';
import { parseJsonPointer } from '../domain/json-pointer';
import type { ParsedPolicyFile } from './policy-parser';
import type { PolicyResolverDeclaration, PolicyRouteEntry, PolicyRouteResource } from './policy-schema';
import { buildRouteTree, type Leaf } from './route-conflicts';
import { parseRoutePattern, type PatternSegment } from './route-tree';

/** What {@link compilePolicy} needs besides the parsed files. */
export interface CompileContext {
  /** {@link CompiledPolicy.hash} of the files being compiled. */
  hash: string;
  /** Timeout of resolvers that set none (`iam.authz.resolver-timeout`). */
  defaultResolverTimeoutMs: number;
  /** `upstream.url`, the base of resolver URLs written as paths; null keeps them as paths (policy tools). */
  upstreamUrl?: string | null;
  /** Each file's size as read (CompiledPolicy.fileBytes). */
  fileBytes?: Readonly<Record<string, number>>;
}

/**
 * How the resolver's 200 answer becomes scope refs: `self`, or pointers into the host's own representation; undefined
 * for the resolver document `{scopes}`. The schema refuses `self` beside `scopes`.
 */
function resolverAnswer(resolver: PolicyResolverDeclaration): ResolverAnswerMapping | undefined {
  if (resolver.self === true) return Object.freeze({ kind: 'self' });
  if (resolver.scopes === undefined) return undefined;
  const scopes = resolver.scopes.map(({ type, id }) => Object.freeze({ type, pointer: id, tokens: Object.freeze(parseJsonPointer(id) ?? []) }));
  return Object.freeze({ kind: 'pointers', scopes: Object.freeze(scopes) });
}

/** `..` or `.` as a path segment: a resolver path must name the endpoint as it is, not climb out of it. */
const DOT_SEGMENT = /(^|\/)\.{1,2}(\/|$)/;

/** Effective defaults a group hands to its routes; `*Depth` says which nesting level set a value. */
interface Inherited {
  path: string;
  permission: string | null;
  permissionDepth: number;
  isPublic: boolean;
  publicDepth: number;
  resource: { value: PolicyRouteResource; source: SourceLocation; depth: number } | null;
  mode: 'enforce' | 'shadow';
  profile: 'required' | 'optional';
  audience: string | null;
}

const ROOT: Inherited = { path: '', permission: null, permissionDepth: -1, isPublic: false, publicDepth: -1, resource: null, mode: 'enforce', profile: 'required', audience: null };
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Compiles parsed policy files (in the order given) into one {@link CompiledPolicy}: flattens groups,
 * applies defaults, checks paths, resource ids and permissions, finds conflicting and duplicate routes
 * across all files, and builds the route tree. Every problem is collected; the policy is returned only
 * when no issue has severity `error` (docs/policy-format.md: all-or-nothing).
 */
export function compilePolicy(files: readonly ParsedPolicyFile[], context: CompileContext): PolicyLoadResult {
  const issues: PolicyIssue[] = files.flatMap((file) => file.issues);
  const error = (kind: string, message: string, source: SourceLocation | null, related?: SourceLocation): void => {
    issues.push({ severity: 'error', kind, message, source, ...(related ? { related } : {}) });
  };
  const warn = (kind: string, message: string, source: SourceLocation | null, related?: SourceLocation): void => {
    issues.push({ severity: 'warning', kind, message, source, ...(related ? { related } : {}) });
  };

  let defaultAction: { value: DefaultAction; source: SourceLocation } | null = null;
  let caseSensitive: { value: boolean; source: SourceLocation } | null = null;
  const resources = new Map<string, { resolver: ResourceResolverConfig | null; source: SourceLocation }>();
  const leaves: Leaf[] = [];

  for (const parsed of files) {
    const doc = parsed.document;
    if (!doc) continue;
    const at = (path: ReadonlyArray<string | number>): SourceLocation => ({ file: parsed.file, line: parsed.lineOf(path) });

    if (doc.default != null) {
      const source = at(['default']);
      if (!defaultAction) defaultAction = { value: doc.default, source };
      else if (defaultAction.value !== doc.default) {
        error('default-mismatch', `"default" is "${doc.default}" in ${parsed.file} but "${defaultAction.value}" in ${defaultAction.source.file}`, source, defaultAction.source);
      }
    }

    // Like `default`: every file that sets it must agree; files that do not follow the directory.
    const sensitive = doc.match?.['case-sensitive'];
    if (sensitive != null) {
      const source = at(['match', 'case-sensitive']);
      if (!caseSensitive) caseSensitive = { value: sensitive, source };
      else if (caseSensitive.value !== sensitive) {
        error('match-mismatch', `"match.case-sensitive" is ${sensitive} in ${parsed.file} but ${caseSensitive.value} in ${where(caseSensitive.source)}: one directory protects one host, its files must agree`, source, caseSensitive.source);
      }
    }

    for (const [type, declaration] of Object.entries(doc.resources ?? {})) {
      const source = at(['resources', type]);
      const previous = resources.get(type);
      if (previous) {
        error('duplicate-resource', `resource type ${type} is declared at ${where(previous.source)} and ${where(source)}`, source, previous.source);
        continue;
      }
      const resolver = declaration.resolver;
      let url = resolver?.url ?? '';
      if (url.startsWith('/')) {
        // A path: the resolver is an endpoint of the host behind the gateway (`upstream.url`).
        if (DOT_SEGMENT.test(url.split('?')[0]!)) error('resolver-url', `resource type ${type}: the resolver path ${url} has a "." or ".." segment`, source);
        if (context.upstreamUrl) url = `${context.upstreamUrl.replace(/\/+$/, '')}${url}`;
      }
      const answer = resolver ? resolverAnswer(resolver) : undefined;
      resources.set(type, {
        source,
        resolver: resolver ? { url, timeoutMs: parseTimeout(resolver.timeout, context.defaultResolverTimeoutMs), ...(answer ? { answer } : {}) } : null,
      });
    }

    const flatten = (entries: readonly PolicyRouteEntry[], inherited: Inherited, path: Array<string | number>, depth: number): void => {
      entries.forEach((entry, index) => {
        const entryPath = [...path, index];
        const source = at(entryPath);
        const joined = joinPath(inherited.path, entry.path, depth === 0);
        if (typeof joined !== 'string') {
          error('path', joined.error, at([...entryPath, 'path']));
          return;
        }
        const parsedPattern = parseRoutePattern(joined);
        if (!parsedPattern.ok) {
          error('path', parsedPattern.error, at([...entryPath, 'path']));
          return;
        }
        if (entry.public === true && (entry.permission != null || entry.resource != null)) {
          // Contradictory: a public route needs no token, so its permission or resource could never be checked.
          error('public-conflict', `${parsedPattern.pattern} is "public: true" and names a ${entry.permission != null ? 'permission' : 'resource'}: remove one (a public route checks nothing)`, source);
          return;
        }
        const own: Inherited = {
          path: parsedPattern.pattern,
          permission: entry.permission ?? inherited.permission,
          permissionDepth: entry.permission != null ? depth : inherited.permissionDepth,
          isPublic: entry.public ?? inherited.isPublic,
          publicDepth: entry.public != null ? depth : inherited.publicDepth,
          resource: entry.resource != null ? { value: entry.resource, source, depth } : inherited.resource,
          mode: entry.mode ?? inherited.mode,
          profile: entry.profile ?? inherited.profile,
          audience: entry.audience ?? inherited.audience,
        };
        if (entry.routes != null) {
          // A filter names the shape of one host answer: it belongs to the route that answers it, never to a group.
          if (entry.filter != null) error('filter-on-group', `a group (an entry with "routes") must not have "filter"; put it on the GET route whose answer is the list`, at([...entryPath, 'filter']));
          if (entry.methods != null) error('group-methods', `a group (an entry with "routes") must not have "methods"; put them on its routes`, at([...entryPath, 'methods']));
          if (entry.routes.length === 0) warn('empty-group', `group ${parsedPattern.pattern} has no routes`, source);
          flatten(entry.routes, own, [...entryPath, 'routes'], depth + 1);
          return;
        }
        const leaf = buildLeaf(entry, own, parsedPattern.segments, parsedPattern.pattern, source, { error, warn });
        if (leaf) leaves.push(leaf);
      });
    };
    flatten(doc.routes ?? [], ROOT, ['routes'], 0);
  }

  reportResolverGaps(leaves, resources, warn);
  const matchCase = caseSensitive?.value ?? false;
  const tree = buildRouteTree(leaves, { caseSensitive: matchCase, defaultAction: defaultAction?.value ?? 'deny' }, { error, warn });

  issues.sort(bySource);
  if (issues.some((issue) => issue.severity === 'error')) return { policy: null, issues };

  const compiledResources: CompiledPolicy['resources'] = Object.create(null) as CompiledPolicy['resources'];
  for (const [type, { resolver }] of resources) compiledResources[type] = Object.freeze({ resolver: resolver ? Object.freeze(resolver) : null });
  const routes = Object.freeze(leaves.map((leaf) => leaf.route)) as CompiledRoute[];
  const audiences: ReadonlySet<string> = new Set(routes.flatMap((route) => (route.audience === undefined ? [] : [route.audience])));
  const declaredResources = new Set(routes.flatMap((route) => (route.permission !== null && route.resource !== null ? [`${route.permission}\u0000${route.resource.type}`] : [])));
  const policy: CompiledPolicy = {
    hash: context.hash,
    loadedAt: new Date(),
    defaultAction: defaultAction?.value ?? 'deny',
    resources: Object.freeze(compiledResources),
    routes,
    files: files.map((file) => file.file),
    ...(context.fileBytes ? { fileBytes: context.fileBytes } : {}),
    caseSensitive: matchCase,
    audiences,
    match: (method, path) => tree.match(method, path),
    declaresResource: (permission, resourceType) => declaredResources.has(`${permission}\u0000${resourceType}`),
    refusal: (method, path) => tree.refusal(method, path),
  };
  return { policy: Object.freeze(policy), issues };
}

type Report = (kind: string, message: string, source: SourceLocation | null, related?: SourceLocation) => void;

/** Applies defaults to a leaf entry and checks what only the full path can tell. */
function buildLeaf(
  entry: PolicyRouteEntry,
  effective: Inherited,
  segments: PatternSegment[],
  pattern: string,
  source: SourceLocation,
  report: { error: Report; warn: Report },
): Leaf | null {
  const methods = entry.methods == null || entry.methods.includes('*') ? ['*'] : [...entry.methods];
  const resource = effective.resource;
  const id = where(source);
  // The nearest entry (the route, then its groups outwards) that sets `public`, `permission` or `resource`
  // decides: a route's own permission or resource inside a public group is checked, as written (#11.30).
  const isPublic = effective.isPublic && effective.publicDepth > effective.permissionDepth && effective.publicDepth > (resource?.depth ?? -1);
  let compiledResource: CompiledRoute['resource'] = null;
  let idPosition = -1;
  if (resource && !isPublic) {
    idPosition = segments.findIndex((segment) => segment.kind === 'param' && segment.name === resource.value.id);
    const declared = resource.source === source ? '' : ` (resource declared at ${where(resource.source)})`;
    if (idPosition < 0) {
      report.error('resource-id', `resource.id "${resource.value.id}" is not a parameter of ${pattern}${declared}`, source);
      return null;
    }
    if (effective.permission === null) {
      report.error('resource-without-permission', `route ${pattern} has a resource but no permission (own or from its group)${declared}`, source);
      return null;
    }
    const access: AccessMode = resource.value.access ?? (methods.every((method) => READ_METHODS.has(method)) ? 'READ' : 'WRITE');
    compiledResource = Object.freeze({ type: resource.value.type, idParam: resource.value.id, access, resolve: resource.value.resolve ?? 'optional' });
  }
  let filter: RouteFilter | undefined;
  if (entry.filter != null) {
    const declared = entry.filter;
    // The filter plans with the route's permission: without one (or on a public route) there is nothing to plan with.
    if (isPublic || effective.permission === null) {
      report.error('filter-without-permission', `route ${pattern} has a filter but no permission (own or from its group): the filter plans with the route's permission`, source);
      return null;
    }
    if (entry.methods == null || !entry.methods.includes('GET') || entry.methods.some((method) => method !== 'GET' && method !== 'HEAD')) {
      report.error('filter-method', `route ${pattern} has a filter: only a GET route (methods: [GET], HEAD follows GET) may have one`, source);
      return null;
    }
    // A shadow route lets every request through unchanged; a filter would enforce what the mode promises not to.
    if (effective.mode === 'shadow') {
      report.error('filter-shadow', `route ${pattern} has a filter and mode shadow: a shadow route enforces nothing, its answer cannot be filtered`, source);
      return null;
    }
    const items = declared.items ?? '';
    filter = Object.freeze({
      type: declared.type,
      access: declared.access ?? 'READ',
      id: declared.id,
      idTokens: Object.freeze(parseJsonPointer(declared.id) ?? []),
      items,
      itemsTokens: Object.freeze(parseJsonPointer(items) ?? []),
    });
  }
  const route: CompiledRoute = Object.freeze({
    id,
    source: Object.freeze({ ...source }),
    methods: Object.freeze(methods) as string[],
    pattern,
    public: isPublic,
    permission: isPublic ? null : effective.permission,
    resource: compiledResource,
    ...(filter === undefined ? {} : { filter }),
    mode: effective.mode,
    // A permission is checked against the active profile's grant, so `profile: optional` applies only without one.
    ...(effective.profile === 'optional' && !effective.isPublic && effective.permission === null ? { profile: 'optional' as const } : {}),
    // A public route's requests carry no assertion.
    ...(effective.audience !== null && !isPublic ? { audience: effective.audience } : {}),
  });
  const shape = segments.map((segment) => (segment.kind === 'static' ? segment.value : segment.kind === 'param' ? ':' : '**')).join('/');
  const outcome = JSON.stringify([
    route.public,
    route.permission,
    compiledResource && [compiledResource.type, idPosition, compiledResource.access, compiledResource.resolve],
    route.mode,
    route.profile ?? 'required',
    // Not a decision, but two routes for the same requests must not disagree on which host receives them.
    route.audience ?? null,
    // Nor on which elements of the answer the caller sees.
    filter === undefined ? null : [filter.type, filter.access, filter.id, filter.items],
  ]);
  return { route, segments, shape, outcome };
}

/** `no-resolver`: a route's resource type is undeclared or has no resolver (one warning per route). */
function reportResolverGaps(leaves: readonly Leaf[], resources: ReadonlyMap<string, { resolver: ResourceResolverConfig | null }>, warn: Report): void {
  for (const { route } of leaves) {
    if (!route.resource) continue;
    const declared = resources.get(route.resource.type);
    if (declared?.resolver) continue;
    const why = declared ? 'is declared without a resolver' : 'is not declared in "resources"';
    const effect = route.resource.resolve === 'required' ? ' (resolve: required → requests answer 500 IAM_RESOURCE_RESOLUTION_UNAVAILABLE)' : ' (only scopes by id apply)';
    warn('no-resolver', `resource type ${route.resource.type} of route ${route.pattern} ${why}${effect}`, route.source);
  }
}

/** Joins a group path and a child path: `""` is the group itself, `/x` appends. */
function joinPath(base: string, child: string, topLevel: boolean): string | { error: string } {
  if (topLevel) return child;
  if (child === '') return base;
  if (!child.startsWith('/')) return { error: `path "${child}" inside a group must be "" or start with "/"` };
  return (base.endsWith('/') ? base.slice(0, -1) : base) + child;
}

/** `"2s"`, `"500ms"` or milliseconds (validated by the schema). */
function parseTimeout(value: string | number | null | undefined, fallbackMs: number): number {
  if (value == null) return fallbackMs;
  if (typeof value === 'number') return value;
  return value.endsWith('ms') ? Number(value.slice(0, -2)) : Number(value.slice(0, -1)) * 1000;
}

function where(source: SourceLocation): string {
  return `${source.file}:${source.line}`;
}

/** File, then line; issues without a location first. Stable, so equal keys keep discovery order. */
function bySource(a: PolicyIssue, b: PolicyIssue): number {
  if (!a.source || !b.source) return (a.source ? 1 : 0) - (b.source ? 1 : 0);
  if (a.source.file !== b.source.file) return a.source.file < b.source.file ? -1 : 1;
  return a.source.line - b.source.line;
}
