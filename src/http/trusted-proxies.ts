import { BlockList, isIP } from 'node:net';

/** Tells whether a socket's remote address is a configured trusted proxy. */
export type TrustedProxyCheck = (address: string | undefined) => boolean;

const MAPPED_PREFIX = '::ffff:';

/** `::ffff:a.b.c.d` → `a.b.c.d`, or null when not an IPv4-mapped IPv6 address in dotted form. */
function mappedIpv4(address: string): string | null {
  if (address.length <= MAPPED_PREFIX.length || address.slice(0, MAPPED_PREFIX.length).toLowerCase() !== MAPPED_PREFIX) return null;
  const rest = address.slice(MAPPED_PREFIX.length);
  return isIP(rest) === 4 ? rest : null;
}

function parsePrefix(text: string, max: number): number | null {
  if (text.length === 0 || text.length > 3) return null;
  let value = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return null;
    value = value * 10 + (c - 0x30);
  }
  // A leading zero ("/08") is refused: it reads as octal to some tools.
  if (text.length > 1 && text.charCodeAt(0) === 0x30) return null;
  return value <= max ? value : null;
}

/** Adds one configuration entry, or returns false when it is not an address or CIDR. */
function addEntry(list: BlockList, entry: string): boolean {
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const family = isIP(address);
  // Zone ids (fe80::1%eth0) name an interface, not an address: refused as ambiguous.
  if (family === 0 || address.includes('%')) return false;
  const mapped = family === 6 ? mappedIpv4(address) : null;
  if (slash < 0) {
    if (mapped !== null) list.addAddress(mapped, 'ipv4');
    else list.addAddress(address, family === 4 ? 'ipv4' : 'ipv6');
    return true;
  }
  const prefix = parsePrefix(entry.slice(slash + 1), family === 4 ? 32 : 128);
  if (prefix === null) return false;
  if (mapped !== null && prefix >= 96) list.addSubnet(mapped, prefix - 96, 'ipv4');
  else list.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
  return true;
}

/**
 * Compiles `iam.forward.trusted-proxies` (exact IPv4/IPv6 addresses and CIDRs) once, at start or reload.
 * IPv4-mapped IPv6 addresses (`::ffff:10.1.2.3`, what a dual-stack socket reports) match IPv4 entries.
 * Throws an Error naming the first invalid entry. An empty list trusts nobody.
 */
export function compileTrustedProxies(list: readonly string[]): TrustedProxyCheck {
  if (list.length === 0) return () => false;
  const blockList = new BlockList();
  for (const raw of list) {
    const entry = raw.trim();
    if (!addEntry(blockList, entry)) {
      throw new Error(`iam.forward.trusted-proxies: '${raw}' is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8)`);
    }
  }
  return (address) => {
    if (address === undefined) return false;
    const family = isIP(address);
    if (family === 4) return blockList.check(address, 'ipv4');
    if (family !== 6 || address.includes('%')) return false;
    const mapped = mappedIpv4(address);
    return mapped !== null ? blockList.check(mapped, 'ipv4') : blockList.check(address, 'ipv6');
  };
}
