// The console talks to the gateway's public /iam JSON API only, with the session cookie (same origin). An unsafe
// method from this page passes the gateway's CSRF check because the browser sends this page's Origin.

/** An answer that is not 2xx: `problem` is the RFC 9457 body (or one made up when the body is not a problem). */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }

  get code() {
    return this.problem.code ?? null;
  }
}

/** The problem an answer carries; a made-up one when it carries none (a proxy's page, an empty body). */
function problemOf(status, body) {
  if (body && typeof body === 'object' && typeof body.title === 'string') return body;
  return { title: status === 0 ? 'The gateway cannot be reached' : `The gateway answered ${status}`, detail: '', status };
}

/**
 * Calls the API: `api('/iam/sessions')`, `api(url, { method: 'POST', body, headers })`. Resolves
 * `{ status, headers, data }` (data: the parsed JSON, or null); rejects with {@link ApiError}.
 */
export async function api(url, { method = 'GET', body, headers = {} } = {}) {
  let response;
  try {
    response = await fetch(url, {
      method,
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new ApiError(0, { title: 'The gateway cannot be reached', detail: error instanceof Error ? error.message : String(error) });
  }
  const text = await response.text();
  let data = null;
  if (text !== '') {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) throw new ApiError(response.status, problemOf(response.status, data));
  return { status: response.status, headers: response.headers, data };
}

/** `encodeURIComponent` for one path segment. */
export const seg = (value) => encodeURIComponent(value);

/** A query string from the non-empty entries of `params` (with the leading `?`, or '' when none). */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * The `rel="next"` target of a `Link` header (RFC 8288), when it is a same-origin /iam path; else null.
 */
export function nextLink(headers) {
  const link = headers.get('link');
  if (!link) return null;
  for (const part of link.split(',')) {
    const match = /^\s*<([^>]*)>\s*;(.*)$/.exec(part);
    if (!match) continue;
    const rel = /(?:^|;)\s*rel\s*=\s*"?([^";]*)"?/i.exec(match[2]);
    if (!rel || !rel[1].split(/\s+/).includes('next')) continue;
    const target = new URL(match[1], location.origin);
    if (target.origin === location.origin && target.pathname.startsWith('/iam/')) return target.pathname + target.search;
  }
  return null;
}

/** The identifier rule of the API's bodies and paths: visible ASCII, 1–200 characters. */
export const IDENTIFIER = /^[\x21-\x7E]{1,200}$/;

/** Whether a permission list (template codes, `*` wildcards) grants `code`. */
export function grants(permissions, code) {
  const [resource] = code.split(':');
  return permissions.some((held) => held === code || held === '*:*' || held === `${resource}:*`);
}
