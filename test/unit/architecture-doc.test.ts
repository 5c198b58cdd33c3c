/**
 * docs/architecture.md states the layer rule that `npm run lint:deps` enforces: its tier list and library table are
 * rendered from architecture-rules.cjs, the data .dependency-cruiser.cjs builds its rules from
 * (`npm run docs:architecture`), so a change to the data that is not regenerated fails here.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { architectureDoc, architectureRules, cruiserRuleNames, ROOT, type ArchitectureRules } from '../support/architecture';

const DOC = join(ROOT, 'docs', 'architecture.md');
const page = readFileSync(DOC, 'utf8');

/** The page as the data renders it, beside the page as written (equal when the page is current). */
const rendered = (rules: ArchitectureRules = architectureRules, text = page) => architectureDoc.renderDocument(text, rules, cruiserRuleNames);

describe('docs/architecture.md is rendered from the layer rule\'s own data', () => {
  it('holds exactly what architecture-rules.cjs renders (run `npm run docs:architecture` after changing it)', () => {
    expect(page).toBe(rendered());
  });

  it('shows the tier list and every library row, with its folders and its rule', () => {
    const tiers = page.slice(page.indexOf(architectureDoc.marker('tiers')), page.indexOf(architectureDoc.END, page.indexOf(architectureDoc.marker('tiers'))));
    expect(tiers).toContain(architectureRules.TIERS.map((tier) => tier.join(', ')).join('  →  '));
    for (const row of architectureRules.LIBRARIES) {
      const line = page.split('\n').find((text) => text.endsWith(`| \`${row.rule}\` |`));
      expect({ rule: row.rule, folders: line?.split(' | ')[1] }).toEqual({ rule: row.rule, folders: row.folders.map((folder) => `\`${folder}/\``).join(', ') });
    }
  });

  it('differs once the data changes: a library gains a folder, a tier moves', () => {
    const widened = { ...architectureRules, LIBRARIES: architectureRules.LIBRARIES.map((row) => (row.rule === 'casl-only-in-authz' ? { ...row, folders: [...row.folders, 'policy'] } : row)) };
    expect(rendered(widened)).not.toBe(page);
    const reordered = { ...architectureRules, TIERS: [...architectureRules.TIERS].reverse() };
    expect(rendered(reordered)).not.toBe(page);
  });

  it('refuses a page without its markers, and a rule name the configuration does not have', () => {
    expect(() => rendered(architectureRules, page.replace(architectureDoc.marker('libraries'), '<!-- moved -->'))).toThrow(/no <!-- generated: libraries/);
    const renamed = { ...architectureRules, LIBRARIES: [{ ...architectureRules.LIBRARIES[0]!, rule: 'no-such-rule' }] };
    expect(() => rendered(renamed)).toThrow(/has no rule no-such-rule/);
  });

  it('npm run docs:architecture -- --check agrees', () => {
    const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts['docs:architecture']).toBe('node scripts/architecture-doc.js');
    const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'architecture-doc.js'), '--check'], { encoding: 'utf8', timeout: 20_000 });
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
  });
});
