/**
 * dependency-cruiser: the layer rule of src/ and migrations/ (`npm run lint:deps`; test/unit/architecture-rule.test.ts
 * shows each rule failing on a fixture tree). The facts (tiers, same-tier edges, adapters, entry points, the place of
 * every runtime library, the migrations, the unpublished folders) are data in architecture-rules.cjs, which
 * docs/architecture.md is rendered from (`npm run docs:architecture`); this file turns them into rules.
 *
 * A module imports its own folder and folders of lower tiers, and, inside its own tier, only the edges of SAME_TIER.
 * adapters/ import only domain, observability and threads, and only the composition root imports them. host/ (the
 * `iam-gateway/host` client library) imports nothing of the gateway, and nothing imports it. src/index.ts (the
 * published package API) may import any tier but no adapter, and nothing in src/ imports it.
 * Each runtime library may be imported only in the folders of its row of LIBRARIES (with its @types/ package); one
 * that has no row may be imported nowhere. migrations/ import only their migration library and node built-ins, and
 * only the migration list imports them. Nothing in src/ or migrations/ imports a folder that is not published.
 * Type-only imports count (`tsPreCompilationDeps`): a type is a dependency too.
 */
const { TIERS, SAME_TIER, NOT_BELOW, ADAPTER_MAY_IMPORT, COMPOSITION_ROOT, HOST_LIBRARY, ENTRY_POINTS, LIBRARIES, MIGRATIONS, UNSHIPPED, withTypes } = require('./architecture-rules.cjs');

const escape = (path) => path.replace(/[.]/g, '\\.');
const folders = (names) => `^src/(${names.map(escape).join('|')})/`;
/**
 * A resolved npm package: `node_modules/<name>/…` (under test/fixtures/architecture, or from a worktree whose
 * node_modules is a link, the path starts with `../`); a subpath only a package's `exports` map declares stays
 * unresolved and keeps its bare name.
 */
const packages = (names) => `(^|/)node_modules/(${names.join('|')})/|^(${names.join('|')})(/|$)`;
const ALL_TIERED = TIERS.flat();
const PLACED_PACKAGES = LIBRARIES.flatMap((row) => row.packages.flatMap(withTypes));

/** One rule per tiered folder (domain's is the stricter rule below): the folders it must not import. */
const layerRules = TIERS.flatMap((tier, level) =>
  tier
    .filter((folder) => folder !== 'domain')
    .map((folder) => {
      const above = TIERS.slice(0, level).flat();
      const sameTierNotAllowed = tier.filter((other) => other !== folder && !(SAME_TIER[folder] ?? []).includes(other));
      const notBelow = NOT_BELOW[folder] ?? [];
      const forbidden = [...above, ...sameTierNotAllowed, ...notBelow];
      const allowed = [...(SAME_TIER[folder] ?? []), ...TIERS.slice(level + 1).flat()].filter((other) => !notBelow.includes(other));
      return forbidden.length === 0
        ? null
        : {
            name: `layer-${folder}`,
            comment: `${folder}/ may import only its own folder${allowed.length ? ` and ${allowed.join(', ')}` : ''} (the tiers of architecture-rules.cjs)`,
            severity: 'error',
            from: { path: `^src/${folder}/` },
            to: { path: folders(forbidden) },
          };
    })
    .filter(Boolean),
);

/** One rule per row of LIBRARIES: the library (and its @types/) from anywhere in src/ but the row's folders. */
const libraryRules = LIBRARIES.map((row) => ({
  name: row.rule,
  comment: `${row.what} (${row.packages.join(', ')}) is imported in ${row.folders.map((folder) => `${folder}/`).join(', ')} only: ${row.why}`,
  severity: 'error',
  from: { path: '^src/', pathNot: folders(row.folders) },
  to: { path: packages(row.packages.flatMap(withTypes)) },
}));

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'host-library-stands-alone',
      comment: 'host/ is the client library a host runs (iam-gateway/host): it talks to the gateway over HTTP and imports nothing of the gateway',
      severity: 'error',
      from: { path: `^src/${HOST_LIBRARY}/` },
      to: { path: '^src/', pathNot: `^src/${HOST_LIBRARY}/` },
    },
    {
      name: 'nothing-imports-the-host-library',
      comment: 'the gateway never imports host/ (it is another program\'s library)',
      severity: 'error',
      from: { path: '^src/', pathNot: `^src/${HOST_LIBRARY}/` },
      to: { path: `^src/${HOST_LIBRARY}/` },
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
    ...libraryRules,
    {
      name: 'library-has-a-place',
      comment:
        'a library without a row in LIBRARIES of architecture-rules.cjs may be imported nowhere in src/: give it its folders there (the library table of docs/architecture.md is rendered from it)',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '(^|/)node_modules/', pathNot: packages(PLACED_PACKAGES), dependencyTypesNot: ['npm-dev'] },
    },
    {
      name: 'migrations-import-only-the-migration-library',
      comment: `a migration is released schema history: it imports ${MIGRATIONS.packages.join(', ')} and node built-ins only, never src/ (which keeps changing), another migration or another package`,
      severity: 'error',
      from: { path: `^${MIGRATIONS.folder}/` },
      to: { dependencyTypesNot: ['core'], pathNot: packages(MIGRATIONS.packages) },
    },
    {
      name: 'migrations-only-through-the-migration-list',
      comment: `only ${MIGRATIONS.list} imports a migration: the migrator runs what it lists, in its order`,
      severity: 'error',
      from: { path: '^src/', pathNot: `^${escape(MIGRATIONS.list)}$` },
      to: { path: `^${MIGRATIONS.folder}/` },
    },
    {
      name: 'not-to-unshipped-folders',
      comment: `src/ and ${MIGRATIONS.folder}/ are published; ${UNSHIPPED.map((folder) => `${folder}/`).join(', ')} are not (package.json "files"), so an import of them breaks the installed package`,
      severity: 'error',
      from: { path: `^(src|${MIGRATIONS.folder})/` },
      to: { path: `^(${UNSHIPPED.join('|')})/` },
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
      comment: 'every folder of src/ belongs to a tier in architecture-rules.cjs (or is adapters/, or the host library host/): add it there',
      severity: 'error',
      from: { path: '^src/[^/]+/', pathNot: folders([...ALL_TIERED, 'adapters', HOST_LIBRARY]) },
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
      comment: `not reachable from ${ENTRY_POINTS.join(', ')}: dead code, an entry point to list in architecture-rules.cjs, or a migration to list in ${MIGRATIONS.list}`,
      severity: 'error',
      from: { path: `^(${ENTRY_POINTS.map(escape).join('|')})$` },
      to: { path: `^(src|${MIGRATIONS.folder})/`, pathNot: [`^(${ENTRY_POINTS.map(escape).join('|')})$`, '\\.d\\.ts$'], reachable: false },
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
