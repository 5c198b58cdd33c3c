/**
 * Permission codes `<resource>:<action>` (docs/policy-format.md). Both parts use
 * `[A-Za-z0-9_.-]+`; the action may be `*` (every action of the resource) and `*:*` means everything.
 * A char scan rather than a regex: decisions parse the code of every protected request.
 */

/** The parts of a valid permission code; `*` marks "any" in either position. */
export interface ParsedPermissionCode {
  resource: string;
  action: string;
}

/** `*` as a part: any action (`res:*`) or, only together with an `*` action, any resource (`*:*`). */
export const ANY = '*';

function isNameChar(code: number): boolean {
  return (
    (code >= 48 && code <= 57) || // 0-9
    (code >= 65 && code <= 90) || // A-Z
    (code >= 97 && code <= 122) || // a-z
    code === 95 || // _
    code === 46 || // .
    code === 45 // -
  );
}

function isName(text: string, start: number, end: number): boolean {
  if (end <= start) return false;
  for (let i = start; i < end; i++) if (!isNameChar(text.charCodeAt(i))) return false;
  return true;
}

/** Parses a permission code; null when it is not of the form `<resource>:<action>`, `<resource>:*` or `*:*`. */
export function parsePermissionCode(code: string): ParsedPermissionCode | null {
  if (typeof code !== 'string') return null;
  const colon = code.indexOf(':');
  if (colon <= 0 || colon === code.length - 1 || code.indexOf(':', colon + 1) !== -1) return null;
  const resource = code.slice(0, colon);
  const action = code.slice(colon + 1);
  if (resource === ANY) return action === ANY ? { resource, action } : null;
  if (action !== ANY && !isName(code, colon + 1, code.length)) return null;
  if (!isName(code, 0, colon)) return null;
  return { resource, action };
}

/** True when `code` is a well-formed permission code (see {@link parsePermissionCode}). */
export function isValidPermissionCode(code: string): boolean {
  return parsePermissionCode(code) !== null;
}

/** The same grammar as a regular expression, for JSON schemas (request and response bodies). */
export const PERMISSION_CODE_PATTERN = '^(\\*:\\*|[A-Za-z0-9_.-]+:([A-Za-z0-9_.-]+|\\*))$';
