import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Where the embedded database listens (#11.14): PGlite's wire protocol has no password, so it never listens
 * on a TCP port (which any local process could reach): it listens on a Unix socket in a fresh directory
 * only this user can enter (mkdtemp creates it with mode 0700). The URL names it libpq's way, `?host=<dir>`.
 */
export function privateSocket(): { dir: string; path: string; url: string } {
  const dir = mkdtempSync(join(tmpdir(), 'iam-pglite-'));
  return { dir, path: join(dir, '.s.PGSQL.5432'), url: `postgresql://postgres@localhost/postgres?host=${encodeURIComponent(dir)}&sslmode=disable` };
}
