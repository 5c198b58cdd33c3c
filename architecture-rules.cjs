'use strict';
/**
 * The architecture of src/ and migrations/ as data: the tiers, the adapters, the entry points and the place of every
 * runtime library. `.dependency-cruiser.cjs` builds its rules from it (`npm run lint:deps`), and
 * `npm run docs:architecture` renders the tier list and the library table of docs/architecture.md from it, so the
 * rule and its description cannot drift apart. Folder names are relative to src/.
 */

/** Tiers, top to bottom: a module imports its own folder and folders of lower tiers. */
const TIERS = [
  ['cli'],
  ['workers'],
  ['app'],
  ['config'],
  ['api', 'policy-tools', 'gateway'],
  ['authz', 'sessions', 'auth', 'audit'],
  ['policy'],
  ['http', 'domain', 'observability', 'threads'],
];

/** The only imports allowed between folders of one tier (they are acyclic). */
const SAME_TIER = {
  api: ['gateway', 'policy-tools'],
  auth: ['sessions', 'audit'],
  sessions: ['audit'],
  http: ['domain'],
  observability: ['domain'],
  threads: ['domain'],
};

/**
 * Folders of lower tiers a folder still may not import. config/ is the configuration's schema, loading and checks: it
 * knows nothing of how a request is answered (the /iam app, the proxy, the policy tools), so a route's schema or a
 * proxy detail can never become part of reading the configuration.
 */
const NOT_BELOW = {
  config: ['api', 'gateway', 'policy-tools'],
};

/** adapters/ stand beside the tiers: they implement domain interfaces and import only these. */
const ADAPTER_MAY_IMPORT = ['domain', 'observability', 'threads'];

/**
 * The folders that choose adapters: app/ (the wiring), cli/ (commands that open a database or a store themselves:
 * migrate, provision, tokens, policy replay) and config/ (it checks a Redis URL with the Redis adapter's parser).
 */
const COMPOSITION_ROOT = ['app', 'cli', 'config'];

/** The `iam-gateway/host` client library: it imports nothing of the gateway, and nothing of the gateway imports it. */
const HOST_LIBRARY = 'host';

/**
 * Modules nothing imports: the package API, the host library, the CLI, the database thread (started by file path),
 * the V8 tuning that bin/iam-gateway.js and scripts/demo.js load before anything else, and the endpoint table that
 * scripts/endpoints-reference.js renders.
 */
const ENTRY_POINTS = ['src/index.ts', 'src/host/index.ts', 'src/cli/main.ts', 'src/adapters/postgres/database-thread-worker.ts', 'src/app/gc-tuning.ts', 'src/api/endpoints-reference.ts'];

/**
 * Where each runtime library may be imported. Every package of `dependencies` in package.json matches a row
 * (test/unit/architecture-rule.test.ts checks it; an import of one that matches none breaks `library-has-a-place`).
 * `packages` are regular expressions for whole names (a scope's packages with `@scope/[^/]+`); each one's @types/
 * package is bound with it, since a type-only import is a dependency too. `folders` are folders of src/ (a subfolder
 * such as `auth/oidc` binds tighter); a library is refused everywhere else in src/, src/index.ts included.
 * Node built-ins are free everywhere.
 */
