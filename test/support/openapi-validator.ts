/**
 * Checks real HTTP answers against the OpenAPI 3.1 document (docs/http-contract.md): the status must be documented
 * for the operation, the media type declared, the body valid against the response schema (JSON Schema
 * 2020-12, ajv) and every required response header present and valid. Component schemas are registered
 * with ajv under their own ids, so `$ref: '#/components/schemas/X'` resolves exactly as written.
 */
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import {
  HTTP_METHODS,
  type HeaderObject,
  type HttpMethod,
  type JsonSchema,
  type OpenApiDocument,
  type OperationObject,
  type ReferenceObject,
  type ResponseObject,
} from '../../src/api/openapi-document';

/** Where the component schemas live for ajv; document refs are rewritten to it. */
const SCHEMA_BASE = 'https://iam-gateway.dev/openapi/components/schemas/';
const BODY_EXCERPT = 600;

/** Response headers as fetch gives them, or a plain record (names in any case). */
export type ResponseHeaders = Headers | Record<string, string | string[] | undefined>;

export interface OperationMatch {
  method: HttpMethod;
  pathTemplate: string;
  operation: OperationObject;
  /** Path parameters taken from the concrete path. */
  params: Record<string, string>;
}

export interface ResponseValidator {
  /**
   * Throws a readable error unless the answer is one the document describes for `method pathTemplate`.
   * `body` is the parsed JSON (or the raw text for other media types; '' / undefined when empty).
   */
  assertMatches(method: string, pathTemplate: string, status: number, contentType: string | null, body: unknown, headers?: ResponseHeaders): void;
  /** The same check against a response of `components.responses` (e.g. a proxied 403 `AccessDenied`). */
  assertMatchesComponent(name: string, status: number, contentType: string | null, body: unknown, headers?: ResponseHeaders): void;
  /** The documented operation that serves `concretePath` (query ignored), or null. Literal segments beat parameters. */
  operationFor(method: string, concretePath: string): OperationMatch | null;
  /** Ajv's complaints about `body` (JSON, or a form's fields as an object) as the operation's request body; [] when the document accepts it. */
  requestBodyErrors(method: string, pathTemplate: string, body: unknown): string[];
  /** Every operation of the document. */
  operations(): Array<{ method: HttpMethod; pathTemplate: string; operation: OperationObject }>;
  /** Compiles every request, response and header schema now (strict mode: an unknown keyword throws); returns how many. */
  compileAll(): number;
}

/** Resolves a local `$ref` (`#/a/b`) in `document` (RFC 6901 escapes included). */
export function resolvePointer(document: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) throw new Error(`only local references are supported: ${ref}`);
  let node: unknown = document;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !(key in node)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

function deref<T>(document: OpenApiDocument, value: T | ReferenceObject): T {
  let current: unknown = value;
  for (let depth = 0; depth < 10 && current !== null && typeof current === 'object' && '$ref' in current; depth++) {
    const target = resolvePointer(document, (current as ReferenceObject).$ref);
    if (target === undefined) throw new Error(`unresolvable $ref ${(current as ReferenceObject).$ref}`);
    current = target;
  }
  return current as T;
}

/** A deep copy with every `#/components/schemas/X` reference made absolute for ajv. */
function absolutize<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item: unknown) => absolutize(item)) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] = key === '$ref' && typeof item === 'string' && item.startsWith('#/components/schemas/') ? SCHEMA_BASE + item.slice('#/components/schemas/'.length) : absolutize(item);
  }
  return out as T;
}

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  const lines = (errors ?? []).map((error) => {
    const where = error.instancePath || '(root)';
    const extra = error.keyword === 'additionalProperties' ? ` "${String(error.params.additionalProperty)}"` : error.keyword === 'enum' ? ` ${JSON.stringify(error.params.allowedValues)}` : '';
    return `  - ${where}: ${error.message ?? 'is invalid'}${extra} [${error.schemaPath}]`;
  });
  return [...new Set(lines)].join('\n');
}

