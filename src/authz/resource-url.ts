/**
 * A resource id as the resolver sees it: decoded once, then placed in the resolver's URL as one path segment.
 * Pure functions (no HTTP client), shared by the request path and the policy tools.
 */

/**
 * Path parameters keep every percent-escape except those of unreserved characters (docs/http-contract.md), so an
 * id must be decoded once before it is re-encoded for the resolver URL and compared with `scopeRefId`s.
 * Normalization refuses malformed escapes; if one slips through, the raw text is used (never a throw).
 */
export function decodeResourceId(id: string): string {
  if (id.indexOf('%') === -1) return id;
  try {
    return decodeURIComponent(id);
  } catch {
    return id;
  }
}

/**
 * The resolver URL for a resource id (`id` as it appears in the normalized path), or null when the id cannot
 * name a resource without changing the URL's structure. The id is decoded once and then percent-encoded as
 * one path segment (`/`, `?`, `#`, `%`, `\` never survive as such); ids that are or make a `.`/`..` segment
 * (which URL parsers resolve, reaching another resolver URL), empty ids and control characters are refused.
 * One function for the proxy, forward-auth, diagnostics and `policy explain`.
 */
export function resolverUrl(template: string, id: string): string | null {
  const decoded = decodeResourceId(id);
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (decoded.length === 0 || decoded === '.' || decoded === '..' || /[\u0000-\u001f\u007f]/.test(decoded)) return null;
  const url = template.replaceAll('{id}', encodeURIComponent(decoded));
  // The template's own text around {id} could still form a dot segment with the id (`/.{id}` and `.`).
  const end = url.search(/[?#]/);
  const path = end < 0 ? url : url.slice(0, end);
  const afterScheme = path.indexOf('//');
  for (const segment of path.slice(afterScheme + 2).split('/').slice(1)) {
    if (segment === '.' || segment === '..') return null;
  }
  return url;
}
