/*
 * The `Cookie` the host may see. The gateway's own cookies (the session, which works as a bearer, and the sealed
 * OpenID Connect login state) are credentials for the gateway only: they never cross to the host, whoever forwards
 * the request — the inline proxy (each `Cookie` line it forwards) or a proxy in front that asked forward-auth (the
 * `Cookie` of the 200, which the recipes of examples/forward-auth/ put on the request instead of the client's).
 */
import { GATEWAY_COOKIE_NAMES } from './session-cookie';

/** The gateway's cookie names, lower case: removed in any case, since some hosts read cookie names case-insensitively. */
const GATEWAY_NAMES: ReadonlySet<string> = new Set(GATEWAY_COOKIE_NAMES.map((name) => name.toLowerCase()));

/** Any of those names, in any case, anywhere: a value without one needs no parsing (the usual request). */
const MENTIONS_GATEWAY_NAME = new RegExp(GATEWAY_COOKIE_NAMES.map((name) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'i');

/**
 * A `Cookie` field value without the gateway's cookies; '' when nothing else is left (then no `Cookie` is sent).
 * Pairs are `name=value` separated by `;` (RFC 6265 §4.2.1, §5.4); a name is compared without case and without the
 * whitespace around it, and a value may contain `=`. A pair in which a `,`-separated piece is named like a gateway
 * cookie is removed whole: RFC 2109 parsers, still found in some hosts, also split cookies at `,`. Several `Cookie`
 * lines are several calls (or one call on Node's `; `-joined `req.headers.cookie`). This is the one rule: the proxy,
 * forward-auth and the check for gateway tokens hidden in other cookies all use it.
 */
export function hostCookie(header: string): string {
  if (!MENTIONS_GATEWAY_NAME.test(header)) return header;
  const kept: string[] = [];
  for (const part of header.split(';')) {
    const pair = part.trim();
    if (pair !== '' && !namesGatewayCookie(pair)) kept.push(pair);
  }
  return kept.join('; ');
}

/** True when the pair, or one of its `,`-separated pieces, is named like one of the gateway's cookies. */
function namesGatewayCookie(pair: string): boolean {
  for (const piece of pair.split(',')) {
    const at = piece.indexOf('=');
    if (GATEWAY_NAMES.has((at < 0 ? piece : piece.slice(0, at)).trim().toLowerCase())) return true;
  }
  return false;
}
