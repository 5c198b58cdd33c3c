/**
 * The layer rule of src/ and migrations/ (.dependency-cruiser.cjs, docs/architecture.md): the real configuration
 * refuses each kind of import it is meant to refuse (a fake src/ and migrations/ in test/fixtures/architecture, one
 * offending import per rule and some allowed ones), and the real src/ and migrations/ break none of it.
 * dependency-cruiser is an ES module; it runs here as the CLI `npm run lint:deps` uses, on the same folders.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { architectureRules } from '../support/architecture';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');
/** The folders `npm run lint:deps` cruises (the first test holds package.json to them). */
const CRUISED = ['src', 'migrations'];

interface Violation {
  type: string;
  from: string;
  to: string;
  unresolvedTo?: string;
  dependencyTypes?: string[];
  rule: { name: string };
  cycle?: Array<{ name: string }>;
}

/** `rule: from → to` (a package by its name, a cycle through all its modules, a module rule without `→`). */
function describeViolation(violation: Violation): string {
  const { name } = violation.rule;
  if (violation.type === 'module') return `${name}: ${violation.from}`;
  if (violation.cycle) return `${name}: ${[violation.from, ...violation.cycle.map((step) => step.name)].join(' → ')}`;
  const isPackage = violation.dependencyTypes?.some((type) => type.startsWith('npm')) ?? false;
  return `${name}: ${violation.from} → ${isPackage ? violation.unresolvedTo : violation.to}`;
}

/** Cruises `src` and `migrations` under `cwd` with the real configuration: its violations, described and sorted. */
function cruise(cwd: string): string[] {
  const run = spawnSync(process.execPath, [CLI, ...CRUISED, '--config', CONFIG, '--output-type', 'json'], { cwd, encoding: 'utf8', timeout: 20_000 });
  if (run.error) throw run.error;
  if (run.stdout.trim() === '') throw new Error(`dependency-cruiser printed nothing (exit ${run.status}):\n${run.stderr}`);
  const result = JSON.parse(run.stdout) as { summary: { violations: Violation[] } };
  return result.summary.violations.map(describeViolation).sort();
}

