/** One segment of a route pattern. */
export type PatternSegment =
  | { kind: 'static'; value: string }
  | { kind: 'param'; name: string }
  | { kind: 'wildcard' };

/** A parsed route pattern, or why it is not one. */
export type ParsedPattern =
  | { ok: true; /** The pattern without its trailing `/`. */ pattern: string; segments: PatternSegment[] }
  | { ok: false; error: string };

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses a full route pattern (docs/policy-format.md): static segments, `:param` (one segment), `**` (the rest of
 * the path, zero or more segments, last only). A trailing `/` is ignored; empty segments are refused.
 */
export function parseRoutePattern(pattern: string): ParsedPattern {
  if (!pattern.startsWith('/')) return { ok: false, error: `path "${pattern}" must start with "/"` };
  const trimmed = pattern.length > 1 && pattern.endsWith('/') ? pattern.slice(0, -1) : pattern;
  if (trimmed === '/') return { ok: true, pattern: '/', segments: [] };
  const parts = trimmed.slice(1).split('/');
  const segments: PatternSegment[] = [];
  const names = new Set<string>();
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    const fail = (why: string): ParsedPattern => ({ ok: false, error: `path "${pattern}": ${why}` });
    if (part === '') return fail('empty segment ("//")');
    if (part === '**') {
      if (i !== parts.length - 1) return fail('"**" is only allowed as the last segment');
      segments.push({ kind: 'wildcard' });
    } else if (part.startsWith(':')) {
      const name = part.slice(1);
      // `__proto__` could not be returned as an own property of the params object.
      if (!PARAM_NAME.test(name) || name === '__proto__') return fail(`invalid parameter name "${part}" (expected :[A-Za-z_][A-Za-z0-9_]*)`);
      if (names.has(name)) return fail(`parameter ":${name}" appears twice`);
      names.add(name);
      segments.push({ kind: 'param', name });
    } else {
      if (part.includes('*')) return fail(`"*" is only allowed as a whole "**" segment ("${part}")`);
      // Request paths are normalized before matching (docs/http-contract.md): dot segments never reach the matcher.
      if (part === '.' || part === '..') return fail(`dot segment "${part}" can never match a normalized path`);
      // eslint-disable-next-line no-control-regex -- refusing control characters is the point
      if (/[?#\s\u0000-\u001f\u007f]/.test(part)) return fail(`segment "${part}" contains "?", "#", a space or a control character`);
      segments.push({ kind: 'static', value: part });
    }
  }
  return { ok: true, pattern: trimmed, segments };
}
