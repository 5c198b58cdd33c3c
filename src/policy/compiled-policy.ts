/** The compiled, immutable form of all policy files of a directory (docs/policy-format.md). */

export type AccessMode = 'READ' | 'WRITE';
export type DefaultAction = 'deny' | 'authenticated' | 'allow';

/** Where a policy element was written: shown in errors, lint, diagnostics and decisions. */
export interface SourceLocation {
  /** Path relative to the policies directory, e.g. `projects.yaml`. */
  file: string;
  /** 1-based line of the route entry. */
  line: number;
}

export interface RouteResource {
  /** Resource type, e.g. `PROJECT`; a key of `resources` or not (then only scopes by id apply). */
  type: string;
  /** Name of the path parameter holding the resource id. */
  idParam: string;
  access: AccessMode;
  /** `required`: a resolver must exist for the type (500 IAM_RESOURCE_RESOLUTION_UNAVAILABLE otherwise). */
  resolve: 'optional' | 'required';
}

/**
 * A `GET` route's list filter (policy `filter`): the host's answer holds an array whose elements the caller sees only
 * when the decision engine's plan for `type`/`access` (with the route's permission) covers the element's id.
 */
export interface RouteFilter {
  type: string;
  access: AccessMode;
  /** The element's id pointer as written (`/id`), and its reference tokens. */
  id: string;
  idTokens: readonly string[];
  /** The array's pointer as written (`""`: the answer itself), and its reference tokens. */
  items: string;
  itemsTokens: readonly string[];
}

/** One effective route after group defaults are applied. */
export interface CompiledRoute {
  /** Stable id: `file:line`. */
  id: string;
  source: SourceLocation;
  /** Upper-case methods; `['*']` means every method. */
  methods: string[];
  /** The full path pattern, e.g. `/api/projects/:projectId` or `/api/admin/**`. */
  pattern: string;
  public: boolean;
  permission: string | null;
  resource: RouteResource | null;
  /** Present on a `GET` route whose answer the gateway filters (policy `filter`). */
  filter?: RouteFilter;
  /** `shadow`: decide and log, but let the request through. */
  mode: 'enforce' | 'shadow';
  /**
   * `optional` (policy `profile: optional`): the session needs no valid active profile. Absent: it does,
   * on every non-public route, with or without a permission.
   */
  profile?: 'optional';
  /**
   * The `aud` of the assertion its requests carry to the host (policy `audience`); absent: the configured
   * `iam.forward.assertion.audience`. Never part of a decision.
   */
  audience?: string;
}

export interface RouteMatch {
  route: CompiledRoute;
  /** Values of the `:param` segments (already decoded by normalization). */
  params: Record<string, string>;
}

/**
 * A request whose path a route pattern declares, but not for its method, while what the method would fall
 * through to (a broader route, or `default`) checks less than that pattern's routes: it is refused
 * (403 `ROUTE_NOT_DECLARED`) instead of being decided by the weaker rule (#11.30).
 */
export interface MethodRefusal {
  /** The routes of the most specific pattern matching the path; none lists the method. */
  declared: CompiledRoute[];
  /** The broader route the method would otherwise fall through to; null for `default`. */
  fallback: CompiledRoute | null;
}

export interface ResourceResolverConfig {
  /** URL template with `{id}`, e.g. `http://127.0.0.1:3000/internal/resources/projects/{id}`. */
  url: string;
  timeoutMs: number;
  /**
   * How a 200 answer becomes scope refs when the resolver reads the host's own representation (policy `self` or
   * `scopes`); absent: the answer is the resolver document `{scopes: [{type, id}]}`.
   */
  answer?: ResolverAnswerMapping;
}

/** One `resolver.scopes` entry: a scope type and where its id is in the host's answer. */
export interface ScopePointer {
  /** Scope type, e.g. `PROJECT`. */
  type: string;
  /** The JSON Pointer (RFC 6901) as written, e.g. `/projectId`; `""` is the whole answer. */
  pointer: string;
  /** Its reference tokens, unescaped (`~1` → `/`, `~0` → `~`): `["projectId"]`. */
  tokens: readonly string[];
}

/**
 * A resolver that reads the host's own representation: `self` (any JSON 200 names the resource itself) or
 * `scopes` (each pointer's value, or each element of an array value, is the id of a scope of its type).
 */
export type ResolverAnswerMapping = { kind: 'self' } | { kind: 'pointers'; scopes: readonly ScopePointer[] };

export interface CompiledPolicy {
  /** sha256 over the sorted file names and contents: changes exactly when the policy does. */
  hash: string;
  loadedAt: Date;
  defaultAction: DefaultAction;
  resources: Record<string, { resolver: ResourceResolverConfig | null }>;
  routes: CompiledRoute[];
  files: string[];
  /**
   * Whether some route asks for `permission` on a resource of `resourceType`: the pairs a caller may have resolved
   * for their own decisions (check, diagnostics) — any other pairing would make the resolvers an oracle.
   */
  declaresResource(permission: string, resourceType: string): boolean;
  /** Each file's size in bytes as it was read (absent for a policy compiled from documents, not files). */
  fileBytes?: Readonly<Record<string, number>>;
  /** Static path segments compare exactly (`match: { case-sensitive: true }`); false: ASCII-case-insensitively. */
  caseSensitive: boolean;
  /** Every route `audience`: the audiences the gateway issues assertions for besides the configured one. */
  audiences: ReadonlySet<string>;
  /**
   * The most specific route for a method and a normalized path (static > `:param` > `**`, segment by
   * segment; `GET` routes also match `HEAD`), or null. Cost depends on the path's depth, not on the
   * number of routes.
   */
  match(method: string, path: string): RouteMatch | null;
  /**
   * When {@link match} is null: whether the method is refused because a more specific pattern declares the
   * path for other methods only and the fallback checks less ({@link MethodRefusal}); null when `default`
   * decides.
   */
  refusal(method: string, path: string): MethodRefusal | null;
}

/** A problem found while loading or linting a policy directory. */
export interface PolicyIssue {
  severity: 'error' | 'warning';
  /** Stable kind, e.g. `parse`, `schema`, `conflict`, `shadowed`, `unreachable`, `no-resolver`, `unknown-permission`. */
  kind: string;
  message: string;
  source: SourceLocation | null;
  /** The second location for conflicts and shadowing. */
  related?: SourceLocation;
}

export interface PolicyLoadResult {
  /** Present only when there is no error-severity issue. */
  policy: CompiledPolicy | null;
  issues: PolicyIssue[];
}
