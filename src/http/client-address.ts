import { isIP } from 'node:net';
import type { TrustedProxyCheck } from './trusted-proxies';
import { unmapIpv4 } from './upstream-headers';

/** Longest X-Forwarded-For read (a longer one is read from its right end only). */
const MAX_FORWARDED_FOR = 2048;

/** `[2001:db8::1]:443`, `10.0.0.1:8080` → the address alone; anything that is not an address → null. */
function addressOf(entry: string): string | null {
  let text = entry.trim();
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    text = end < 0 ? '' : text.slice(1, end);
  } else if (text.indexOf(':') > 0 && text.indexOf(':') === text.lastIndexOf(':')) {
    text = text.slice(0, text.indexOf(':')); // IPv4 with a port
  }
  return isIP(text) === 0 || text.includes('%') ? null : unmapIpv4(text);
}

/**
 * The client's IP address, as the rate limits, the audit trail and the logs use it: the socket's peer,
 * unless that peer is a trusted proxy (`iam.forward.trusted-proxies`); then `X-Forwarded-For` is read
 * from the right, skipping trusted proxies, and the first address that is not one is the client (what
 * nginx's `real_ip_recursive on` does). An entry that is not an IP address stops the walk: the last
 * trusted hop is used, so a client can never choose its own address by sending garbage.
 */
export function clientAddressOf(remoteAddress: string | undefined, forwardedFor: string | string[] | undefined, isTrustedProxy: TrustedProxyCheck): string | null {
  if (remoteAddress === undefined) return null;
  let client = unmapIpv4(remoteAddress);
  if (!isTrustedProxy(remoteAddress) || forwardedFor === undefined) return client;
  let list = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
  if (list.length > MAX_FORWARDED_FOR) list = list.slice(-MAX_FORWARDED_FOR);
  const entries = list.split(',');
  for (let i = entries.length - 1; i >= 0; i--) {
    const address = addressOf(entries[i]!);
    if (address === null) break;
    client = address;
    if (!isTrustedProxy(address)) break;
  }
  return client;
}
