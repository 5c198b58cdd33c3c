/**
 * `policy explain METHOD PATH` (docs/policy-format.md): what the gateway does with a request before any
 * principal is involved — the path after normalization (or why it is refused), the route the most
 * specific match selects (file:line), and what that route asks for; or, with no route, what `default`
 * does. Uses the proxy's own normalizer and the compiled policy's own matcher: a view, not a re-implementation.
 */
import { decodeResourceId, resolverUrl } from '../authz/resource-url';
import { isIamPath } from '../http/prepare-request';
import { normalizeRequestTarget } from '../http/normalize-target';
import type { CompiledPolicy, CompiledRoute, DefaultAction, MethodRefusal, ResourceResolverConfig, RouteMatch } from '../policy/compiled-policy';
import { POLICY_METHODS } from '../policy/policy-schema';
import { describeResolverAnswer } from '../policy/resolver-answer';

/** Everything `policy explain` reports about one request. */
export interface RequestExplanation {
  method: string;
  /** The path as given. */
  target: string;
  /** The normalized path and query, or why the proxy refuses the target (400). */
  normalized: { ok: true; path: string; search: string } | { ok: false; reason: string };
  /** True for `/iam` and `/iam/...`: the gateway's own endpoints, never matched against policies. */
  iam: boolean;
  match: RouteMatch | null;
  /** The resolver of the matched route's resource type, if any. */
  resolver: ResourceResolverConfig | null;
  /** Routes that match the same path for other methods (why a method is "not declared"). */
  otherMethods: Array<{ method: string; route: CompiledRoute }>;
  /** Set when the method is refused rather than left to `default` (a weaker rule would decide it). */
  refusal: MethodRefusal | null;
  defaultAction: DefaultAction;
}

/** Explains `method` + `target` against `policy` as the proxy would see them. */
export function explainRequest(policy: CompiledPolicy, method: string, target: string, options: { allowPathParameters?: boolean } = {}): RequestExplanation {
  const upper = method.toUpperCase();
  const normalized = normalizeRequestTarget(target, { allowPathParameters: options.allowPathParameters ?? false, host: undefined });
  const base = { method: upper, target, normalized, iam: false, match: null, resolver: null, otherMethods: [], refusal: null, defaultAction: policy.defaultAction };
  if (!normalized.ok) return base;
  if (isIamPath(normalized.path)) return { ...base, iam: true };
  const match = policy.match(upper, normalized.path);
  const resource = match?.route.resource ?? null;
  const otherMethods: RequestExplanation['otherMethods'] = [];
  if (match === null) {
    for (const other of POLICY_METHODS) {
      if (other === '*' || other === upper) continue;
      const found = policy.match(other, normalized.path);
      if (found && found.route.methods[0] !== '*') otherMethods.push({ method: other, route: found.route });
    }
  }
  const refusal = match === null ? policy.refusal(upper, normalized.path) : null;
  return { ...base, match, resolver: resource ? (policy.resources[resource.type]?.resolver ?? null) : null, otherMethods, refusal };
}

