import Ajv, { type JSONSchemaType, type ValidateFunction } from 'ajv';
import { JSON_POINTER_PATTERN } from '../domain/json-pointer';

/**
 * JSON Schema of one policy file (docs/policy-format.md) and the TypeScript types checked against it.
 *
 * The types are tied to the schema through ajv's `JSONSchemaType`, so the two cannot drift. That helper
 * demands `nullable: true` on every optional key; the schema actually compiled has those markers removed,
 * so a `null` value (YAML `key: ~` or `key:` left empty) is rejected instead of silently meaning "unset":
 * an emptied `permission:` must not turn a route into an authenticated-only one.
 */

/** Methods a route may name; `*` means every method. Upper case only, like the request line (RFC 9110 §9.1). */
export const POLICY_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT', '*'] as const;

/** `resource` block of a route entry. */
export interface PolicyRouteResource {
  type: string;
  /** Name of a `:param` of the route's full path. */
  id: string;
  access?: 'READ' | 'WRITE';
  resolve?: 'optional' | 'required';
}

/**
 * `filter` block of a `GET` route (docs/policy-format.md): the host's answer is a list the gateway filters to the
 * elements the caller may see, asking the decision engine's plan for `type` with the route's permission.
 */
export interface PolicyRouteFilter {
  /** The resource type planned, e.g. `PROJECT` (a task list is filtered by its `projectId` as `PROJECT`). */
  type: string;
  /** JSON Pointer (RFC 6901) to an element's id, relative to the element: `/id`, `/projectId`. */
  id: string;
  /** JSON Pointer to the array in the host's answer; `""` (default): the answer is the array. */
  items?: string;
  /** Default `READ`. */
  access?: 'READ' | 'WRITE';
}

/** One entry of `routes`: a leaf route, or a group when it has `routes`. */
export interface PolicyRouteEntry {
  path: string;
  methods?: string[];
  permission?: string;
  public?: boolean;
  resource?: PolicyRouteResource;
  /** Only on a route whose methods are `GET` (and `HEAD`), with a permission; never inherited by a group's routes. */
  filter?: PolicyRouteFilter;
  mode?: 'enforce' | 'shadow';
  /**
   * `required` (default): a route without a permission still needs a valid active profile for the
   * session's client type. `optional`: any valid session passes (the host gets a profile id only when valid).
   */
  profile?: 'required' | 'optional';
  description?: string;
  /**
   * `aud` of the `X-IAM-Assertion` the host receives with these requests (default `iam.forward.assertion.audience`):
   * the host behind this route, so an assertion it receives is refused by every other host. Decides nothing.
   */
  audience?: string;
  routes?: PolicyRouteEntry[];
}

/** One entry of `resources.<TYPE>.resolver.scopes`. */
export interface PolicyScopePointer {
  /** Scope type (like a resource type). */
  type: string;
  /** JSON Pointer (RFC 6901) into the host's answer: `""` or `/a/b`, `~0` for `~` and `~1` for `/`. */
  id: string;
}

/** `resources.<TYPE>.resolver`. */
export interface PolicyResolverDeclaration {
  /** `http(s)` URL template containing `{id}`. */
  url: string;
  /** `"2s"`, `"500ms"` or a number of milliseconds. */
  timeout?: string | number;
  /** `true`: the host's own representation; a JSON 200 means the resource is its own scope. Excludes `scopes`. */
  self?: boolean;
  /** The host's own representation, mapped to scopes with JSON Pointers. Excludes `self`. */
  scopes?: PolicyScopePointer[];
}

/** `resources.<TYPE>`. */
export interface PolicyResourceDeclaration {
  resolver?: PolicyResolverDeclaration;
}

/** `match`: how request paths are compared with route patterns (the whole directory must agree). */
export interface PolicyMatchOptions {
  /** `true`: static segments compare exactly; default `false`: ASCII letters compare case-insensitively. */
  'case-sensitive'?: boolean;
}

/** One policy file after schema validation. */
export interface PolicyFileDocument {
  version: number;
  default?: 'deny' | 'authenticated' | 'allow';
  match?: PolicyMatchOptions;
  resources?: Record<string, PolicyResourceDeclaration>;
  routes?: PolicyRouteEntry[];
}

/** Resource and action: `[A-Za-z0-9_.-]+`; the action may be `*`; `*:*` means everything (docs/policy-format.md). */
const PERMISSION_PATTERN = '^(?:[A-Za-z0-9_.-]+:(?:[A-Za-z0-9_.-]+|\\*)|\\*:\\*)$';
const RESOURCE_TYPE_PATTERN = '^[A-Za-z0-9_.-]+$';
const PARAM_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';

/** What a pattern of this schema means, in words, for the error a value that does not match it gets. */
export const PATTERN_MEANINGS: Readonly<Record<string, string>> = {
  [PERMISSION_PATTERN]: 'not a permission code "<resource>:<action>" (resource and action [A-Za-z0-9_.-]+, action may be "*", or "*:*")',
  [JSON_POINTER_PATTERN]: 'not a JSON Pointer: "" (the whole answer) or "/key/0/key", with "~0" for "~" and "~1" for "/"',
};

/** A resource type, and a JSON Pointer into a host's answer (a list filter's `id`/`items`, a resolver's scope ids). */
const RESOURCE_TYPE = { type: 'string', pattern: RESOURCE_TYPE_PATTERN } as const;
const JSON_POINTER = { type: 'string', maxLength: 1024, pattern: JSON_POINTER_PATTERN } as const;

