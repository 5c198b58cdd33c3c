/**
 * `iam-gateway policy diff OLD_DIR NEW_DIR` (docs/policy-changes.md): what a policy change does to the decisions,
 * computed from the two compiled route tables, not from the text. Every request class derived from both tables (each
 * route pattern's stand-ins and their spellings, in every method class, plus paths no route takes at every depth;
 * request-classes.ts) is matched in both tables with the real matcher; what decides it in each — a route, a method
 * refusal, or `default` — is reduced to the checks it makes, and the two are compared. Whatever decides a request
 * (every route key, `default`, `match.case-sensitive`, the resolvers and how their answers are read) reaches the comparison that way or through the
 * resolver changes; a property test holds "no change" to `policy explain`. So moving a route between files, reordering
 * or reformatting is no change, and a route that now falls through to a broader route is judged by what that route
 * checks.
 *
 * Each change is `wider` (someone may get in who could not), `narrower` (someone who could get in may not) or
 * `neutral` (the decision inputs changed, but nobody gains or loses). Where a change both widens and narrows (a
 * permission code replaced by another), it is `wider`: the holders of the new code gain.
 */
import type { CompiledPolicy, CompiledRoute, ResourceResolverConfig } from '../policy/compiled-policy';
import { describeResolverAnswer, sameResolution } from '../policy/resolver-answer';
import { methodClasses, segmentSpellings, segmentsOf, spelledRequests, type SpelledRequest } from './request-classes';

export type Classification = 'wider' | 'narrower' | 'neutral';

/** What decides a request class in one table, reduced to what it checks. */
export type Check =
  | { kind: 'open'; why: 'public' | 'default allow' }
  | { kind: 'shadow'; permission: string | null }
  | { kind: 'session'; profile: 'required' | 'optional' }
  | { kind: 'permission'; permission: string; profile: 'required' | 'optional'; resource: CheckedResource | null; filter: CheckedFilter | null }
  | { kind: 'deny'; why: 'default deny' | 'method refused' };

/** A route's resource as a decision sees it: which path segment holds the id (not the parameter's name). */
export interface CheckedResource {
  type: string;
  /** Index of the id's segment in the pattern. */
  segment: number;
  access: 'READ' | 'WRITE';
  resolve: 'optional' | 'required';
}

/** A route's list filter (policy `filter`): which elements of the host's answer a caller sees. */
export interface CheckedFilter {
  type: string;
  access: 'READ' | 'WRITE';
  /** The pointers as written: another pointer reads another member (another list, another id). */
  id: string;
  items: string;
}

/** One side of a change: the deciding route (or `default`) and its checks. */
export interface DiffSide {
  /** The route's pattern, `(default)` or `(refused)`. */
  decidedBy: string;
  /** `file:line` of the route, null for default. */
  source: string | null;
  check: Check;
}

export interface PolicyChange {
  method: string;
  /** The pattern the request class stands for (the new table's when it has it), or `(no route)` for undeclared requests. */
  pattern: string;
  change: 'added' | 'removed' | 'changed';
  classification: Classification;
  /** What differs, in words (`permission project:read → project:export`, `scope check dropped`). */
  differences: string[];
  /**
   * A request of this class that the change decides differently, as a client would write it, when the pattern alone
   * does not show it (another case of a static segment, a parameter holding another route's segment); else null.
   */
  example: string | null;
  old: DiffSide;
  new: DiffSide;
}

/** A change of the `resources` section (a resolver added, removed or pointed elsewhere). */
export interface ResourceChange {
  type: string;
  classification: Classification;
  difference: string;
}

export interface PolicyDiff {
  changes: PolicyChange[];
  resources: ResourceChange[];
  /** True when any change is `wider`. */
  wider: boolean;
}

const UNDECLARED_SEGMENT = '\u0003undeclared';
const UNDECLARED = '(no route)';