describe('#12 the layer rule (.dependency-cruiser.cjs)', () => {
  it('npm run lint:deps cruises src/ and migrations/', () => {
    const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts['lint:deps']).toBe(`depcruise ${CRUISED.join(' ')} --config .dependency-cruiser.cjs --output-type err-long`);
  });

  it('refuses each forbidden import of the fixture tree, naming the rule, and nothing else', () => {
    expect(cruise(join(ROOT, 'test', 'fixtures', 'architecture'))).toEqual(
      [
        // tiers: sideways in the top tier, against the tier-2 order, upward, sideways in the bottom tier
        'layer-policy-tools: src/policy-tools/check.ts → src/gateway/front-door.ts',
        'layer-sessions: src/sessions/session.ts → src/auth/login.ts',
        'layer-policy: src/policy/loader.ts → src/gateway/front-door.ts',
        'layer-observability: src/observability/metrics.ts → src/http/problem.ts',
        // domain imports nothing else of src/, a type-only import included
        'domain-imports-only-domain: src/domain/record.ts → src/policy/rule.ts',
        // adapters: what they import, and who imports them (src/index.ts included)
        'adapters-import-only-domain-observability-threads: src/adapters/memory/memory-store.ts → src/http/problem.ts',
        'only-the-composition-root-imports-adapters: src/gateway/front-door.ts → src/adapters/memory/memory-store.ts',
        'only-the-composition-root-imports-adapters: src/index.ts → src/adapters/memory/memory-store.ts',
        // the composition root has tiers too: config/ below app/
        'layer-config: src/config/settings.ts → src/app/wiring.ts',
        // ... and knows nothing of how a request is answered, although api/ is a lower tier (NOT_BELOW)
        'layer-config: src/config/route-schema.ts → src/api/routes.ts',
        // and the configuration is read through config/index.ts only
        'config-through-its-index: src/cli/main.ts → src/config/settings.ts',
        // cycles, dead modules, devDependencies
        'no-circular: src/auth/login.ts → src/sessions/session.ts → src/auth/login.ts',
        'no-orphans: src/observability/unused.ts',
        'reachable-from-an-entry-point: src/observability/unused.ts',
        'reachable-from-an-entry-point: src/threads/dead.ts',
        'not-to-dev-dep: src/http/problem.ts → fast-check',
        // unpublished folders: test/, bench/, scripts/, examples/, from src/ and from a migration
        'not-to-unshipped-folders: src/http/problem.ts → test/helper.ts',
        'not-to-unshipped-folders: src/cli/tooling.ts → bench/workload.ts',
        'not-to-unshipped-folders: src/cli/tooling.ts → examples/host/app.ts',
        'not-to-unshipped-folders: src/cli/tooling.ts → scripts/seed.ts',
        'not-to-unshipped-folders: migrations/Migration20990101000002_unlisted.ts → scripts/seed.ts',
        // libraries outside their folders (type-only imports, each one's row of architecture-rules.cjs)
        'database-packages-only-in-adapters: src/domain/record.ts → @mikro-orm/core',
        'redis-packages-only-in-adapters: src/authz/decide.ts → ioredis',
        'web-framework-only-in-api: src/policy/rule.ts → koa',
        'web-framework-only-in-api: src/sessions/session.ts → @sinclair/typebox',
        'schema-validator-only-where-documents-are-checked: src/gateway/body-check.ts → ajv',
        'yaml-reader-only-where-files-are-read: src/api/yaml-body.ts → yaml',
        'fast-yaml-reader-only-in-policy: src/policy-tools/quick-parse.ts → js-yaml',
        'openid-client-only-in-auth-oidc: src/auth/oidc-shortcut.ts → openid-client',
        'jose-only-in-auth-oidc-and-host: src/sessions/jwt-session.ts → jose',
        'password-hashing-only-in-auth: src/api/hash-route.ts → @node-rs/argon2',
        'casl-only-in-authz: src/policy/abilities.ts → @casl/ability/dist/types',
        'logger-only-in-observability-and-app: src/gateway/own-logger.ts → pino',
        'metrics-only-in-observability-app-workers: src/authz/counter.ts → prom-client',
        'tracing-api-only-in-observability-and-gateway: src/authz/span.ts → @opentelemetry/api',
        'tracing-sdk-only-in-app: src/observability/exporter.ts → @opentelemetry/sdk-trace-node',
        // the host library may use jose and nothing else
        'http-client-only-in-gateway-auth-authz: src/host/index.ts → undici',
        // a package with no row at all (here not even in package.json)
        'library-has-a-place: src/http/colors.ts → picocolors/types',
        'no-non-package-json: src/http/colors.ts → picocolors/types',
        // migrations: src/, other packages than the migration library, one no adapter lists, and only the list imports them
        'migrations-import-only-the-migration-library: migrations/Migration20990101000001_reads_src.ts → src/http/problem.ts',
        'migrations-import-only-the-migration-library: migrations/Migration20990101000002_unlisted.ts → @mikro-orm/core',
        'migrations-import-only-the-migration-library: migrations/Migration20990101000002_unlisted.ts → scripts/seed.ts',
        'reachable-from-an-entry-point: migrations/Migration20990101000002_unlisted.ts',
        'migrations-only-through-the-migration-list: src/adapters/memory/memory-store.ts → migrations/Migration20990101000001_reads_src.ts',
      ].sort(),
    );
  });

  it('places every runtime dependency of package.json in the library table of architecture-rules.cjs', () => {
    const { dependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const names = Object.keys(dependencies);
    expect(architectureRules.unplacedDependencies(names)).toEqual([]);
    // A dependency added without a row is reported by name.
    expect(architectureRules.unplacedDependencies([...names, 'left-pad', '@opentelemetry/semantic-conventions'])).toEqual(['left-pad', '@opentelemetry/semantic-conventions']);
  });

  it('the real src/ and migrations/ break none of the rules', () => {
    expect(cruise(ROOT)).toEqual([]);
  });
});