/** The explanation as aligned `label  value` lines. */
export function formatExplanation(explanation: RequestExplanation): string[] {
  const lines: string[] = [];
  const add = (label: string, value: string): void => {
    lines.push(`${label.padEnd(11)} ${value}`);
  };
  add('request', `${explanation.method} ${explanation.target}`);
  const normalized = explanation.normalized;
  if (!normalized.ok) {
    add('normalized', `refused: ${normalized.reason}`);
    add('outcome', '400 IAM_BAD_REQUEST; no route is consulted');
    return lines;
  }
  add('normalized', `${normalized.path}${normalized.search}${normalized.path === explanation.target.split('?')[0] ? '' : ' (rewritten)'}`);
  if (explanation.iam) {
    add('route', 'none: /iam is served by the gateway itself (login, sessions, diagnostics); policies do not apply');
    return lines;
  }
  const match = explanation.match;
  if (match === null) {
    add('route', `none declares ${explanation.method} ${normalized.path}`);
    const byRoute = new Map<string, { route: CompiledRoute; methods: string[] }>();
    for (const { method, route } of explanation.otherMethods) {
      const entry = byRoute.get(route.id) ?? { route, methods: [] };
      entry.methods.push(method);
      byRoute.set(route.id, entry);
    }
    for (const { route, methods } of byRoute.values()) add('other', `${methods.join(',')} ${route.pattern} at ${route.id}`);
    const refusal = explanation.refusal;
    if (refusal) {
      const by = refusal.fallback ? `the broader route ${refusal.fallback.pattern} at ${refusal.fallback.id}` : `"default: ${explanation.defaultAction}"`;
      add('outcome', `deny: 403 IAM_ACCESS_DENIED, step ROUTE_NOT_DECLARED (${explanation.method} is not declared for ${refusal.declared[0].pattern}, and ${by} checks less)`);
      return lines;
    }
    add('default', describeDefault(explanation.defaultAction));
    return lines;
  }
  const route = match.route;
  const params = Object.entries(match.params).map(([name, value]) => `${name}=${value}`);
  const viaGet = explanation.method === 'HEAD' && route.methods[0] !== '*' && !route.methods.includes('HEAD') ? '  (HEAD is answered by the GET route)' : '';
  add('route', `${route.id}  ${route.methods.join(',')} ${route.pattern}${params.length > 0 ? `  (${params.join(', ')})` : ''}${viaGet}`);
  add('mode', route.mode === 'shadow' ? 'shadow: decided and logged, but a denial lets the request through' : 'enforce');
  if (route.public) {
    add('needs', 'nothing: public route, no token needed');
    return lines;
  }
  add('permission', route.permission ?? (route.profile === 'optional' ? 'none: any valid session passes (profile: optional)' : 'none: any valid session with a valid active profile passes'));
  const resource = route.resource;
  if (resource) {
    // The engine decodes the id once (docs/http-contract.md) before resolving and comparing it with scope refs.
    const id = decodeResourceId(match.params[resource.idParam] ?? '');
    add('resource', `${resource.type} ${JSON.stringify(id)} (from :${resource.idParam}), access ${resource.access}, resolve ${resource.resolve}`);
    const resolver = explanation.resolver;
    const url = resolver ? resolverUrl(resolver.url, match.params[resource.idParam] ?? '') : null;
    if (resolver && url === null) add('resolver', `none: ${JSON.stringify(id)} cannot be a resource id in a URL, requests answer 404 IAM_RESOURCE_NOT_FOUND`);
    else if (resolver) {
      add('resolver', `GET ${url}${url!.startsWith('/') ? ' on upstream.url' : ''} (timeout ${resolver.timeoutMs} ms; 404 → 404 IAM_RESOURCE_NOT_FOUND)`);
      add('scopes', describeAnswer(resolver, resource.type, id));
    }
    else if (resource.resolve === 'required') add('resolver', `none for ${resource.type}: requests answer 500 IAM_RESOURCE_RESOLUTION_UNAVAILABLE`);
    else add('resolver', `none for ${resource.type}: ${resource.type} ${id} is checked as its own scope`);
  }
  if (route.filter !== undefined) add('filter', describeFilter(route.filter));
  add('needs', describeNeeds(explanation, route));
  return lines;
}

/** A route's list filter in words: what of the host's answer a caller sees. */
export function describeFilter(filter: { type: string; id: string; items: string; access: string }): string {
  const list = filter.items === '' ? 'the answer (a JSON array)' : `the array at ${JSON.stringify(filter.items)}`;
  return `${list} keeps the elements whose ${JSON.stringify(filter.id)} is a ${filter.type} the caller's profile covers for ${filter.access}; a profile covering every ${filter.type} gets the answer untouched; an answer that cannot be filtered is 502 IAM_FILTER_FAILED`;
}

/** How the resolver's 200 answer becomes the resource's scopes, and what fails closed. */
function describeAnswer(resolver: ResourceResolverConfig, type: string, id: string): string {
  const answer = resolver.answer;
  if (answer === undefined) return 'read from the answer {"scopes": [{type, id}, …]} (none: the resource itself); another answer → 502';
  if (answer.kind === 'self') return `${type} ${id} itself, on any JSON 200 (self); an answer that is not JSON → 502`;
  return `${describeResolverAnswer(answer)} in the host's own answer (an array: one scope per element); a missing value, or one not a string or an integer → 502`;
}

function describeNeeds(explanation: RequestExplanation, route: CompiledRoute): string {
  if (route.permission === null) return 'a valid session (401 without one)';
  const steps = ['a valid session (401)', 'an active profile for the client type', `permission ${route.permission} (403 PERMISSION_DENIED)`];
  const resource = route.resource;
  if (resource) {
    const id = decodeResourceId(explanation.match?.params[resource.idParam] ?? '');
    const scoped = explanation.resolver ? `the scopes the resolver answers for ${resource.type} ${id}` : `${resource.type} ${id}`;
    steps.push(`a scope covering ${scoped} for ${resource.access} (403 SCOPE_DENIED; unscoped profiles pass)`);
  }
  return steps.join(', then ');
}

function describeDefault(action: DefaultAction): string {
  switch (action) {
    case 'allow':
      return 'allow: forwarded without any check';
    case 'authenticated':
      return 'authenticated: any valid session with a valid active profile passes (401 without one)';
    case 'deny':
    default:
      return 'deny: 403 IAM_ACCESS_DENIED, step ROUTE_NOT_DECLARED';
  }
}
