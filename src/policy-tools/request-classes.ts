/**
 * Request classes: stand-in requests that represent every request a route pattern matches, so a whole-table
 * question ("which route decides these requests, with or without that route?", "what decided them in the old table
 * and what decides them in the new one?") is answered by asking the real matcher a few times per pattern, never by
 * re-implementing matching. Used by `policy check` (lint) and `policy diff`.
 */
import type { CompiledRoute } from '../policy/compiled-policy';
import { foldAsciiCase } from '../policy/route-strictness';
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
  return spelledRequests(segments, maxDepth, null).map((request) => request.path);
}

/** One stand-in request of a pattern, as {@link spelledRequests} spells it. */
export interface SpelledRequest {
  path: string;
  /** The request as a client would write it (parameters as `:name`, extra segments as `*`); null for the pattern's own spelling. */
  example: string | null;
}

/**
 * The pattern's stand-ins ({@link standInPaths}: `example` null), and, given the static segments of the tables compared,
 * the requests one table may decide unlike the other although the stand-ins agree: each parameter also holding every
 * static segment either table has at that place (another route, or a refusal of another route's methods, takes it
 * there), and, when the tables fold case differently, each static segment also as every table spells it there plus one
 * spelling none does (the case-sensitive table sees a fresh value, the other its route): `/api/:area/users` as
 * `/api/ADMIN/users`, one table's `/api/admin/**` against the other's `:area` route. The product of the choices per
 * segment, so a request mixing two routes' segments is one of them.
 */
export function spelledRequests(segments: readonly PatternSegment[], maxDepth: number, spellings: SegmentSpellings | null): SpelledRequest[] {
  // Per segment, the values it is probed with (the pattern's own first) and how each is shown in an example.
  const values: string[][] = [];
  const shown: string[][] = [];
  let wildcard = false;
  let places: SpellingNode[] = spellings ? [spellings.root] : [];
  for (let index = 0; index < segments.length; index++) {
    const segment = segments[index]!;
    if (segment.kind === 'wildcard') {
      wildcard = true;
      break;
    }
    const next: SpellingNode[] = [];
    if (segment.kind === 'static') {
      let options = [segment.value];
      if (places.length > 0) {
        const key = foldAsciiCase(segment.value);
        const written = [segment.value];
        for (const place of places) {
          const entry = place.statics.get(key);
          if (entry) {
            written.push(...entry.spellings);
            next.push(entry.node);
          }
          if (place.param) next.push(place.param);
        }
        if (spellings!.otherCases) options = spellingsOf(key, written);
      }
      values.push(options);
      shown.push(options);
    } else {
      const probed = [`\u0001${index}`];
      const named = [`:${segment.name}`];
      const labels = new Map<string, string[]>();
      for (const place of places) {
        for (const [key, entry] of place.statics) {
          labels.set(key, [...(labels.get(key) ?? []), ...entry.spellings]);
          next.push(entry.node);
        }
        if (place.param) next.push(place.param);
      }
      for (const [key, written] of labels) for (const value of spellings!.otherCases ? spellingsOf(key, written) : distinct(written)) probed.push(value);
      values.push(probed);
      shown.push([...named, ...probed.slice(1)]);
    }
    places = next.length > 1 ? distinct(next) : next;
  }
  const tails = wildcard ? Array.from({ length: Math.max(0, maxDepth + 2 - values.length) }, (_unused, extra) => extra) : [0];
  const requests: SpelledRequest[] = [];
  const at = values.map(() => 0);
  for (const extra of tails) {
    const tail = Array.from({ length: extra }, (_unused, i) => `\u0002${i}`);
    at.fill(0);
    // Every combination of the segments' values, the pattern's own (all first values) first.
    for (;;) {
      const own = at.every((choice) => choice === 0);
      const path = `/${[...values.map((options, i) => options[at[i]!]!), ...tail].join('/')}`;
      requests.push({ path, example: own ? null : `/${[...shown.map((options, i) => options[at[i]!]!), ...tail.map(() => '*')].join('/')}` });
      let i = at.length - 1;
      while (i >= 0 && ++at[i]! === values[i]!.length) at[i--] = 0;
      if (i < 0) break;
    }
  }
  return requests;
}

const distinct = <T>(items: readonly T[]): T[] => [...new Set(items)];

/** A place in the tables' patterns (folded), with the spellings of the static segments found there. */
interface SpellingNode {
  statics: Map<string, { spellings: Set<string>; node: SpellingNode }>;
  param: SpellingNode | null;
}

/** Every static segment's spellings, per place, of the patterns of the tables a diff compares. */
export interface SegmentSpellings {
  root: SpellingNode;
  /** The tables fold case differently: other spellings of each static segment are probed too. */
  otherCases: boolean;
}

/** Indexes the static segments of `routes` (of both tables) by where they stand, for {@link spelledRequests}. */
export function segmentSpellings(routes: readonly CompiledRoute[], otherCases: boolean): SegmentSpellings {
  const root: SpellingNode = { statics: new Map(), param: null };
  for (const route of routes) {
    let node = root;
    for (const segment of segmentsOf(route)) {
      if (segment.kind === 'wildcard') break;
      if (segment.kind === 'param') node = node.param ??= { statics: new Map(), param: null };
      else {
        const key = foldAsciiCase(segment.value);
        let entry = node.statics.get(key);
        if (!entry) node.statics.set(key, (entry = { spellings: new Set(), node: { statics: new Map(), param: null } }));
        entry.spellings.add(segment.value);
        node = entry.node;
      }
    }
  }
  return { root, otherCases };
}

/**
 * The written spellings of a folded segment (first one first, no repeats), then one that none of them is, when the
 * segment has letters to spell differently: to a case-sensitive table that one is a fresh value.
 */
function spellingsOf(key: string, written: readonly string[]): string[] {
  const known = [...new Set(written)];
  const upper = key.replace(/[a-z]/g, (letter) => letter.toUpperCase());
  const candidates = [upper, key, ...[...key].map((_char, i) => key.slice(0, i) + upper[i] + key.slice(i + 1))];
  const other = candidates.find((candidate) => !known.includes(candidate));
  return other === undefined ? known : [...known, other];
}

/**
 * One method per way the matcher can treat a method, over the routes of the tables compared: each method a route names,
 * `HEAD` when a route names `GET` (which answers it), and one method no route names, standing for all of them (they
 * reach the same `*` routes, the same refusals and the same `default`).
 */
export function methodClasses(routes: readonly CompiledRoute[]): string[] {
  const named = new Set(routes.flatMap((route) => route.methods));
  if (named.has('GET')) named.add('HEAD');
  const unnamed = PROBE_METHODS.find((method) => !named.has(method));
  return [...PROBE_METHODS.filter((method) => named.has(method)), ...(unnamed === undefined ? [] : [unnamed])];
}

/** The methods a route is probed with: its own (`GET` also covers `HEAD`), or {@link PROBE_METHODS} for `*`. */
export function probeMethods(route: CompiledRoute): string[] {
  if (route.methods[0] === '*') return PROBE_METHODS;
  const methods = route.methods.filter((method) => method !== 'CONNECT');
  if (methods.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD');
  return methods;
}
