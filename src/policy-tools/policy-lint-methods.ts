import type { CompiledPolicy, CompiledRoute, PolicyIssue } from '../policy/compiled-policy';
import { parseRoutePattern } from '../policy/route-pattern';
import { PROBE_METHODS } from './request-classes';


/**
 * `refused-method` (warning, #11.30): methods that a route pattern does not list and that a broader route
 * would have decided, were it not weaker than the pattern's routes — they are refused (403
 * `ROUTE_NOT_DECLARED`). Not an error: refusing is the safe reading of such a policy; the warning says where
 * to list a method if the host serves it. One warning per pattern; refusals in favour of `default` are not
 * reported, nor those in favour of a site-wide `/**` (undeclared methods falling to `default` is what it is for).
 */
export function refusedMethods(policy: CompiledPolicy): PolicyIssue[] {
  const issues: PolicyIssue[] = [];
  const seen = new Set<string>();
  for (const route of policy.routes) {
    const path = standIn(route);
    if (path === null || seen.has(path)) continue;
    seen.add(path);
    const refused = new Map<string, { broader: CompiledRoute; methods: string[] }>();
    for (const method of PROBE_METHODS) {
      const refusal = policy.refusal(method, path);
      // A site-wide `/**` plays the part of `default` (as for `shadowed`): not reported either.
      if (refusal?.fallback == null || refusal.fallback.pattern === '/**' || !refusal.declared.includes(route)) continue;
      const entry = refused.get(refusal.fallback.id) ?? { broader: refusal.fallback, methods: [] };
      entry.methods.push(method === 'PROPFIND' ? 'other methods' : method);
      refused.set(refusal.fallback.id, entry);
    }
    for (const { broader, methods } of refused.values()) {
      issues.push({
        severity: 'warning',
        kind: 'refused-method',
        message: `${methods.join(', ')} of ${route.pattern} are refused (403 ROUTE_NOT_DECLARED): no route of that path lists them, and ${broader.pattern} (${broader.id}) checks less; list them on a route of ${route.pattern} if the host serves them`,
        source: route.source,
        related: broader.source,
      });
    }
  }
  return issues;
}

/** A request path only `route`'s pattern (and broader ones) match: parameters become a control character. */
function standIn(route: CompiledRoute): string | null {
  const parsed = parseRoutePattern(route.pattern);
  if (!parsed.ok) return null;
  const parts = parsed.segments.filter((segment) => segment.kind !== 'wildcard').map((segment, index) => (segment.kind === 'static' ? segment.value : `\u0001${index}`));
  return `/${parts.join('/')}`;
}
