/**
 * dependency-cruiser: the layer rule of src/ and migrations/ (`npm run lint:deps`; test/unit/architecture-rule.test.ts
 * shows each rule failing on a fixture tree).
 *
 * Tiers, top to bottom; a module imports its own folder and folders of lower tiers, and, inside its own tier,
 * only the edges listed in SAME_TIER (they are acyclic):
 *   cli  |  workers  |  app  |  config  |  api, policy-tools, gateway  |  authz, sessions, auth, audit  |  policy  |  http, domain, observability, threads
 * adapters/ stand beside the tiers: they implement domain interfaces, import only domain, observability and
 * threads, and only the composition root (app/, cli/, config/) imports them. host/ (the `iam-gateway/host` client library) stands apart: it imports nothing
 * of the gateway, and nothing imports it. src/index.ts (the published package API) may import any tier but no
 * adapter, and nothing in src/ imports it.
 * Libraries are placed too (the *_PACKAGES lists below): the ORM and the database drivers (MikroORM, pg, PGlite) and the
 * Redis client only in adapters/; the HTTP framework and the schema library (Koa, @koa/router, koa-body, TypeBox) only
 * in api/, the one folder that uses them (not app/, not gateway/, not the tiers below).
 * migrations/ (outside src/, cruised with it) import only @mikro-orm/migrations and node built-ins, never src/, and
 * each one is listed in adapters/postgres/migration-list.ts (reachable from an entry point).
 * Type-only imports count (`tsPreCompilationDeps`): a type is a dependency too.
 */
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

/** The only imports allowed between folders of one tier. */
const SAME_TIER = {
  api: ['gateway', 'policy-tools'],
  auth: ['sessions', 'audit'],
  sessions: ['audit'],
  http: ['domain'],
  observability: ['domain'],
  threads: ['domain'],
};

const ADAPTER_MAY_IMPORT = ['domain', 'observability', 'threads'];

/**
 * The folders that choose adapters: app/ (the wiring), cli/ (commands that open a database or a store themselves:
 * migrate, provision, tokens, policy replay) and config/ (it checks a Redis URL with the Redis adapter's parser).
 */
const COMPOSITION_ROOT = ['app', 'cli', 'config'];

/**
 * Modules nothing imports: the package API, the CLI, the database thread (started by file path), and the V8 tuning
 * that bin/iam-gateway.js and scripts/demo.js load before anything else.
 */
const ENTRY_POINTS = ['src/index.ts', 'src/host/index.ts', 'src/cli/main.ts', 'src/adapters/postgres/database-thread-worker.ts', 'src/app/gc-tuning.ts'];

/**
 * Packages by name, as regular expressions (a scope's packages with `@scope/[^/]+`). Their @types/ packages are listed
 * with them: a type-only import is a dependency too.
 */
const DATABASE_PACKAGES = ['@mikro-orm/[^/]+', 'knex', 'pg', 'pg-[^/]+', 'postgres-[^/]+', '@types/pg', '@electric-sql/pglite[^/]*'];
const REDIS_PACKAGES = ['ioredis', 'cluster-key-slot'];
const WEB_FRAMEWORK_PACKAGES = ['koa', 'koa-[^/]+', '@koa/[^/]+', '@types/koa', '@types/koa-[^/]+', '@types/koa__[^/]+', '@sinclair/typebox'];
const MIGRATION_PACKAGES = ['@mikro-orm/migrations'];

/** The only folders of src/ that import the WEB_FRAMEWORK_PACKAGES: api/ (the /iam Koa app, its TypeBox schemas). */
const WEB_FRAMEWORK_FOLDERS = ['api'];

const folders = (names) => `^src/(${names.join('|')})/`;
/**
 * A resolved npm package: `node_modules/<name>/…`; under test/fixtures/architecture the cruiser resolves to the
 * repository's node_modules, `../../../node_modules/<name>/…`.
 */
const packages = (names) => `(^|/)node_modules/(${names.join('|')})/`;
const escape = (path) => path.replace(/[.]/g, '\\.');
const ALL_TIERED = TIERS.flat();

