import type { CompiledRoute, DefaultAction } from './compiled-policy';

/**
 * Whether a broader route, or the policy's `default`, checks at least as much as a route declared at a more
 * specific pattern — the rule that decides if a method the specific pattern does not list may fall through
 * (#11.30). Fail closed: two different permission codes are not comparable, so a fallback naming another
 * permission does not count as "at least as much" (the gateway cannot know which code implies which).
 *
 * - a public or shadow-mode route checks nothing: anything covers it;
 * - a route needing only a session (and a valid active profile) is covered by any enforced, non-public route
 *   that does not waive the profile (`profile: optional` without a permission), and by `default:
 *   authenticated` or `deny`;
 * - a route needing a permission is covered only by `default: deny` or an enforced route asking for the same
 *   permission, and when it checks a resource, the same resource type taken from the same path segment,
 *   with at least the same access (`WRITE` covers `READ`) and resolution (`required` covers `optional`).
 */
export function coversRoute(
  fallback: { route: CompiledRoute; resourceSegment: number } | DefaultAction,
  declared: { route: CompiledRoute; resourceSegment: number },
): boolean {
  const route = declared.route;
  if (route.public || route.mode === 'shadow') return true;
  if (typeof fallback === 'string') return fallback === 'deny' || (fallback === 'authenticated' && route.permission === null);
  const broader = fallback.route;
  if (broader.public || broader.mode === 'shadow') return false;
  // A route without a permission still needs a valid active profile unless it says `profile: optional`; a
  // broader route that waives the profile and asks for no permission checks less than that.
  if (route.permission === null) return route.profile === 'optional' || broader.permission !== null || broader.profile !== 'optional';
  if (broader.permission !== route.permission) return false;
  const resource = route.resource;
  if (resource === null) return true;
  const other = broader.resource;
  return (
    other !== null &&
    other.type === resource.type &&
    fallback.resourceSegment === declared.resourceSegment &&
    (other.access === 'WRITE' || resource.access === 'READ') &&
    (other.resolve === 'required' || resource.resolve === 'optional')
  );
}

/**
 * ASCII letters of `value` in lower case; every other character (percent escapes' digits, non-ASCII)
 * unchanged, so the result has the same length. No regex and no allocation when there is nothing to fold.
 */
export function foldAsciiCase(value: string): string {
  let upper = false;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code > 0x7f) return foldMixed(value);
    if (code >= 0x41 && code <= 0x5a) upper = true;
  }
  return upper ? value.toLowerCase() : value;
}

/** {@link foldAsciiCase} for a string with non-ASCII characters (`toLowerCase` would fold those too). */
function foldMixed(value: string): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    out += code >= 0x41 && code <= 0x5a ? String.fromCharCode(code + 0x20) : value[i];
  }
  return out;
}
