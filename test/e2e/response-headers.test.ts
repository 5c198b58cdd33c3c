/**
 * RFC 9110 §7.6.1 on the way back: the host's hop-by-hop headers (and those it names in Connection) stop at
 * the gateway, repeated headers such as Set-Cookie arrive intact, and X-Request-Id is the gateway's.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { ROOT, startTestGateway } from '../support/gateway';

let host: Server;
let gateway: RunningGateway;

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  host = createServer((_req, res) => {
    res.writeHead(200, [
      'Content-Type', 'text/plain',
      'Set-Cookie', 'a=1; Path=/',
      'Set-Cookie', 'b=2; Path=/; HttpOnly',
      'Connection', 'keep-alive, X-Internal-Trace',
      'X-Internal-Trace', 'secret',
      'Keep-Alive', 'timeout=5',
      'X-Request-Id', 'host-chosen',
    ]);
    res.end('ok');
  });
  await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
  gateway = await startTestGateway(`http://127.0.0.1:${(host.address() as AddressInfo).port}`, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies') });
});

afterAll(async () => {
  await gateway?.close();
  await new Promise((resolve) => host?.close(resolve));
});

it('keeps both Set-Cookie headers, drops hop-by-hop and Connection-named headers, sets its own request id', async () => {
  const raw = await new Promise<string[]>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gateway.port, path: '/health', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.rawHeaders));
    });
    req.on('error', reject);
    req.end();
  });
  const headers: Record<string, string[]> = {};
  for (let i = 0; i < raw.length; i += 2) (headers[raw[i]!.toLowerCase()] ??= []).push(raw[i + 1]!);
  expect(headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; Path=/; HttpOnly']);
  expect(headers['x-internal-trace']).toBeUndefined();
  expect(headers['keep-alive']).toBeUndefined();
  expect(headers['x-request-id']).toHaveLength(1);
  expect(headers['x-request-id']![0]).not.toBe('host-chosen');
});