function excerpt(body: unknown): string {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  if (text === undefined) return '(no body)';
  return text.length > BODY_EXCERPT ? `${text.slice(0, BODY_EXCERPT)}…` : text;
}

function headerValue(headers: ResponseHeaders, name: string): string | null {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name);
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === wanted && value !== undefined) return Array.isArray(value) ? value.join(', ') : value;
  }
  return null;
}

const isEmptyBody = (body: unknown): boolean => body === undefined || body === null || body === '';

/** Builds a validator for `document`; schemas are compiled on first use and kept. */
export function createResponseValidator(document: OpenApiDocument): ResponseValidator {
  const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
  addFormats(ajv);
  for (const [name, schema] of Object.entries(document.components.schemas)) ajv.addSchema(absolutize(schema), SCHEMA_BASE + name);
  const compiled = new Map<string, ValidateFunction>();
  const compile = (key: string, schema: JsonSchema): ValidateFunction => {
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.compile(absolutize(schema));
      compiled.set(key, validate);
    }
    return validate;
  };

  const operation = (method: string, pathTemplate: string): OperationObject => {
    const item = document.paths[pathTemplate];
    if (!item) throw new Error(`${pathTemplate} is not a path of the OpenAPI document`);
    const found = item[method.toLowerCase() as HttpMethod];
    if (!found) throw new Error(`${method.toUpperCase()} ${pathTemplate} is not an operation of the OpenAPI document`);
    return found;
  };

  const checkResponse = (label: string, key: string, declared: ResponseObject, contentType: string | null, body: unknown, headers?: ResponseHeaders): void => {
    const failures: string[] = [];
    if (headers) {
      for (const [name, entry] of Object.entries(declared.headers ?? {})) {
        const spec = deref<HeaderObject>(document, entry);
        const value = headerValue(headers, name);
        if (value === null) {
          if (spec.required) failures.push(`  - header ${name} is required but missing`);
          continue;
        }
        const validate = compile(`${key} header ${name}`, spec.schema);
        // Set-Cookie is the one header sent several times (RFC 6265 §3): the documented cookie must be one of them.
        const cookies = name.toLowerCase() === 'set-cookie' && typeof (headers as Headers).getSetCookie === 'function' ? (headers as Headers).getSetCookie() : null;
        if (cookies !== null) {
          if (!cookies.some((line) => validate(line))) failures.push(`  - header Set-Cookie: none of ${JSON.stringify(cookies)} matches ${JSON.stringify(spec.schema)}`);
          continue;
        }
        if (!validate(value)) failures.push(`  - header ${name}: ${JSON.stringify(value)} ${describeErrors(validate.errors).trim().replace(/^- \(root\): /, '')}`);
      }
    }
    const content = declared.content;
    if (!content) {
      if (!isEmptyBody(body)) failures.push(`  - no body is documented, got ${excerpt(body)}`);
    } else {
      const mediaType = (contentType ?? '').split(';')[0].trim().toLowerCase();
      const media = content[mediaType];
      if (!media) {
        failures.push(`  - media type ${JSON.stringify(contentType)} is not documented (documented: ${Object.keys(content).join(', ')})`);
      } else {
        const validate = compile(`${key} ${mediaType}`, media.schema);
        if (!validate(body)) failures.push(describeErrors(validate.errors));
      }
    }
    if (failures.length > 0) throw new Error(`${label} does not match the OpenAPI description:\n${failures.join('\n')}\n  body: ${excerpt(body)}`);
  };

  return {
    assertMatches(method, pathTemplate, status, contentType, body, headers) {
      const op = operation(method, pathTemplate);
      const label = `${method.toUpperCase()} ${pathTemplate} → ${status}`;
      const entry = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`];
      if (!entry) {
        throw new Error(`${label}: status ${status} is not documented for ${op.operationId} (documented: ${Object.keys(op.responses).join(', ')})\n  body: ${excerpt(body)}`);
      }
      checkResponse(label, `${method.toLowerCase()} ${pathTemplate} ${status}`, deref<ResponseObject>(document, entry), contentType, body, headers);
    },

    assertMatchesComponent(name, status, contentType, body, headers) {
      const declared = document.components.responses[name];
      if (!declared) throw new Error(`components.responses.${name} does not exist`);
      checkResponse(`response ${name} (${status})`, `component ${name}`, declared, contentType, body, headers);
      const statusSchema = compile(`component ${name} status`, { type: 'object', properties: { status: { const: status } } });
      if (!statusSchema(body)) throw new Error(`response ${name}: the body's status is not ${status}: ${excerpt(body)}`);
    },

    operationFor(method, concretePath) {
      const wanted = method.toLowerCase() as HttpMethod;
      const segments = concretePath.split('?')[0].split('/');
      let best: OperationMatch | null = null;
      let bestScore = '';
      for (const [pathTemplate, item] of Object.entries(document.paths)) {
        const operationObject = item[wanted];
        const parts = pathTemplate.split('/');
        if (!operationObject || parts.length !== segments.length) continue;
        const params: Record<string, string> = {};
        let score = '';
        let matches = true;
        for (let i = 0; i < parts.length && matches; i++) {
          const part = parts[i];
          if (part.startsWith('{') && part.endsWith('}')) {
            if (segments[i] === '') matches = false;
            else params[part.slice(1, -1)] = decodeURIComponent(segments[i]);
            score += '0';
          } else {
            matches = part === segments[i];
            score += '1';
          }
        }
        // Compare specificity segment by segment: a literal beats a parameter at the first difference.
        if (matches && score > bestScore) {
          best = { method: wanted, pathTemplate, operation: operationObject, params };
          bestScore = score;
        }
      }
      return best;
    },

    requestBodyErrors(method, pathTemplate, body) {
      const op = operation(method, pathTemplate);
      // A JSON body, or the fields of a form (`application/x-www-form-urlencoded`, the login page) as an object.
      const content = op.requestBody?.content ?? {};
      const mediaType = 'application/json' in content ? 'application/json' : 'application/x-www-form-urlencoded';
      const schema = content[mediaType]?.schema;
      if (!schema) return [`${op.operationId} documents no JSON or form request body`];
      const validate = compile(`${method.toLowerCase()} ${pathTemplate} request ${mediaType}`, schema);
      return validate(body) ? [] : describeErrors(validate.errors).split('\n');
    },

    operations() {
      const out: Array<{ method: HttpMethod; pathTemplate: string; operation: OperationObject }> = [];
      for (const [pathTemplate, item] of Object.entries(document.paths)) {
        for (const method of HTTP_METHODS) {
          const op = item[method];
          if (op) out.push({ method, pathTemplate, operation: op });
        }
      }
      return out;
    },

    compileAll() {
      let count = 0;
      const add = (key: string, schema: JsonSchema): void => {
        compile(key, schema);
        count++;
      };
      for (const name of Object.keys(document.components.schemas)) add(`component schema ${name}`, { $ref: `#/components/schemas/${name}` });
      for (const { method, pathTemplate, operation: op } of this.operations()) {
        const prefix = `${method} ${pathTemplate}`;
        for (const [mediaType, media] of Object.entries(op.requestBody?.content ?? {})) add(`${prefix} request ${mediaType}`, media.schema);
        for (const [status, entry] of Object.entries(op.responses)) {
          const declared = deref<ResponseObject>(document, entry);
          for (const [mediaType, media] of Object.entries(declared.content ?? {})) add(`${prefix} ${status} ${mediaType}`, media.schema);
          for (const [name, headerEntry] of Object.entries(declared.headers ?? {})) add(`${prefix} ${status} header ${name}`, deref<HeaderObject>(document, headerEntry).schema);
        }
      }
      return count;
    },
  };
}
