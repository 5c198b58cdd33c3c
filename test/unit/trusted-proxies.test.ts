import { compileTrustedProxies } from '../../src/http/trusted-proxies';

type Row = { name: string; list: string[]; trusted: Array<string | undefined>; untrusted: Array<string | undefined> };

const rows: Row[] = [
  { name: 'an empty list trusts nobody', list: [], trusted: [], untrusted: ['127.0.0.1', '::1', '10.0.0.1', undefined, ''] },
  { name: 'an exact IPv4 address', list: ['10.1.2.3'], trusted: ['10.1.2.3', '::ffff:10.1.2.3', '::FFFF:10.1.2.3'], untrusted: ['10.1.2.4', '10.1.2.30', '110.1.2.3', undefined] },
  { name: 'an IPv4 CIDR', list: ['10.0.0.0/8'], trusted: ['10.0.0.0', '10.255.255.255', '::ffff:10.20.30.40'], untrusted: ['11.0.0.0', '9.255.255.255', '::ffff:11.0.0.1'] },
  { name: 'a /32', list: ['192.0.2.1/32'], trusted: ['192.0.2.1'], untrusted: ['192.0.2.2'] },
  { name: 'an exact IPv6 address', list: ['::1'], trusted: ['::1', '0:0:0:0:0:0:0:1'], untrusted: ['::2', '127.0.0.1'] },
  { name: 'an IPv6 /128', list: ['::1/128'], trusted: ['::1'], untrusted: ['::2'] },
  { name: 'an IPv6 CIDR', list: ['fd00::/8'], trusted: ['fd00::1', 'fdab:cdef::42', 'FD12::1'], untrusted: ['fe80::1', 'fc00::1', '10.0.0.1'] },
  { name: 'an IPv4-mapped entry matches the IPv4 address', list: ['::ffff:10.9.9.9'], trusted: ['10.9.9.9', '::ffff:10.9.9.9'], untrusted: ['10.9.9.8'] },
  { name: 'an IPv4-mapped CIDR', list: ['::ffff:10.0.0.0/104'], trusted: ['10.1.1.1', '::ffff:10.2.2.2'], untrusted: ['11.1.1.1'] },
  { name: 'several entries', list: ['127.0.0.1', ' 172.16.0.0/12 ', 'fd00::/8'], trusted: ['127.0.0.1', '172.31.255.255', 'fd00::9'], untrusted: ['172.32.0.0', '127.0.0.2'] },
  { name: 'non-addresses never match', list: ['0.0.0.0/0', '::/0'], trusted: ['8.8.8.8', '2001:db8::1'], untrusted: ['', 'localhost', 'not-an-ip', '10.0.0.1/8', 'fe80::1%eth0', undefined] },
];

describe('compileTrustedProxies', () => {
  it.each(rows)('$name', ({ list, trusted, untrusted }) => {
    const isTrusted = compileTrustedProxies(list);
    for (const address of trusted) expect([address, isTrusted(address)]).toEqual([address, true]);
    for (const address of untrusted) expect([address, isTrusted(address)]).toEqual([address, false]);
  });

  it.each(['10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/8/8', '10.0.0.0/-1', '10.0.0.0/08', '10.0.0.256', 'example.com', '', '10.0.0.0/8a', 'fe80::1%eth0', '1.2.3.4-1.2.3.9'])(
    'refuses %j naming the entry',
    (entry) => {
      expect(() => compileTrustedProxies(['127.0.0.1', entry])).toThrow(`'${entry}'`);
    },
  );
});
