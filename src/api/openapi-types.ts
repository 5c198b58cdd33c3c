/**
 * The small TypeScript types of the `/iam` OpenAPI 3.1 document (openapi-document.ts). They are local on
 * purpose: an excess-property check in the document's object literals catches a misspelt keyword at compile time.
 */
/** The JSON Schema 2020-12 keywords this document uses. */
export interface JsonSchema {
  $ref?: string;
  title?: string;
  description?: string;
  type?: JsonType | JsonType[];
  enum?: readonly unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  properties?: Record<string, JsonSchema>;
  required?: readonly string[];
  additionalProperties?: boolean | JsonSchema;
  dependentRequired?: Record<string, readonly string[]>;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  allOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  not?: JsonSchema;
  if?: JsonSchema;
  then?: JsonSchema;
  else?: JsonSchema;
  default?: unknown;
  examples?: unknown[];
}
export type JsonType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean' | 'null';

export interface ReferenceObject {
  $ref: string;
}
export interface MediaTypeObject {
  schema: JsonSchema;
}
export interface HeaderObject {
  description?: string;
  required?: boolean;
  schema: JsonSchema;
}
export interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject | ReferenceObject>;
  content?: Record<string, MediaTypeObject>;
}
export interface ParameterObject {
  name: string;
  in: 'path' | 'query' | 'header';
  description?: string;
  required?: boolean;
  schema: JsonSchema;
}
export interface OperationObject {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /**
   * Absent: the document's default (the bearer token or the session cookie). `[]`: public, no credential read.
   * A requirement `{}` among the others: a credential is optional (used when sent).
   */
  security?: SecurityRequirement[];
  parameters?: Array<ParameterObject | ReferenceObject>;
  requestBody?: { description?: string; required: boolean; content: Record<string, MediaTypeObject> };
  responses: Record<string, ResponseObject | ReferenceObject>;
  /** The `iam.admin.*` permission the caller's active profile must grant (docs/http-contract.md). */
  'x-permission'?: string;
  /** Codes the handler decides itself beyond its access (a wider view, a subject named in the body). */
  'x-permissions'?: string[];
}
/** A Security Requirement Object (§4.8.30): scheme name → the roles (non-OAuth schemes) the caller must hold. */
export type SecurityRequirement = Record<string, string[]>;
/** The two ways the gateway accepts a session (docs/http-contract.md, Authentication). */
export type SecuritySchemeObject =
  | { type: 'http'; scheme: 'bearer'; bearerFormat?: string; description?: string }
  | { type: 'apiKey'; in: 'cookie'; name: string; description?: string };
export type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';
export type PathItemObject = { parameters?: Array<ParameterObject | ReferenceObject> } & Partial<Record<HttpMethod, OperationObject>>;
export interface OpenApiDocument {
  openapi: '3.1.0';
  jsonSchemaDialect: string;
  info: { title: string; version: string; summary?: string; description?: string; license?: { name: string; identifier: string } };
  /** Where the document is served: the gateway's own origin (a relative URL, §4.8.5). */
  servers: Array<{ url: string; description?: string }>;
  tags: Array<{ name: string; description: string }>;
  security: SecurityRequirement[];
  paths: Record<string, PathItemObject>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, ResponseObject>;
    parameters: Record<string, ParameterObject>;
    headers: Record<string, HeaderObject>;
    securitySchemes: Record<string, SecuritySchemeObject>;
  };
}

/** Every method OpenAPI 3.1 can describe (§4.8.9). */
export const HTTP_METHODS: readonly HttpMethod[] = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