const LIBRARIES = [
  {
    rule: 'database-packages-only-in-adapters',
    what: 'the ORM and the database drivers',
    packages: ['@mikro-orm/[^/]+', 'knex', 'pg', 'pg-[^/]+', 'postgres-[^/]+', '@electric-sql/pglite[^/]*'],
    folders: ['adapters'],
    why: 'postgres/ and pglite/ implement the domain/ storage seams; everything else, app/ included (it wires the adapters), sees those interfaces',
  },
  {
    rule: 'redis-packages-only-in-adapters',
    what: 'the Redis client (and its Cluster slot function)',
    packages: ['ioredis', 'cluster-key-slot'],
    folders: ['adapters'],
    why: 'redis/ implements the domain/ token-store seams; everything else, app/ included, sees those interfaces',
  },
  {
    rule: 'web-framework-only-in-api',
    what: 'the web framework and the schemas of its bodies',
    packages: ['koa', 'koa-[^/]+', '@koa/[^/]+', '@sinclair/typebox', 'ajv-formats'],
    folders: ['api'],
    why: 'the /iam app: routes, body schemas and their formats, OpenAPI; gateway/ answers on node:http and undici, and the tiers below know no web framework',
  },
  {
    rule: 'schema-validator-only-where-documents-are-checked',
    what: 'the JSON-schema validator',
    packages: ['ajv'],
    folders: ['api', 'auth', 'config', 'policy', 'policy-tools'],
    why: 'each checks the documents it reads: /iam bodies, identities and users files, the configuration and provisioning files, policies, policy test cases',
  },
  {
    rule: 'yaml-reader-only-where-files-are-read',
    what: 'the YAML reader',
    packages: ['yaml'],
    folders: ['auth', 'config', 'policy', 'policy-tools'],
    why: 'users files, the configuration and provisioning files (and their error positions), policies, policy test cases and coverage',
  },
  {
    rule: 'fast-yaml-reader-only-in-policy',
    what: "the policy parser's fast YAML reader",
    packages: ['js-yaml'],
    folders: ['policy'],
    why: 'one reading of a policy file: the fast reader sits beside the full one in policy/policy-parser.ts, never a second meaning elsewhere',
  },
  {
    rule: 'http-client-only-in-gateway-auth-authz',
    what: 'the outbound HTTP client',
    packages: ['undici'],
    folders: ['gateway', 'auth', 'authz'],
    why: "the forwarder to the host (gateway/), the HTTP authenticator (auth/), the resource resolver (authz/), each with its own bounded pool",
  },
  {
    rule: 'openid-client-only-in-auth-oidc',
    what: 'the OpenID Connect relying party',
    packages: ['openid-client'],
    folders: ['auth/oidc'],
    why: 'discovery, the code flow and the id token, in auth/oidc/relying-party.ts',
  },
  {
    rule: 'jose-only-in-auth-oidc-and-host',
    what: 'JWT verification',
    packages: ['jose'],
    folders: ['auth/oidc', 'host'],
    why: "the provider's tokens (auth/oidc/) and, in the host library, the gateway's assertion (host/ uses no other library)",
  },
  {
    rule: 'password-hashing-only-in-auth',
    what: 'password hashing (argon2id)',
    packages: ['@node-rs/argon2'],
    folders: ['auth'],
    why: "the verifier threads behind the login CPU queue; a hash computed elsewhere would escape that bound",
  },
  {
    rule: 'casl-only-in-authz',
    what: 'the ability library (CASL)',
    packages: ['@casl/ability'],
    folders: ['authz'],
    why: 'compiled grants; everything else asks the decision engine',
  },
  {
    rule: 'logger-only-in-observability-and-app',
    what: 'the logger (pino)',
    packages: ['pino'],
    folders: ['observability', 'app'],
    why: 'the loggers and their one redaction layer (observability/), and the log destinations the composition root chooses (app/); a logger made elsewhere would skip the redaction',
  },
  {
    rule: 'metrics-only-in-observability-app-workers',
    what: 'the Prometheus client',
    packages: ['prom-client'],
    folders: ['observability', 'app', 'workers'],
    why: "the metrics and their registry (observability/), the management port that serves it (app/), the cluster's aggregated /metrics (workers/)",
  },
  {
    rule: 'tracing-api-only-in-observability-and-gateway',
    what: 'the OpenTelemetry API',
    packages: ['@opentelemetry/api'],
    folders: ['observability', 'gateway'],
    why: "the request spans (observability/tracing.ts) and the proxy's own span (gateway/proxy-handler.ts)",
  },
  {
    rule: 'tracing-sdk-only-in-app',
    what: 'the OpenTelemetry SDK and its exporters',
    packages: ['@opentelemetry/core', '@opentelemetry/resources', '@opentelemetry/sdk-[^/]+', '@opentelemetry/exporter-[^/]+', '@opentelemetry/otlp-[^/]+'],
    folders: ['app'],
    why: 'the composition root starts the provider and its exporter (app/tracing.ts), and loads them only when tracing is on',
  },
];

/** Outside src/, cruised with it: released schema history, listed in one module of src/. */
const MIGRATIONS = {
  folder: 'migrations',
  packages: ['@mikro-orm/migrations'],
  list: 'src/adapters/postgres/migration-list.ts',
};

/** Folders of the repository that are not published (package.json `files`): nothing in src/ or migrations/ imports them. */
const UNSHIPPED = ['bench', 'scripts', 'examples', 'test'];

/** The packages a name stands for: itself and its @types/ package (`@scope/name` → `@types/scope__name`). */
function withTypes(pattern) {
  const types = pattern.startsWith('@') ? `@types/${pattern.slice(1).replace('/', '__')}` : `@types/${pattern}`;
  return [pattern, types];
}

/** The names of `dependencies` that match no row of LIBRARIES. */
function unplacedDependencies(dependencies, libraries = LIBRARIES) {
  const placed = libraries.flatMap((row) => row.packages.map((pattern) => new RegExp(`^(?:${pattern})$`)));
  return dependencies.filter((name) => !placed.some((pattern) => pattern.test(name)));
}

module.exports = {
  TIERS,
  SAME_TIER,
  NOT_BELOW,
  ADAPTER_MAY_IMPORT,
  COMPOSITION_ROOT,
  HOST_LIBRARY,
  ENTRY_POINTS,
  LIBRARIES,
  MIGRATIONS,
  UNSHIPPED,
  withTypes,
  unplacedDependencies,
};
