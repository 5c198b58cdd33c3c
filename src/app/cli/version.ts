import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The version of the installed package: the `version` of the nearest package.json named iam-gateway above
 * this file (src/app/cli/ under ts-jest, dist/src/app/cli/ once built, the same inside node_modules).
 */
export function packageVersion(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'iam-gateway' && manifest.version) return manifest.version;
    } catch {
      // no package.json here: look one directory up
    }
    if (dirname(dir) === dir) throw new Error('cannot find the package.json of iam-gateway');
  }
}
