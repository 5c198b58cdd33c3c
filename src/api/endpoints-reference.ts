/**
 * The endpoint table of docs/endpoints.md, rendered from the served OpenAPI document (itself generated from the route
 * declarations): who may call each route and the problem codes of each answer are the document's, so the table and
 * the document cannot disagree. `npm run docs:endpoints` rewrites the table; a unit test keeps it current.
 */
import { openApiDocument } from './openapi-document';
import { HTTP_METHODS, type JsonSchema, type OperationObject, type ParameterObject, type ReferenceObject, type ResponseObject } from './openapi-types';
import { OPTIONAL_SESSION, PROBLEM_MEDIA_TYPE } from './openapi-builders';

/** Markers around the generated table; `npm run docs:endpoints` rewrites what is between them. */
export const ENDPOINTS_REFERENCE_BEGIN = '<!-- generated: endpoints (npm run docs:endpoints, from the route declarations in src/api/*-routes.ts) -->';
export const ENDPOINTS_REFERENCE_END = '<!-- /generated -->';

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** A response, its `$ref` to `components.responses` followed. */
function resolved(answer: ResponseObject | ReferenceObject): ResponseObject {
  if (!('$ref' in answer)) return answer;
  const name = answer.$ref.replace('#/components/responses/', '');
  const target = openApiDocument.components.responses?.[name];
  if (target === undefined) throw new Error(`unknown response ${answer.$ref}`);
  return target;
}

/** The catalog codes a problem answer is narrowed to (openapi-builders.ts `problem`), or none for another answer. */
export function problemCodesOf(answer: ResponseObject | ReferenceObject): string[] {
  const schema = resolved(answer).content?.[PROBLEM_MEDIA_TYPE]?.schema as { allOf?: JsonSchema[] } | undefined;
  const narrowed = schema?.allOf?.find((part) => part.properties?.code !== undefined);
  return ((narrowed?.properties?.code as { enum?: string[] } | undefined)?.enum ?? []).slice();
}

/** Who may call an operation: its `security`, `x-permission` and the `x-permissions` its handler decides itself. */
function callerOf(operation: OperationObject): string {
  let who: string;
  if (operation['x-permission'] !== undefined) who = `\`${operation['x-permission']}\``;
  else if (operation.security !== undefined && operation.security.length === 0) who = 'public';
  else if (JSON.stringify(operation.security) === JSON.stringify(OPTIONAL_SESSION)) who = 'session or none';
  else who = 'session';
  const own = operation['x-permissions'];
  return own === undefined ? who : `${who}; more with ${own.map((code) => `\`${code}\``).join(', ')}`;
}

/** Each answer: its status, with the problem codes it can carry. */
function answersOf(operation: OperationObject): string {
  return Object.keys(operation.responses)
    .sort()
    .map((status) => {
      const codes = problemCodesOf(operation.responses[status]!);
      return codes.length === 0 ? status : `${status} ${codes.map((code) => `\`${code}\``).join(', ')}`;
    })
    .join('; ');
}

/** The query parameters of an operation (generated from its declared `query`), each with its default; `-` without. */
function queryOf(operation: OperationObject): string {
  const names = (operation.parameters ?? [])
    .filter((parameter): parameter is ParameterObject => !('$ref' in parameter) && parameter.in === 'query')
    .map(({ name, schema }) => (schema.default === undefined ? `\`${name}\`` : `\`${name}\` (default ${JSON.stringify(schema.default)})`));
  return names.length === 0 ? '-' : names.join(', ');
}

/** One row per declared route, in the document's order. Ends with a newline. */
export function renderEndpointsReference(): string {
  const rows: string[] = [];
  for (const [path, item] of Object.entries(openApiDocument.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (operation === undefined) continue;
      rows.push(`| ${method.toUpperCase()} | \`${path}\` | ${cell(operation.summary)} | ${cell(queryOf(operation))} | ${cell(callerOf(operation))} | ${cell(answersOf(operation))} |`);
    }
  }
  return ['| method | path | what | query parameters | who may call it | answers (status and problem codes) |', '|---|---|---|---|---|---|', ...rows, ''].join('\n');
}
