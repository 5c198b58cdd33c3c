/**
 * One palette (console/assets/palette.css) for the console and the gateway's own pages: console.css and pages.css
 * start with `@import "palette.css"`, which the gateway inlines when it loads its assets, so each page still loads
 * one stylesheet (test/e2e/browser-pages.test.ts checks that in Chromium).
 */
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findConsoleDir, loadConsoleFiles } from '../../src/api/console-routes';

const CONSOLE = findConsoleDir()!;

describe('the console stylesheets', () => {
  it('defines the palette in one file only', () => {
    const defining = readdirSync(join(CONSOLE, 'assets')).filter((name) => name.endsWith('.css') && /--accent:/.test(readFileSync(join(CONSOLE, 'assets', name), 'utf8')));
    expect(defining).toEqual(['palette.css']);
  });

  it.each(['console.css', 'pages.css'])('serves %s with the palette inlined, once, and no @import left', (name) => {
    const served = loadConsoleFiles(CONSOLE).assets.get(name)!.body.toString('utf8');
    expect(served.match(/--accent: #0b57a4;/g)).toHaveLength(1);
    expect(served).not.toMatch(/^\s*@import/m);
    // The sheet's own rules follow the palette (they may override it).
    expect(served.indexOf('--accent:')).toBeLessThan(served.indexOf(':root { background:'));
  });

  describe('a broken import stops the load, naming the file', () => {
    let dir: string;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'console-css-'));
      mkdirSync(join(dir, 'assets'));
      writeFileSync(join(dir, 'index.html'), '<!doctype html><title>t</title>');
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    it('refuses an import of a missing file', () => {
      writeFileSync(join(dir, 'assets', 'a.css'), '@import "missing.css";\nbody {}\n');
      expect(() => loadConsoleFiles(dir)).toThrow(/a\.css: @import "missing\.css" names no file beside it/);
    });

    it('refuses a stylesheet that imports itself', () => {
      writeFileSync(join(dir, 'assets', 'a.css'), '/* loop */\n@import "a.css";\n');
      expect(() => loadConsoleFiles(dir)).toThrow(/@import "a\.css" imports itself/);
    });
  });
});
