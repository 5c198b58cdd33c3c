import type { CompiledRoute, SourceLocation } from './compiled-policy';
import type { PatternSegment } from './route-pattern';
import { foldAsciiCase } from './route-strictness';
import { RouteTree, type RouteTreeOptions } from './route-tree';

/** A leaf route with what conflict detection and the tree need. */
export interface Leaf {
  route: CompiledRoute;
  segments: PatternSegment[];
  /** `static/:/**` shape, static segments as written: two routes with the same shape match the same paths. */
  shape: string;
  /** Comparable outcome: public, permission, resource (id by param position), mode, profile, audience. */
  outcome: string;
}

type Report = (kind: string, message: string, source: SourceLocation | null, related?: SourceLocation) => void;

/**
 * Builds the route tree of `leaves` (in order) and reports, across all files: `conflict` (error) for two
 * routes of the same shape and an overlapping method with different outcomes, `duplicate` (warning) for the
 * same outcome, and — unless matching is case-sensitive — `case-duplicate` (error) for two routes whose
 * shapes differ only in case (#11.5): a case-insensitive host serves both with one handler, so which rule
 * applies must not be a guess.
 */
export function buildRouteTree(leaves: readonly Leaf[], options: RouteTreeOptions, report: { error: Report; warn: Report }): RouteTree {
  const tree = new RouteTree(options);
  const byShape = new Map<string, Leaf[]>();
  for (const leaf of leaves) {
    const key = options.caseSensitive ? leaf.shape : foldAsciiCase(leaf.shape);
    const sameShape = byShape.get(key) ?? [];
    for (const other of sameShape) {
      if (other.shape !== leaf.shape) {
        const text = `routes ${other.route.pattern} at ${other.route.id} and ${leaf.route.pattern} at ${leaf.route.id} differ only in case`;
        report.error('case-duplicate', `${text}; static segments match case-insensitively (set "match: { case-sensitive: true }" if the host routes by exact case)`, leaf.route.source, other.route.source);
        continue;
      }
      const methods = overlap(other.route.methods, leaf.route.methods);
      if (methods.length === 0) continue;
      const text = `${methods.join(',')} ${other.route.pattern} at ${other.route.id} and ${leaf.route.id}`;
      if (other.outcome !== leaf.outcome) report.error('conflict', `conflicting routes ${text}`, leaf.route.source, other.route.source);
      else report.warn('duplicate', `duplicate routes ${text} (same outcome; ${other.route.id} is used)`, leaf.route.source, other.route.source);
    }
    sameShape.push(leaf);
    byShape.set(key, sameShape);
    tree.insert(leaf.route, leaf.segments);
  }
  return tree;
}

/** Methods matched by both lists: `*` overlaps every method; `GET` and `HEAD` do not overlap. */
function overlap(a: readonly string[], b: readonly string[]): string[] {
  if (a[0] === '*') return [...b];
  if (b[0] === '*') return [...a];
  return a.filter((method) => b.includes(method));
}
