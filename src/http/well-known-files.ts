import type { ServerResponse } from 'node:http';

/**
 * A file every browser (`/favicon.ico`) or crawler (`/robots.txt`) asks for unprompted, and the fixed answer the
 * gateway gives for it when the policy declares no route for it (gateway/proxy-handler.ts, docs/http-contract.md).
 */
export interface WellKnownFile {
  status: 200 | 204;
  /** Null for a 204 (no content). */
  contentType: string | null;
  body: string;
}

/** Cached a day by browsers and shared caches: the answer never changes between policies that do not declare it. */
export const WELL_KNOWN_CACHE_CONTROL = 'public, max-age=86400';

const FAVICON: WellKnownFile = { status: 204, contentType: null, body: '' };
const ROBOTS: WellKnownFile = { status: 200, contentType: 'text/plain; charset=utf-8', body: 'User-agent: *\nDisallow: /\n' };

/**
 * The fixed answer for `GET`/`HEAD` of exactly `/favicon.ico` or `/robots.txt` (the normalized path, compared
 * exactly); null for any other method or path.
 */
export function wellKnownFileFor(method: string, path: string): WellKnownFile | null {
  if (method !== 'GET' && method !== 'HEAD') return null;
  if (path === '/favicon.ico') return FAVICON;
  if (path === '/robots.txt') return ROBOTS;
  return null;
}

/** Writes a {@link WellKnownFile} (a `HEAD` gets the headers only: Node leaves out the body). */
export function sendWellKnownFile(res: ServerResponse, file: WellKnownFile, requestId: string): void {
  const headers: Record<string, string | number> = { 'cache-control': WELL_KNOWN_CACHE_CONTROL, 'x-request-id': requestId };
  if (file.contentType !== null) {
    headers['content-type'] = file.contentType;
    headers['content-length'] = Buffer.byteLength(file.body);
    headers['x-content-type-options'] = 'nosniff';
  }
  res.writeHead(file.status, headers);
  res.end(file.body);
}
