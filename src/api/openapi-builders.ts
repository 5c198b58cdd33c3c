/**
 * Builders shared by the parts of the `/iam` OpenAPI document: `$ref`s to components and the success, empty
 * and RFC 9457 problem answers.
 */
import { PROBLEM_CATALOG, type ProblemCode } from '../domain/problem';
import type { JsonSchema, PathItemObject, ReferenceObject, ResponseObject, SecurityRequirement } from './openapi-types';
import { HTTP_METHODS } from './openapi-types';

export const PROBLEM_MEDIA_TYPE = 'application/problem+json';
export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
export const header = (name: string): ReferenceObject => ({ $ref: `#/components/headers/${name}` });
export const response = (name: string): ReferenceObject => ({ $ref: `#/components/responses/${name}` });
export const param = (name: string): ReferenceObject => ({ $ref: `#/components/parameters/${name}` });

declare const JSON_BODY: unique symbol;
/** A JSON answer (built by {@link json}): a route's success one comes from its declared `response`, never from this. */
export type JsonResponseObject = ResponseObject & { readonly [JSON_BODY]: true };
/** Any answer but a {@link JsonResponseObject}. */
export type WithoutJsonBody = { readonly [JSON_BODY]?: never };

/** A JSON answer. */
export function json(description: string, schema: JsonSchema, headers: ResponseObject['headers'] = {}): JsonResponseObject {
  return { description, headers: { 'X-Request-Id': header('RequestId'), ...headers }, content: { 'application/json': { schema } } } as unknown as JsonResponseObject;
}

/** An HTML page the gateway writes itself (the login form): never cached, a strict Content-Security-Policy. */
export function html(description: string, headers: ResponseObject['headers'] = {}): ResponseObject {
  return {
    description,
    headers: { 'X-Request-Id': header('RequestId'), 'Cache-Control': header('NoStore'), 'Content-Security-Policy': header('PageCsp'), ...headers },
    content: { 'text/html': { schema: { type: 'string' } } },
  };
}

/** An answer without a body. */
export function empty(description: string, headers: ResponseObject['headers'] = {}): ResponseObject {
  return { description, headers: { 'X-Request-Id': header('RequestId'), ...headers } };
}

/**
 * An RFC 9457 answer narrowed to `status` and the catalog `codes` this operation can give, so a test
 * catches a right status with a wrong code as well as a wrong shape.
 */
export function problem(status: number, codes: ProblemCode[], description: string, options: { headers?: ResponseObject['headers']; require?: string[] } = {}): ResponseObject {
  for (const code of codes) {
    const catalog: number = PROBLEM_CATALOG[code].status;
    // 422 is the documented override of IAM_VALIDATION_FAILED for well-formed bodies naming unknown things.
    if (catalog !== status && !(status === 422 && code === 'IAM_VALIDATION_FAILED')) throw new Error(`${code} is not a ${status} problem`);
  }
  const narrowed: JsonSchema = { type: 'object', properties: { status: { const: status }, code: { enum: codes } } };
  if (options.require) {
    narrowed.required = options.require;
    for (const key of options.require) narrowed.properties![key] = { type: 'string' };
  }
  return {
    description,
    headers: { 'X-Request-Id': header('RequestId'), 'Cache-Control': header('NoStore'), ...options.headers },
    content: { [PROBLEM_MEDIA_TYPE]: { schema: { allOf: [ref('Problem'), narrowed] } } },
  };
}

/** A failure of a browser endpoint: an HTML page when the client prefers `text/html`, else the problem. */
export function pageOrProblem(status: number, codes: ProblemCode[], description: string, options: { headers?: ResponseObject['headers'] } = {}): ResponseObject {
  const asProblem = problem(status, codes, description, options);
  return { ...asProblem, content: { 'text/html': { schema: { type: 'string' } }, ...asProblem.content } };
}

/** The answers every protected operation can give besides its own. */
export const PROTECTED_FAILURES = {
  '401': response('Unauthenticated'),
  '500': response('InternalError'),
  '503': response('Unavailable'),
};
/** The answers every operation with a request body can give besides its own. */
export const BODY_FAILURES = { '413': response('PayloadTooLarge'), '415': response('UnsupportedMediaType') };

/** `Cache-Control: no-store` on an answer that carries data of one caller (admin objects, decisions). */
export const NO_STORE: NonNullable<ResponseObject['headers']> = { 'Cache-Control': header('NoStore') };

/**
 * Who may call an operation (`security`, OpenAPI 3.1 §4.8.30), in the names of `components.securitySchemes`.
 * The gateway reads the bearer token, or without one the session cookie (docs/http-contract.md, Authentication):
 * either satisfies a protected operation, so each is a requirement of its own (alternatives).
 */
export const SESSION: SecurityRequirement[] = [{ bearer: [] }, { sessionCookie: [] }];
/** A credential is used when one is sent, and none is fine too (`{}`: the anonymous alternative). */
export const OPTIONAL_SESSION: SecurityRequirement[] = [...SESSION, {}];
/** A session whose active profile grants `permission` (for non-OAuth schemes the list names the roles needed). */
export const sessionGranting = (permission: string): SecurityRequirement[] => SESSION.map((requirement) => Object.fromEntries(Object.keys(requirement).map((scheme) => [scheme, [permission]])));

/**
 * The answers the front door can give to a request for any operation before routing, listed on every one: a target
 * longer than `server.max-url-length` is 414 whatever it names. (400 IAM_BAD_REQUEST, 405 and 431 are in
 * `info.description`: listing them would contradict an operation's own 400 and its methods.)
 */
export const REFUSED_BEFORE_ROUTING = { '414': response('UriTooLong') };

/** `paths` with {@link REFUSED_BEFORE_ROUTING} added to every operation (an operation's own entry wins). */
export function withRefusalsBeforeRouting(paths: Record<string, PathItemObject>): Record<string, PathItemObject> {
  return Object.fromEntries(
    Object.entries(paths).map(([path, item]) => {
      const withRefusals: PathItemObject = { ...item };
      for (const method of HTTP_METHODS) {
        const operation = item[method];
        if (operation) withRefusals[method] = { ...operation, responses: { ...REFUSED_BEFORE_ROUTING, ...operation.responses } };
      }
      return [path, withRefusals];
    }),
  );
}
