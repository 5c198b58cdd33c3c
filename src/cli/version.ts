import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../config';

/** The version of the installed package: the `version` of its package.json ({@link packageRoot}). */
export function packageVersion(): string {
  const root = packageRoot();
  const version = root === null ? undefined : (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: string }).version;
  if (!version) throw new Error('cannot find the package.json of iam-gateway');
  return version;
}
