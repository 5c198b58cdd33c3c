/**
 * docs/http-contract.md: WebSocket upgrades are authorized like any request before anything reaches the host,
 * then proxied with the identity headers.
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import type { RunningGateway } from '../../src/app/start-gateway';
import { login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  ({ upstream, gateway } = fixture);
});
afterAll(() => fixture?.close());
beforeEach(() => upstream.clear());

/** Performs a handshake over a raw socket; resolves the status line and, after a 101, an echoed text frame. */
function handshake(path: string, headers: string[]): Promise<{ status: number; echo: string | null }> {
  return new Promise((resolve, reject) => {
    const socket = connect(gateway.port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let status = 0;
    socket.on('connect', () => {
      socket.write(
        [`GET ${path} HTTP/1.1`, 'Host: gw.test', 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13', ...headers, '', ''].join('\r\n'),
      );
    });
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const end = data.indexOf('\r\n\r\n');
      if (status === 0 && end >= 0) {
        status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data.toString('latin1'))?.[1] ?? 0);
        if (status !== 101) {
          socket.destroy();
          return resolve({ status, echo: null });
        }
        data = data.subarray(end + 4);
        // A masked client text frame "hello".
        const mask = randomBytes(4);
        const payload = Buffer.from('hello');
        const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
        socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]));
      }
      if (status === 101 && data.length >= 2) {
        const length = data[1]! & 0x7f;
        if (data.length >= 2 + length) {
          socket.destroy();
          resolve({ status, echo: data.subarray(2, 2 + length).toString('utf8') });
        }
      }
    });
    socket.on('error', reject);
    socket.setTimeout(5000, () => reject(new Error('no answer')));
  });
}

it('refuses an upgrade without a token with 401 and the host sees nothing', async () => {
  expect(await handshake('/ws', [])).toEqual({ status: 401, echo: null });
  expect(await upstream.requests()).toHaveLength(0);
});

it('refuses an upgrade to a route the profile may not use with 403', async () => {
  const alice = await login(gateway.url, 'alice');
  expect((await handshake('/api/admin/socket', [`Authorization: Bearer ${alice.accessToken}`])).status).toBe(403);
  expect(await upstream.requests()).toHaveLength(0);
});

it('tunnels an authorized upgrade with identity headers and without the bearer token', async () => {
  const alice = await login(gateway.url, 'alice');
  const result = await handshake('/ws', [`Authorization: Bearer ${alice.accessToken}`, 'X-IAM-User-Id: u-admin']);
  expect(result).toEqual({ status: 101, echo: 'hello' });
  const [received] = await upstream.requests();
  expect(received!.kind).toBe('upgrade');
  const headers: Record<string, string[]> = {};
  for (let i = 0; i < received!.rawHeaders.length; i += 2) (headers[received!.rawHeaders[i]!.toLowerCase()] ??= []).push(received!.rawHeaders[i + 1]!);
  expect(headers['x-iam-user-id']).toEqual(['u-alice']);
  expect(headers['x-iam-permission']).toEqual(['project:read']);
  expect(headers.authorization).toBeUndefined();
  expect(headers.upgrade).toEqual(['websocket']);
});
