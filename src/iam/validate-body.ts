import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { problems } from '../problem';

/** One ajv instance for /iam request bodies: all errors, no coercion, unknown properties rejected by the schemas. */
export function createBodyValidator(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true });
  addFormats(ajv);
  return ajv;
}

/** Throws 400 IAM_VALIDATION_FAILED naming every failing JSON pointer (design.md §4.1). */
export function assertValid<T>(validate: ValidateFunction<T>, body: unknown): T {
  if (validate(body)) return body;
  throw problems.validation(toPointerErrors(validate.errors ?? []));
}

export function toPointerErrors(errors: ErrorObject[]): Array<{ pointer: string; message: string }> {
  const seen = new Set<string>();
  const out: Array<{ pointer: string; message: string }> = [];
  for (const error of errors) {
    let pointer = error.instancePath;
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'additionalProperties') {
      pointer += `/${String(error.params.additionalProperty)}`;
      message = 'is not an allowed property';
    } else if (error.keyword === 'required') {
      pointer += `/${String(error.params.missingProperty)}`;
      message = 'is required';
    } else if (error.keyword === 'enum') {
      message = `must be one of ${(error.params.allowedValues as unknown[]).map(String).join(', ')}`;
    }
    const key = `${pointer}\0${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ pointer: pointer || '/', message });
  }
  return out;
}

/**
 * C0 controls (NUL included), DEL: PostgreSQL refuses NUL in text and `\u0000` in jsonb, and none of them
 * has a place in a name, an id or a reason. Lone surrogates are refused too (jsonb rejects them).
 */
const UNSTORABLE = /[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when a string can be stored as it is: no control character, no lone surrogate. */
export function isStorableText(text: string): boolean {
  return !UNSTORABLE.test(text);
}

/**
 * JSON pointers (RFC 6901) of every string in `value`, keys included, that {@link isStorableText} refuses;
 * at most `limit` of them.
 */
export function unstorableStrings(value: unknown, pointer = '', out: string[] = [], limit = 20): string[] {
  if (out.length >= limit) return out;
  if (typeof value === 'string') {
    if (!isStorableText(value)) out.push(pointer || '/');
  } else if (Array.isArray(value)) {
    value.forEach((item, index) => unstorableStrings(item, `${pointer}/${index}`, out, limit));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const escaped = isStorableText(key) ? key.replace(/~/g, '~0').replace(/\//g, '~1') : encodeURIComponent(key);
      if (!isStorableText(key) && out.length < limit) out.push(`${pointer}/${escaped}`);
      unstorableStrings(item, `${pointer}/${escaped}`, out, limit);
    }
  }
  return out;
}

/**
 * The one check every /iam request body goes through (the app runs it after parsing, before any route):
 * 400 IAM_VALIDATION_FAILED naming each string with a control character or a lone surrogate.
 */
export function assertStorable(body: unknown): void {
  const pointers = unstorableStrings(body);
  if (pointers.length === 0) return;
  throw problems.validation(pointers.map((pointer) => ({ pointer, message: 'must not contain control characters (U+0000–U+001F, U+007F) or lone surrogates' })));
}