/** One rule per tiered folder (domain's is the stricter rule below): the folders it must not import. */
const layerRules = TIERS.flatMap((tier, level) =>
  tier
    .filter((folder) => folder !== 'domain')
    .map((folder) => {
      const above = TIERS.slice(0, level).flat();
      const sameTierNotAllowed = tier.filter((other) => other !== folder && !(SAME_TIER[folder] ?? []).includes(other));
      const forbidden = [...above, ...sameTierNotAllowed];
      const allowed = [...(SAME_TIER[folder] ?? []), ...TIERS.slice(level + 1).flat()];
      return forbidden.length === 0
        ? null
        : {
            name: `layer-${folder}`,
            comment: `${folder}/ may import only its own folder${allowed.length ? ` and ${allowed.join(', ')}` : ''} (.dependency-cruiser.cjs explains the tiers)`,
            severity: 'error',
            from: { path: `^src/${folder}/` },
            to: { path: folders(forbidden) },
          };
    })
    .filter(Boolean),
);

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'host-library-stands-alone',
      comment: 'host/ is the client library a host runs (iam-gateway/host): it talks to the gateway over HTTP and imports nothing of the gateway',
      severity: 'error',
      from: { path: '^src/host/' },
      to: { path: '^src/', pathNot: '^src/host/' },
    },
    {
      name: 'nothing-imports-the-host-library',
      comment: 'the gateway never imports host/ (it is another program\'s library)',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/host/' },
      to: { path: '^src/host/' },
    },
    {
      name: 'domain-imports-only-domain',
      comment: 'domain/ is the bottom of the layering: records, interfaces and problems, with no other src/ import',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: { path: '^src/', pathNot: '^src/domain/' },
    },
    {
      name: 'adapters-import-only-domain-observability-threads',
      comment: `adapters/ implement domain interfaces: they import only ${ADAPTER_MAY_IMPORT.join(', ')} (and adapters/)`,
      severity: 'error',
      from: { path: '^src/adapters/' },
      to: { path: '^src/', pathNot: folders(['adapters', ...ADAPTER_MAY_IMPORT]) },
    },
    {
      name: 'only-the-composition-root-imports-adapters',
      comment: `adapters are chosen and wired by the composition root (${COMPOSITION_ROOT.join('/, ')}/); everything else sees domain interfaces`,
      severity: 'error',
      from: { path: '^src/', pathNot: folders([...COMPOSITION_ROOT, 'adapters']) },
      to: { path: '^src/adapters/' },
    },
    {
      name: 'database-packages-only-in-adapters',
      comment:
        'the ORM and the database drivers (MikroORM, knex, pg, PGlite) are imported in adapters/ only: postgres/ and pglite/ implement the domain/ storage seams, everything else (app/ included, which wires the adapters) sees those interfaces',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/adapters/' },
      to: { path: packages(DATABASE_PACKAGES) },
    },
    {
      name: 'redis-packages-only-in-adapters',
      comment:
        'the Redis client (ioredis, and cluster-key-slot for Cluster slots) is imported in adapters/ only: redis/ implements the domain/ token-store seam, everything else (app/ included) sees that interface',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/adapters/' },
      to: { path: packages(REDIS_PACKAGES) },
    },
    {
      name: 'web-framework-only-in-api',
      comment: `Koa, its router and body parser, and TypeBox are imported in ${WEB_FRAMEWORK_FOLDERS.map((folder) => `${folder}/`).join(', ')} only (the /iam app: routes, schemas, OpenAPI); gateway/ answers on node:http and undici, and the tiers below know no web framework`,
      severity: 'error',
      from: { path: '^src/', pathNot: folders(WEB_FRAMEWORK_FOLDERS) },
      to: { path: packages(WEB_FRAMEWORK_PACKAGES) },
    },
    {
      name: 'migrations-import-only-the-migration-library',
      comment: `a migration is released schema history: it imports ${MIGRATION_PACKAGES.join(', ')} and node built-ins only, never src/ (which keeps changing), another migration or another package`,
      severity: 'error',
      from: { path: '^migrations/' },
      to: { dependencyTypesNot: ['core'], pathNot: packages(MIGRATION_PACKAGES) },
    },
    {
      name: 'config-through-its-index',
      comment: 'outside config/, the configuration is imported from config/index.ts only',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/config/' },
      to: { path: '^src/config/', pathNot: '^src/config/index\\.ts$' },
    },
    {
      name: 'problems-through-their-index',
      comment: 'outside domain/problem/, the problem catalog and errors are imported from domain/problem/index.ts only',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/domain/problem/' },
      to: { path: '^src/domain/problem/', pathNot: '^src/domain/problem/index\\.ts$' },
    },
    {
      name: 'src-folder-in-a-tier',
      comment: 'every folder of src/ belongs to a tier in .dependency-cruiser.cjs (or is adapters/, or the host library host/): add it there',
      severity: 'error',
      from: { path: '^src/[^/]+/', pathNot: folders([...ALL_TIERED, 'adapters', 'host']) },
      to: {},
    },
    {
      name: 'nothing-imports-the-package-entry',
      comment: 'src/index.ts is the published API; modules of src/ import the module that defines a thing',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/index\\.ts$' },
    },
    {
      name: 'no-circular',
      comment: 'module-level import cycle',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-orphans',
      comment: 'a module with no imports and no importers: use it or remove it',
      severity: 'error',
      from: { orphan: true, pathNot: ['\\.d\\.ts$', ...ENTRY_POINTS.map((path) => `^${escape(path)}$`)] },
      to: {},
    },
    {
      name: 'reachable-from-an-entry-point',
      comment: `not reachable from ${ENTRY_POINTS.join(', ')}: dead code, an entry point to list in .dependency-cruiser.cjs, or a migration to list in src/adapters/postgres/migration-list.ts`,
      severity: 'error',
      from: { path: `^(${ENTRY_POINTS.map(escape).join('|')})$` },
      to: { path: '^(src|migrations)/', pathNot: [`^(${ENTRY_POINTS.map(escape).join('|')})$`, '\\.d\\.ts$'], reachable: false },
    },
    {
      name: 'not-to-dev-dep',
      comment: 'src/ is published: it must not import a devDependency (type-only imports included: they end up in the .d.ts)',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'] },
    },
    {
      name: 'no-non-package-json',
      comment: 'a package that package.json does not list',
      severity: 'error',
      from: {},
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] },
    },
    {
      name: 'not-to-test',
      comment: 'src/ must not import test code',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^test/' },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'an import that does not resolve to a file or package',
      severity: 'error',
      from: {},
      // A subpath only a package's `exports` map declares (Node resolves it; the cruiser's node10 resolution does not).
      to: { couldNotResolve: true, pathNot: '^@opentelemetry/otlp-exporter-base/node-http$' },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
  },
};
