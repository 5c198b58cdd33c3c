/**
 * #11.9: the client address every rate limit, audit row and log line uses (src/http/client-address.ts).
 */
import { clientAddressOf } from '../../src/http/client-address';
import { compileTrustedProxies } from '../../src/http/trusted-proxies';

const trusted = compileTrustedProxies(['10.0.0.0/8', '::1']);

describe('#11.9 client address (trusted-proxy rule)', () => {
  it('#11.9: is the socket peer when the peer is not a trusted proxy, whatever X-Forwarded-For says', () => {
    expect(clientAddressOf('203.0.113.5', '198.51.100.1', trusted)).toBe('203.0.113.5');
    expect(clientAddressOf('::ffff:203.0.113.5', '198.51.100.1', trusted)).toBe('203.0.113.5');
    expect(clientAddressOf('203.0.113.5', undefined, compileTrustedProxies([]))).toBe('203.0.113.5');
    expect(clientAddressOf(undefined, '198.51.100.1', trusted)).toBeNull();
  });

  it('#11.9: behind trusted proxies, is the right-most X-Forwarded-For entry that is not a trusted proxy', () => {
    expect(clientAddressOf('10.1.1.1', '198.51.100.1', trusted)).toBe('198.51.100.1');
    // Entries a client prepended are never read: the proxy appended the address it saw.
    expect(clientAddressOf('10.1.1.1', '1.2.3.4, 198.51.100.1', trusted)).toBe('198.51.100.1');
    // Chained trusted proxies are skipped; several header lines read as one list.
    expect(clientAddressOf('::ffff:10.1.1.1', ['1.2.3.4, 198.51.100.1', '10.2.2.2, 10.3.3.3'], trusted)).toBe('198.51.100.1');
    expect(clientAddressOf('::1', '[2001:db8::7]:4431', trusted)).toBe('2001:db8::7');
    expect(clientAddressOf('10.1.1.1', '198.51.100.1:8080', trusted)).toBe('198.51.100.1');
  });

  it('#11.9: an entry that is not an address stops the walk at the last trusted hop (no address of the client\'s choosing)', () => {
    expect(clientAddressOf('10.1.1.1', '198.51.100.1, garbage', trusted)).toBe('10.1.1.1');
    expect(clientAddressOf('10.1.1.1', '198.51.100.1, 10.2.2.2, unknown', trusted)).toBe('10.1.1.1');
    expect(clientAddressOf('10.1.1.1', '', trusted)).toBe('10.1.1.1');
    expect(clientAddressOf('10.1.1.1', 'fe80::1%eth0', trusted)).toBe('10.1.1.1');
    // Only trusted hops: the left-most one is the closest thing to a client.
    expect(clientAddressOf('10.1.1.1', '10.2.2.2, 10.3.3.3', trusted)).toBe('10.2.2.2');
  });
});