const routeResourceSchema: JSONSchemaType<PolicyRouteResource> = {
  type: 'object',
  additionalProperties: false,
  required: ['type', 'id'],
  properties: {
    type: RESOURCE_TYPE,
    id: { type: 'string', pattern: PARAM_NAME_PATTERN },
    access: { type: 'string', enum: ['READ', 'WRITE'], nullable: true },
    resolve: { type: 'string', enum: ['optional', 'required'], nullable: true },
  },
};

const routeFilterSchema: JSONSchemaType<PolicyRouteFilter> = {
  type: 'object',
  additionalProperties: false,
  required: ['type', 'id'],
  properties: {
    type: RESOURCE_TYPE,
    id: JSON_POINTER,
    items: { ...JSON_POINTER, nullable: true },
    access: { type: 'string', enum: ['READ', 'WRITE'], nullable: true },
  },
};

const routeEntrySchema: JSONSchemaType<PolicyRouteEntry> = {
  type: 'object',
  additionalProperties: false,
  required: ['path'],
  properties: {
    path: { type: 'string', maxLength: 2048 },
    methods: {
      type: 'array',
      nullable: true,
      minItems: 1,
      uniqueItems: true,
      items: { type: 'string', enum: [...POLICY_METHODS] },
    },
    permission: { type: 'string', pattern: PERMISSION_PATTERN, nullable: true },
    public: { type: 'boolean', nullable: true },
    resource: { ...routeResourceSchema, nullable: true },
    filter: { ...routeFilterSchema, nullable: true },
    mode: { type: 'string', enum: ['enforce', 'shadow'], nullable: true },
    profile: { type: 'string', enum: ['required', 'optional'], nullable: true },
    description: { type: 'string', nullable: true },
    // Visible ASCII, like the identifiers the assertion carries: a JWT claim and a host's configuration value.
    audience: { type: 'string', minLength: 1, maxLength: 256, pattern: '^[\\x21-\\x7E]+$', nullable: true },
    routes: { type: 'array', nullable: true, items: { $ref: '#/$defs/route' } as never },
  },
};

const authoredSchema: JSONSchemaType<PolicyFileDocument> = {
  $id: 'https://iam-gateway.dev/schemas/policy-file.json',
  type: 'object',
  additionalProperties: false,
  required: ['version'],
  $defs: { route: routeEntrySchema as never },
  properties: {
    version: { type: 'integer', const: 1 },
    default: { type: 'string', enum: ['deny', 'authenticated', 'allow'], nullable: true },
    match: {
      type: 'object',
      nullable: true,
      additionalProperties: false,
      properties: { 'case-sensitive': { type: 'boolean', nullable: true } },
    },
    resources: {
      type: 'object',
      nullable: true,
      required: [],
      propertyNames: { pattern: RESOURCE_TYPE_PATTERN },
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: {
          resolver: {
            type: 'object',
            nullable: true,
            additionalProperties: false,
            required: ['url'],
            properties: {
              // Only http(s): a policy file must not make the gateway read file:// or other schemes.
              // {id} only after the authority: an id must never choose the host the gateway calls.
              // Or a path (`/internal/…/{id}`, not `//host`): relative to `upstream.url`, the host behind the gateway.
              url: { type: 'string', pattern: '^(?:https?://[^/?#\\s{}]+[/?]|/(?![/\\\\]))[^\\s]*\\{id\\}' },
              timeout: {
                type: ['string', 'integer'],
                nullable: true,
                pattern: '^[1-9][0-9]*(?:ms|s)$',
                minimum: 1,
              },
              // The host's own representation: the resource itself (`self`), or scopes read with JSON Pointers.
              self: { type: 'boolean', enum: [true], nullable: true },
              scopes: {
                type: 'array',
                nullable: true,
                minItems: 1,
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['type', 'id'],
                  properties: {
                    type: RESOURCE_TYPE,
                    id: JSON_POINTER,
                  },
                },
              },
            },
            // Two meanings of one answer: refused (policy-parser.ts names the keys).
            not: { type: 'object', required: ['self', 'scopes'], properties: { self: {}, scopes: {} } },
          },
        },
      },
    },
    routes: { type: 'array', nullable: true, items: { $ref: '#/$defs/route' } as never },
  },
};

/** A deep copy of `schema` without `nullable` markers: optional keys may be absent, never `null`. */
function withoutNullable<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map((item: unknown) => withoutNullable(item)) as T;
  if (schema === null || typeof schema !== 'object') return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) if (key !== 'nullable') copy[key] = withoutNullable(value);
  return copy as T;
}

/**
 * JSON Schema (draft 2019-09 subset understood by ajv 8) of one policy file: unknown keys are rejected
 * everywhere (`additionalProperties: false`), and so are `null` values.
 */
export const policyFileSchema: JSONSchemaType<PolicyFileDocument> = withoutNullable(authoredSchema);

let cachedValidator: ValidateFunction<PolicyFileDocument> | undefined;

/**
 * The compiled validator of {@link policyFileSchema} (compiled once, on first use: a pure function, not a
 * connection). Collects every error of a document (`allErrors`), so a file's problems are reported at once.
 */
export function policyFileValidator(): ValidateFunction<PolicyFileDocument> {
  if (cachedValidator === undefined) {
    // `verbose`: an error carries its schema, so a refused combination (`not: {required}`) names its keys.
    const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true, verbose: true });
    cachedValidator = ajv.compile(policyFileSchema);
  }
  return cachedValidator;
}
