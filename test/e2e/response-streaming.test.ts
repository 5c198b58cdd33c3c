/**
 * The host's response body is streamed with back-pressure: while a client stops reading, the gateway stops
 * reading from the host (it never buffers a large download in memory), and once the client reads again the
 * whole body arrives, byte for byte.
 */
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { ROOT, startTestGateway } from '../support/gateway';
import { until } from '../support/wait';

const CHUNK = Buffer.alloc(64 * 1024, 0x61);
const TOTAL = 128 * 1024 * 1024;

let host: Server;
let gateway: RunningGateway;
/** Bytes the host has handed to its socket so far (it waits for 'drain' whenever write() says so). */
let hostWritten = 0;

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  host = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(TOTAL) });
    const pump = (): void => {
      while (hostWritten < TOTAL) {
        hostWritten += CHUNK.length;
        if (!res.write(CHUNK)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
  gateway = await startTestGateway(`http://127.0.0.1:${(host.address() as AddressInfo).port}`, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies') });
});

afterAll(async () => {
  await gateway?.close();
  await new Promise((resolve) => host?.close(resolve));
});

it('stops reading from the host while the client does not read, then delivers the whole body', async () => {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gateway.port, path: '/health', agent: false }, resolve);
    req.on('error', reject);
    req.end();
  });
  expect(response.statusCode).toBe(200);
  let received = 0;
  let wrong = 0;
  response.on('data', (chunk: Buffer) => {
    received += chunk.length;
    for (let i = 0; i < chunk.length; i += 4096) if (chunk[i] !== 0x61) wrong++;
  });
  response.pause();

  // Every buffer between host and client fills up (socket buffers on both hops hold a few MB at most), then the host
  // is held back: what it wrote stops moving for a whole 500 ms window, however long filling took on this machine.
  let previous = -1;
  const writtenWhilePaused = await until(
    'the host to be held back (nothing written for 500 ms)',
    () => {
      const now = hostWritten;
      const held = now > 0 && now === previous;
      previous = now;
      return held ? now : null;
    },
    { every: 500 },
  );
  // Held back, not just slow: a gateway that buffered the download would have taken it all.
  expect(writtenWhilePaused).toBeLessThan(TOTAL / 3);

  const done = new Promise<void>((resolve, reject) => {
    response.on('end', resolve);
    response.on('error', reject);
  });
  response.resume();
  await done;
  expect(received).toBe(TOTAL);
  expect(wrong).toBe(0);
  expect(hostWritten).toBe(TOTAL);
}, 30_000);
