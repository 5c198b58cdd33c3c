#!/usr/bin/env node
'use strict';
/**
 * `npm run docs:architecture`: rewrites the generated blocks of docs/architecture.md (the tier list, the library
 * table) from architecture-rules.cjs, the data `.dependency-cruiser.cjs` builds the layer rule from, so the page
 * says what `npm run lint:deps` enforces. `--check` only reports whether the page is current (exit 1 when not).
 * test/unit/architecture-doc.test.ts holds the page to it.
 */
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const ROOT = join(__dirname, '..');
const DOC = join(ROOT, 'docs', 'architecture.md');
const END = '<!-- /generated -->';
const marker = (name) => `<!-- generated: ${name} (npm run docs:architecture, from architecture-rules.cjs) -->`;

const code = (text) => `\`${text}\``;
/** A package pattern as a reader writes it: `@mikro-orm/[^/]+` → `@mikro-orm/*`. */
const shownPackage = (pattern) => code(pattern.replace(/\[\^\/\][+*]/g, '*'));
const shownFolder = (folder) => code(`${folder}/`);
const cell = (text) => text.replace(/\|/g, '\\|');

/** The rules the prose names must be rules of the configuration: a renamed rule fails here, not in a reader's search. */
function ruleName(name, ruleNames) {
  if (!ruleNames.includes(name)) throw new Error(`docs:architecture: .dependency-cruiser.cjs has no rule ${name}`);
  return code(name);
}

/** "cli → workers → … → http, domain, observability, threads", in a code block, then the lower folders a folder may not import. */
function renderTiers({ TIERS, NOT_BELOW }) {
  const exceptions = Object.entries(NOT_BELOW).map(
    ([folder, refused]) => `\`${folder}/\` imports none of ${refused.map(shownFolder).join(', ')}, although they sit below it (\`layer-${folder}\`).`,
  );
  return ['```', TIERS.map((tier) => tier.join(', ')).join('  →  '), '```', '', ...(exceptions.length ? [...exceptions, ''] : [])].join('\n');
}

/** One row per library rule, then the rules about packages and folders that no row states. */
function renderLibraries({ LIBRARIES, MIGRATIONS, UNSHIPPED }, ruleNames) {
  const rows = LIBRARIES.map(
    (row) =>
      `| ${cell(row.what)}: ${row.packages.map(shownPackage).join(', ')} | ${row.folders.map(shownFolder).join(', ')} | ${cell(row.why)} | ${ruleName(row.rule, ruleNames)} |`,
  );
  const list = (items) => (items.length === 1 ? items[0] : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`);
  return [
    '| packages (their `@types/` included) | imported only in | why | rule |',
    '|---|---|---|---|',
    ...rows,
    '',
    `A package that no row names is imported nowhere in \`src/\` (${ruleName('library-has-a-place', ruleNames)}); node built-ins are free everywhere.`,
    `\`${MIGRATIONS.folder}/\` (outside \`src/\`, cruised with it) import ${MIGRATIONS.packages.map(code).join(', ')} and node built-ins only: never \`src/\`, another migration or another package (${ruleName('migrations-import-only-the-migration-library', ruleNames)}), and only ${code(MIGRATIONS.list)} imports a migration (${ruleName('migrations-only-through-the-migration-list', ruleNames)}).`,
    `Nothing in \`src/\` or \`${MIGRATIONS.folder}/\` imports ${list(UNSHIPPED.map(shownFolder))}: they are not published (${ruleName('not-to-unshipped-folders', ruleNames)}).`,
    '',
  ].join('\n');
}

/** The blocks of the page, by marker name, and what each holds. */
function renderBlocks(rules, ruleNames) {
  return { tiers: renderTiers(rules), libraries: renderLibraries(rules, ruleNames) };
}

/** `text` with every generated block replaced by its rendering; throws when a block's markers are missing. */
function renderDocument(text, rules = require('../architecture-rules.cjs'), ruleNames = configuredRuleNames()) {
  let result = text;
  for (const [name, body] of Object.entries(renderBlocks(rules, ruleNames))) {
    const begin = result.indexOf(`${marker(name)}\n`);
    const end = result.indexOf(END, begin);
    if (begin === -1 || end === -1) throw new Error(`docs:architecture: docs/architecture.md has no ${marker(name)} … ${END} block`);
    const from = begin + marker(name).length + 1;
    result = result.slice(0, from) + body + result.slice(end);
  }
  return result;
}

function configuredRuleNames() {
  return require('../.dependency-cruiser.cjs').forbidden.map((rule) => rule.name);
}

module.exports = { renderDocument, renderTiers, renderLibraries, marker, END };

if (require.main === module) {
  const text = readFileSync(DOC, 'utf8');
  let updated;
  try {
    updated = renderDocument(text);
  } catch (error) {
    console.error(error.message);
    process.exit(1);
  }
  if (updated === text) {
    console.log('docs:architecture: docs/architecture.md is current');
  } else if (process.argv.includes('--check')) {
    console.error('docs:architecture: docs/architecture.md is not current; run `npm run docs:architecture`');
    process.exit(1);
  } else {
    writeFileSync(DOC, updated);
    console.log('docs:architecture: rewrote the tier list and the library table of docs/architecture.md');
  }
}