/** Compares what two compiled policies decide (see the module comment). */
export function diffPolicies(before: CompiledPolicy, after: CompiledPolicy): PolicyDiff {
  const routes = [...before.routes, ...after.routes];
  const maxDepth = Math.max(0, ...routes.map((route) => segmentsOf(route).length));
  // A parameter holding another route's static segment can meet a route (or a refusal) its fresh stand-in does not; where
  // the tables fold case differently, one spelling of a path can reach a route in one table and another in the other.
  const spellings = segmentSpellings(routes, before.caseSensitive !== after.caseSensitive);
  const methods = methodClasses(routes);
  // Request paths, each probed with every method class: another method at a route's path falls to a broader route,
  // `default` or a refusal. A case-sensitive table may hold two routes whose patterns differ only in case: each keeps
  // its paths. Where both tables have a pattern, its paths are spelled once and stand for the new table's route.
  const paths = new Map<string, PathClass>();
  const spelled = new Map<string, SpelledRequest[]>();
  routes.forEach((route, index) => {
    let requests = spelled.get(route.pattern);
    if (requests === undefined) spelled.set(route.pattern, (requests = spelledRequests(segmentsOf(route), maxDepth, spellings)));
    let standIn = '';
    for (const { path, example } of requests) {
      if (example === null) standIn = path;
      // A path is the new table's pattern's where it has one, and a pattern's own stand-in before another's spelling.
      const rank = (index >= before.routes.length ? 2 : 0) + (example === null ? 1 : 0);
      const known = paths.get(path);
      if (known === undefined || rank > known.rank) paths.set(path, { standIn, pattern: route.pattern, example, rank });
    }
  });
  // What no route takes, at every depth: a `/:id` route takes the one-segment stand-in, not `/a/b`.
  for (let depth = 1; depth <= maxDepth + 1; depth++) {
    const path = `/${Array.from({ length: depth }, () => UNDECLARED_SEGMENT).join('/')}`;
    paths.set(path, { standIn: path, pattern: UNDECLARED, example: depth === 1 ? null : `/${Array.from({ length: depth }, () => '*').join('/')}`, rank: 0 });
  }
  const classes = [...paths].flatMap(([path, { standIn, pattern, example }]) =>
    methods.map((method): RequestClass => ({ method, path, standIn, pattern, example: example === null ? null : `${method} ${example}` })),
  );

  // One entry per (method, pattern): the widest of its classes' changes.
  const byPattern = new Map<string, PolicyChange>();
  for (const requestClass of classes) {
    const old = decide(before, requestClass.method, requestClass.path);
    const now = decide(after, requestClass.method, requestClass.path);
    const { classification, differences } = compareChecks(old.check, now.check);
    if (differences.length === 0) continue;
    // A route's change shows in its own class; `(no route)` is about `default` and refusals.
    if (requestClass.pattern === UNDECLARED && old.source !== null && now.source !== null) continue;
    // Added or removed is the pattern's own stand-in's story, whichever spelling changed.
    const own = { ...requestClass, path: requestClass.standIn };
    const change: PolicyChange = {
      method: requestClass.method,
      pattern: requestClass.pattern,
      change: ownRoute(after, own) && !ownRoute(before, own) ? 'added' : ownRoute(before, own) && !ownRoute(after, own) ? 'removed' : 'changed',
      classification,
      differences,
      example: requestClass.example,
      old,
      new: now,
    };
    const key = `${change.method} ${change.pattern}`;
    const seen = byPattern.get(key);
    if (!seen || RANK[classification] > RANK[seen.classification]) byPattern.set(key, change);
  }
  const changes = [...byPattern.values()].sort((a, b) => (a.pattern === b.pattern ? a.method.localeCompare(b.method) : a.pattern.localeCompare(b.pattern)));
  const resources = diffResources(before.resources, after.resources);
  return { changes, resources, wider: changes.some((change) => change.classification === 'wider') || resources.some((change) => change.classification === 'wider') };
}

/** A request path of a diff, the pattern it stands for (the new table's where both have it), and its spelling. */
interface PathClass {
  /** The pattern's own stand-in of the same shape (equal to the path unless this is another spelling). */
  standIn: string;
  pattern: string;
  /** The path as a client would write it, when it is not the pattern's own stand-in. */
  example: string | null;
  rank: number;
}

/** A request path probed with one method. */
interface RequestClass {
  method: string;
  path: string;
  /** The pattern's own stand-in of the same shape (equal to `path` unless this is another spelling). */
  standIn: string;
  pattern: string;
  example: string | null;
}

const RANK: Record<Classification, number> = { neutral: 0, narrower: 1, wider: 2 };

/** Whether a route of `policy` with the class's own pattern decides it (the class is that route's, not a fallback's). */
function ownRoute(policy: CompiledPolicy, requestClass: { method: string; path: string; pattern: string }): boolean {
  const match = policy.match(requestClass.method, requestClass.path);
  return match !== null && shapeOf(match.route.pattern) === shapeOf(requestClass.pattern);
}

function shapeOf(pattern: string): string {
  return pattern.replace(/:[^/]+/g, ':').toLowerCase();
}

/** What decides one request in a table, and what it checks. */
export function decide(policy: CompiledPolicy, method: string, path: string): DiffSide {
  const match = policy.match(method, path);
  if (match) return { decidedBy: match.route.pattern, source: match.route.id, check: checkOf(match.route) };
  if (policy.refusal(method, path)) return { decidedBy: '(refused)', source: null, check: { kind: 'deny', why: 'method refused' } };
  const action = policy.defaultAction;
  const check: Check = action === 'allow' ? { kind: 'open', why: 'default allow' } : action === 'authenticated' ? { kind: 'session', profile: 'required' } : { kind: 'deny', why: 'default deny' };
  return { decidedBy: '(default)', source: null, check };
}

