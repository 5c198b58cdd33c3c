/**
 * Turning a JSON-schema validator's errors into words, once for every document the gateway checks (/iam bodies,
 * the configuration, provisioning, users and policy files, policy test cases, an authenticator's answer). The error
 * is described by its shape (what ajv's `ErrorObject` carries), so this tier needs no validator.
 */
export interface SchemaError {
  /** JSON pointer (RFC 6901) of the value that failed; `''` for the document itself. */
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

/** One problem of a document: where (JSON pointer; `/` for the document itself) and what. */
export interface PointerError {
  pointer: string;
  message: string;
}

/** `/routes/1/a~1b` → `['routes', '1', 'a/b']`. */
export function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** `['routes', '1', 'methods']` → `routes[1].methods` (the document itself is `(top level)`). */
export function displayPath(path: ReadonlyArray<string | number>): string {
  if (path.length === 0) return '(top level)';
  let out = '';
  for (const segment of path) {
    if (/^[0-9]+$/.test(String(segment))) out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${segment}`;
  }
  return out;
}

/** `/users/0 must have required property 'id'`: one error in a line. */
export function schemaErrorText(error: SchemaError | undefined): string {
  return `${error?.instancePath || '/'} ${error?.message ?? 'is invalid'}`;
}

/**
 * Every error as a pointer and a message, once each: an unknown or missing property is named in the pointer (the
 * message says which), an enum lists its values.
 */
export function pointerErrors(errors: readonly SchemaError[]): PointerError[] {
  const seen = new Set<string>();
  const out: PointerError[] = [];
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
