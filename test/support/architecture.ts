/**
 * The architecture data (architecture-rules.cjs) and the renderer of docs/architecture.md
 * (scripts/architecture-doc.js), typed for the tests: both are plain CommonJS that node and dependency-cruiser load
 * without a build.
 */
import { join } from 'node:path';

export const ROOT = join(__dirname, '..', '..');

export interface LibraryRow {
  rule: string;
  what: string;
  packages: string[];
  folders: string[];
  why: string;
}

export interface ArchitectureRules {
  TIERS: string[][];
  SAME_TIER: Record<string, string[]>;
  LIBRARIES: LibraryRow[];
  MIGRATIONS: { folder: string; packages: string[]; list: string };
  UNSHIPPED: string[];
  unplacedDependencies(dependencies: string[], libraries?: LibraryRow[]): string[];
}

export interface ArchitectureDoc {
  renderDocument(text: string, rules?: ArchitectureRules, ruleNames?: string[]): string;
  marker(name: string): string;
  END: string;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS data file outside the TypeScript project
export const architectureRules = require(join(ROOT, 'architecture-rules.cjs')) as ArchitectureRules;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain node script, loaded as its module
export const architectureDoc = require(join(ROOT, 'scripts', 'architecture-doc.js')) as ArchitectureDoc;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the dependency-cruiser configuration, as the CLI reads it
export const cruiserRuleNames = (require(join(ROOT, '.dependency-cruiser.cjs')) as { forbidden: Array<{ name: string }> }).forbidden.map((rule) => rule.name);
