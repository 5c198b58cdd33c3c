/**
 * Where a PostgreSQL URL points, never its credentials: `host:port/database` (the port 5432 when the URL has none;
 * a Unix socket directory given as `?host=/dir` in the host's place). What an error message may name: the userinfo
 * and the query (`?password=…`) are left out. Imports nothing, so the CLI commands that only name a database stay light.
 */
export function databasePlace(url: string): string {
  try {
    const parsed = new URL(url);
    const socketDir = parsed.searchParams.get('host');
    const host = socketDir?.startsWith('/') ? socketDir : parsed.hostname;
    const database = parsed.pathname === '/' ? '' : parsed.pathname;
    return `${host}:${parsed.port || '5432'}${database}`;
  } catch {
    return 'the configured database';
  }
}
