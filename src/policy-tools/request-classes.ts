/**
 * Request classes: stand-in requests that represent every request a route pattern matches, so a whole-table
 * question ("which route decides these requests, with or without that route?", "what decided them in the old table
 * and what decides them in the new one?") is answered by asking the real matcher a few times per pattern, never by
 * re-implementing matching. Used by `policy check` (lint) and `policy diff`.
 */
import type { CompiledRoute } from '../policy/compiled-policy';
import { parseRoutePattern, type PatternSegment } from '../policy/route-tree';

/** Methods that stand for "every method" (`methods: ["*"]`): the standard ones and one extension method. */
export const PROBE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND'];

/** The parsed segments of a route's pattern ([] for a pattern that does not parse: the loader reported it). */
export function segmentsOf(route: CompiledRoute): PatternSegment[] {
  let segments = SEGMENTS.get(route);
  if (segments === undefined) {
    const parsed = parseRoutePattern(route.pattern);
    segments = parsed.ok ? parsed.segments : [];
    SEGMENTS.set(route, segments);
  }
  return segments;
}

/** Parsed once per route: a diff asks for each route's segments several times. */
const SEGMENTS = new WeakMap<CompiledRoute, PatternSegment[]>();

/**
 * Request paths standing for every path the pattern matches: a fresh value (a control character no static segment
 * can contain) per parameter, and for `**` zero up to one more segment than `maxDepth`. If a route is selected for
 * some real path it is selected for the stand-in of the same length: any route beating it on the stand-in uses
 * parameters there, so it would match the real path too.
 */
export function standInPaths(segments: readonly PatternSegment[], maxDepth: number): string[] {
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

/** The methods a route is probed with: its own (`GET` also covers `HEAD`), or {@link PROBE_METHODS} for `*`. */
export function probeMethods(route: CompiledRoute): string[] {
  if (route.methods[0] === '*') return PROBE_METHODS;
  const methods = route.methods.filter((method) => method !== 'CONNECT');
  if (methods.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD');
  return methods;
}
