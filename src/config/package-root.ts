import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

let found: string | null | undefined;

/**
 * The directory of the installed package: the nearest directory above this file whose package.json is named
 * iam-gateway (the repository under ts-jest, where this file is src/app/; the package root once built, where it is
 * dist/src/app/; the same inside node_modules). Null when there is none (the file copied elsewhere).
 */
export function packageRoot(): string | null {
  if (found !== undefined) return found;
  for (let dir = __dirname; ; dir = dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string };
      if (manifest.name === 'iam-gateway') return (found = dir);
    } catch {
      // no package.json here: look one directory up
    }
    if (dirname(dir) === dir) return (found = null);
  }
}
