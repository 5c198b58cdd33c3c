/**
 * The documentation's links resolve: every relative link in the README, CONTRIBUTING.md, docs/ and the READMEs of
 * bench/ and deploy/ names a file that exists, and a `#fragment` names a heading of that file (GitHub's slugs).
 * Pages move (the README became a landing page); a link left behind is caught here.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');

function markdownFiles(): string[] {
  const files = ['README.md', 'CONTRIBUTING.md', 'bench/README.md'];
  for (const dir of ['docs', 'deploy']) {
    const walk = (at: string): void => {
      for (const name of readdirSync(join(ROOT, at))) {
        const path = join(at, name);
        if (statSync(join(ROOT, path)).isDirectory()) walk(path);
        else if (name.endsWith('.md')) files.push(path);
      }
    };
    walk(dir);
  }
  return files;
}

/** GitHub's heading anchor: lower case, punctuation other than `-` and `_` dropped, spaces to `-`. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(join(ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '');
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const match of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(match[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

const links = markdownFiles().flatMap((file) => {
  const text = readFileSync(join(ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => match[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
    .map((target) => [file, target] as const);
});

it('finds links to check', () => {
  expect(links.length).toBeGreaterThan(50);
});

it.each(links)('%s → %s', (file, target) => {
  const [path, fragment] = target.split('#') as [string, string | undefined];
  const resolved = path === '' ? file : relative(ROOT, join(ROOT, dirname(file), decodeURIComponent(path)));
  expect({ target, exists: existsSync(join(ROOT, resolved)) }).toEqual({ target, exists: true });
  if (fragment !== undefined && resolved.endsWith('.md')) {
    expect({ target, anchor: anchorsOf(resolved).has(fragment) }).toEqual({ target, anchor: true });
  }
});
