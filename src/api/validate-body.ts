import Ajv2020, { type Options, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { problems } from '../domain/problem';
import { pointerErrors } from '../domain/schema-errors';

/**
 * One ajv instance for /iam request bodies (the schemas of src/api/schemas/requests.ts): JSON Schema 2020-12,
 * the OpenAPI 3.1 dialect; all errors, no coercion, unknown properties rejected by the schemas.
 */
export function createBodyValidator(options: Pick<Options, 'useDefaults'> = {}): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, strict: true, ...options });
  addFormats(ajv);
  return ajv;
}

/** Throws 400 IAM_VALIDATION_FAILED naming every failing JSON pointer (docs/http-contract.md). */
export function assertValid<T>(validate: ValidateFunction<T>, body: unknown): T {
  if (validate(body)) return body;
  throw problems.validation(pointerErrors(validate.errors ?? []));
}

/**
 * C0 controls (NUL included), DEL: PostgreSQL refuses NUL in text and `\u0000` in jsonb, and none of them
 * has a place in a name, an id or a reason. Lone surrogates are refused too (jsonb rejects them).
 */
// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const UNSTORABLE = /[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when a string can be stored as it is: no control character, no lone surrogate. */
export function isStorableText(text: string): boolean {
  return !UNSTORABLE.test(text);
}

/** A UTF-16 surrogate without its pair: `encodeURIComponent` throws on it, so a refused key names it as U+FFFD. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** No /iam body nests deeper than a few levels; a deeper one is refused before anything walks it. */
export const MAX_BODY_DEPTH = 32;

/**
 * JSON pointers (RFC 6901) of every string in `value`, keys included, that {@link isStorableText} refuses;
 * at most `limit` of them. Walks iteratively (a deeply nested body cannot exhaust the stack); a value nested
 * deeper than {@link MAX_BODY_DEPTH} is reported as its pointer with `depth: true`.
 */
export function unstorableStrings(value: unknown, limit = 20): { pointers: string[]; tooDeep: string | null } {
  const pointers: string[] = [];
  const pending: Array<[unknown, string, number]> = [[value, '', 0]];
  while (pending.length > 0 && pointers.length < limit) {
    const [item, pointer, depth] = pending.pop()!;
    if (typeof item === 'string') {
      if (!isStorableText(item)) pointers.push(pointer || '/');
      continue;
    }
    if (item === null || typeof item !== 'object') continue;
    if (depth >= MAX_BODY_DEPTH) return { pointers, tooDeep: pointer || '/' };
    const entries: Array<[string, unknown]> = Array.isArray(item) ? item.map((child, index): [string, unknown] => [String(index), child]) : Object.entries(item);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]!;
      const escaped = isStorableText(key) ? key.replace(/~/g, '~0').replace(/\//g, '~1') : encodeURIComponent(key.replace(LONE_SURROGATE, '\ufffd'));
      if (!Array.isArray(item) && !isStorableText(key)) pointers.push(`${pointer}/${escaped}`);
      pending.push([child, `${pointer}/${escaped}`, depth + 1]);
    }
  }
  return { pointers: pointers.slice(0, limit), tooDeep: null };
}

/**
 * True when {@link unstorableStrings} finds nothing in `value`: every string and key storable, no object nested
 * {@link MAX_BODY_DEPTH} levels deep. Recursive, but never deeper than that bound.
 */
function storable(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return isStorableText(value);
  if (value === null || typeof value !== 'object') return true;
  if (depth >= MAX_BODY_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!storable(value[i], depth + 1)) return false;
    return true;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (!isStorableText(key) || !storable((value as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

/**
 * The one check every /iam request body goes through (the app runs it after parsing, before any route):
 * 400 IAM_VALIDATION_FAILED naming each string with a control character or a lone surrogate, or a value
 * nested too deeply.
 */
export function assertStorable(body: unknown): void {
  // Nearly every body is fine: read it once without building a pointer per value, and walk it again only to name
  // what is wrong.
  if (storable(body, 0)) return;
  const { pointers, tooDeep } = unstorableStrings(body);
  if (tooDeep !== null) throw problems.validation([{ pointer: tooDeep, message: `is nested more than ${MAX_BODY_DEPTH} levels deep` }]);
  if (pointers.length === 0) return;
  throw problems.validation(pointers.map((pointer) => ({ pointer, message: 'must not contain control characters (U+0000–U+001F, U+007F) or lone surrogates' })));
}
