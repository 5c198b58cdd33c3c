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
