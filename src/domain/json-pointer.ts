/**
 * JSON Pointers (RFC 6901) as a policy writes them — a list `filter`'s `id` and `items`, a resolver's `scopes` ids:
 * `""` is the whole value, `/data` a member, `/0` an array element; `~1` stands for `/` and `~0` for `~` inside a
 * token. And the one rule for reading an id out of a host's JSON answer ({@link jsonIdOf}).
 */

/** A pointer's syntax (RFC 6901 §3): empty, or `/`-prefixed tokens where `~` is only ever `~0` or `~1`. */
export const JSON_POINTER_PATTERN = '^(?:/(?:[^~/]|~[01])*)*$';
const POINTER = new RegExp(JSON_POINTER_PATTERN);

/** The reference tokens of a pointer (`/a~1b/0` → `['a/b', '0']`), or null when it is not a pointer. */
export function parseJsonPointer(pointer: string): string[] | null {
  if (!POINTER.test(pointer)) return null;
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** An array index token (RFC 6901 §4): digits without a leading zero; `-` names no element. */
const INDEX = /^(?:0|[1-9][0-9]*)$/;

/**
 * The value `tokens` point at in a parsed JSON value, or `undefined` when nothing is there. Only the value's own
 * members count (never a prototype's), and an array is indexed by position only.
 */
export function resolveJsonPointer(value: unknown, tokens: readonly string[]): unknown {
  let current: unknown = value;
  for (const token of tokens) {
    if (Array.isArray(current)) {
      if (!INDEX.test(token)) return undefined;
      const index = Number(token);
      if (index >= current.length) return undefined;
      current = current[index];
    } else if (current !== null && typeof current === 'object') {
      if (!Object.hasOwn(current, token)) return undefined;
      current = (current as Record<string, unknown>)[token];
    } else return undefined;
  }
  return current;
}

/**
 * An id read from a host's JSON answer: a string as it is, an integer as its decimal string (`1` and `"1"` name the
 * same resource). Null for anything else — and for an integer JSON cannot carry exactly (beyond ±(2^53 − 1) two ids
 * would read as one) or `-0` — so whoever reads it fails closed.
 */
export function jsonIdOf(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && !Object.is(value, -0)) return String(value);
  return null;
}