/** A route reduced to what it checks. */
export function checkOf(route: CompiledRoute): Check {
  if (route.public) return { kind: 'open', why: 'public' };
  if (route.mode === 'shadow') return { kind: 'shadow', permission: route.permission };
  const profile = route.profile === 'optional' ? 'optional' : 'required';
  if (route.permission === null) return { kind: 'session', profile };
  const resource = route.resource;
  const filter = route.filter;
  return {
    kind: 'permission',
    permission: route.permission,
    profile,
    filter: filter === undefined ? null : { type: filter.type, access: filter.access, id: filter.id, items: filter.items },
    resource:
      resource === null
        ? null
        : { type: resource.type, segment: segmentsOf(route).findIndex((segment) => segment.kind === 'param' && segment.name === resource.idParam), access: resource.access, resolve: resource.resolve },
  };
}

/** Who gets past each kind of check, from nobody (0) to anybody (4). */
const OPENNESS: Record<Check['kind'], number> = { deny: 0, permission: 1, session: 2, shadow: 3, open: 4 };

/** How `now` differs from `old`, and which way (see the module comment). */
export function compareChecks(old: Check, now: Check): { classification: Classification; differences: string[] } {
  if (old.kind !== now.kind) {
    const differences = [`${describeCheck(old)} → ${describeCheck(now)}`];
    const way = OPENNESS[now.kind] - OPENNESS[old.kind];
    // Two kinds that let everybody through (public, default allow, shadow mode): nobody gains or loses.
    if (OPENNESS[old.kind] >= 3 && OPENNESS[now.kind] >= 3) return { classification: 'neutral', differences };
    return { classification: way > 0 ? 'wider' : 'narrower', differences };
  }
  const found: Array<{ difference: string; classification: Classification }> = [];
  if (old.kind === 'session' && now.kind === 'session') compareProfile(old.profile, now.profile, found);
  if (old.kind === 'shadow' && now.kind === 'shadow' && old.permission !== now.permission) {
    found.push({ difference: `shadowed permission ${old.permission ?? '(none)'} → ${now.permission ?? '(none)'}`, classification: 'neutral' });
  }
  if (old.kind === 'deny' && now.kind === 'deny' && old.why !== now.why) found.push({ difference: `${old.why} → ${now.why}`, classification: 'neutral' });
  if (old.kind === 'open' && now.kind === 'open' && old.why !== now.why) found.push({ difference: `${old.why} → ${now.why}`, classification: 'neutral' });
  if (old.kind === 'permission' && now.kind === 'permission') {
    if (old.permission !== now.permission) found.push({ difference: `permission ${old.permission} → ${now.permission}`, classification: 'wider' });
    compareProfile(old.profile, now.profile, found);
    compareResource(old.resource, now.resource, found);
    compareFilter(old.filter, now.filter, found);
  }
  if (found.length === 0) return { classification: 'neutral', differences: [] };
  const classification = found.reduce<Classification>((widest, entry) => (RANK[entry.classification] > RANK[widest] ? entry.classification : widest), 'neutral');
  return { classification, differences: found.map((entry) => entry.difference) };
}

function compareProfile(old: 'required' | 'optional', now: 'required' | 'optional', found: Array<{ difference: string; classification: Classification }>): void {
  if (old === now) return;
  found.push({ difference: `active profile ${old} → ${now}`, classification: now === 'optional' ? 'wider' : 'narrower' });
}

function compareResource(old: CheckedResource | null, now: CheckedResource | null, found: Array<{ difference: string; classification: Classification }>): void {
  if (old === null && now === null) return;
  if (old === null) {
    found.push({ difference: `scope check added (${describeResource(now!)})`, classification: 'narrower' });
    return;
  }
  if (now === null) {
    found.push({ difference: `scope check dropped (was ${describeResource(old)})`, classification: 'wider' });
    return;
  }
  // Another type, or the id taken from another segment: other resources' scopes decide (someone may get in).
  if (old.type !== now.type || old.segment !== now.segment) {
    found.push({ difference: `resource ${describeResource(old)} → ${describeResource(now)}`, classification: 'wider' });
    return;
  }
  if (old.access !== now.access) found.push({ difference: `access ${old.access} → ${now.access}`, classification: now.access === 'READ' ? 'wider' : 'narrower' });
  if (old.resolve !== now.resolve) found.push({ difference: `resolve ${old.resolve} → ${now.resolve}`, classification: now.resolve === 'optional' ? 'wider' : 'narrower' });
}

function compareFilter(old: CheckedFilter | null, now: CheckedFilter | null, found: Array<{ difference: string; classification: Classification }>): void {
  if (old === null && now === null) return;
  if (old === null) {
    found.push({ difference: `list filter added (${describeFilter(now!)})`, classification: 'narrower' });
    return;
  }
  if (now === null) {
    found.push({ difference: `list filter dropped (was ${describeFilter(old)})`, classification: 'wider' });
    return;
  }
  // Another type or another pointer: other scopes, or other members, decide which elements are seen.
  if (old.type !== now.type || old.id !== now.id || old.items !== now.items) {
    found.push({ difference: `list filter ${describeFilter(old)} → ${describeFilter(now)}`, classification: 'wider' });
    return;
  }
  if (old.access !== now.access) found.push({ difference: `list filter access ${old.access} → ${now.access}`, classification: now.access === 'READ' ? 'wider' : 'narrower' });
}

function describeFilter(filter: CheckedFilter): string {
  return `${filter.type} ${filter.access} by ${filter.id === '' ? '(the element)' : filter.id}${filter.items === '' ? '' : ` in ${filter.items}`}`;
}

function describeResource(resource: CheckedResource): string {
  return `${resource.type} ${resource.access}${resource.resolve === 'required' ? ', resolve required' : ''}`;
}

/** A check in words, as the report shows it. */
export function describeCheck(check: Check): string {
  switch (check.kind) {
    case 'open':
      return check.why;
    case 'shadow':
      return `shadow mode${check.permission ? ` (${check.permission} not enforced)` : ''}`;
    case 'session':
      return check.profile === 'optional' ? 'any session' : 'any session with an active profile';
    case 'permission':
      return `${check.permission}${check.resource ? ` on ${describeResource(check.resource)}` : ''}${check.filter ? `, list filtered to ${describeFilter(check.filter)}` : ''}${check.profile === 'optional' ? ', profile optional' : ''}`;
    case 'deny':
      return check.why;
  }
}

/**
 * Resolver changes: which scopes a resource's id stands for — another URL, or its answer read another way (`self`,
 * `scopes` pointers, the `{scopes}` document) — (someone may get in: wider), or only its timeout (neutral).
 */
function diffResources(before: CompiledPolicy['resources'], after: CompiledPolicy['resources']): ResourceChange[] {
  const changes: ResourceChange[] = [];
  const url = (resolver: ResourceResolverConfig | null): string | null => resolver?.url ?? null;
  const shown = (resolver: ResourceResolverConfig): string => (resolver.answer === undefined ? resolver.url : `${resolver.url}, ${describeResolverAnswer(resolver.answer)}`);
  for (const type of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) {
    const old = before[type]?.resolver ?? null;
    const now = after[type]?.resolver ?? null;
    if (url(old) !== url(now)) {
      const difference = old === null ? `resolver added (${shown(now!)})` : now === null ? `resolver removed (was ${shown(old)})` : `resolver ${shown(old)} → ${shown(now)}`;
      changes.push({ type, classification: 'wider', difference });
    } else if (old !== null && now !== null && !sameResolution(old, now)) {
      changes.push({ type, classification: 'wider', difference: `resolver answer read as ${describeResolverAnswer(old.answer)} → ${describeResolverAnswer(now.answer)}` });
    } else if (old !== null && now !== null && old.timeoutMs !== now.timeoutMs) {
      changes.push({ type, classification: 'neutral', difference: `resolver timeout ${old.timeoutMs} ms → ${now.timeoutMs} ms` });
    }
  }
  return changes;
}

/** The report as text lines (one per change, then a summary); `label` shows a `file:line` as the user named the directory. */
export function formatPolicyDiff(diff: PolicyDiff, labels: { old: (id: string) => string; new: (id: string) => string }): string[] {
  const side = (value: DiffSide, label: (id: string) => string): string => `${value.decidedBy}${value.source ? ` (${label(value.source)})` : ''}: ${describeCheck(value.check)}`;
  const lines = diff.changes.map(
    (change) =>
      `${change.classification.padEnd(8)} ${change.method} ${change.pattern} ${change.change}: ${change.differences.join('; ')}${change.example ? ` (e.g. ${change.example})` : ''}\n         was ${side(change.old, labels.old)}\n         now ${side(change.new, labels.new)}`,
  );
  for (const change of diff.resources) lines.push(`${change.classification.padEnd(8)} resource ${change.type}: ${change.difference}`);
  const count = (classification: Classification): number =>
    diff.changes.filter((change) => change.classification === classification).length + diff.resources.filter((change) => change.classification === classification).length;
  lines.push(diff.changes.length + diff.resources.length === 0 ? 'no change in what the policy decides' : `${count('wider')} wider, ${count('narrower')} narrower, ${count('neutral')} neutral`);
  return lines;
}
