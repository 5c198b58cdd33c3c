/**
 * #11.39 (part): stopping the gateway (what SIGTERM does) never resets a request that arrives on an idle
 * keep-alive connection. Idle connections are closed with a FIN, a request already received is answered
 * (with `Connection: close`), every response during the drain says `Connection: close`, and a request the
 * host received is always answered. In-process gateways (`RunningGateway.close()` is the SIGTERM handler's
 * stop) in front of a host in the test process, clients on raw sockets (node:net).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { startTestGateway } from '../support/gateway';
import { RawConnection } from '../support/raw-connection';
import { until } from '../support/wait';

const POLICY = `
version: 1
default: deny
routes:
  - { path: /health, methods: [GET], public: true }
  - { path: /slow, methods: [GET], public: true }
`;

let policies: string;
let host: Server;
let hostUrl: string;
/** Request targets the host received. */
const seen: string[] = [];

beforeAll(async () => {
  policies = mkdtempSync(join(tmpdir(), 'iam-shutdown-drain-'));
  writeFileSync(join(policies, 'routes.yaml'), POLICY);
  const db = await createTestDatabase();
  await db.close();
  host = createServer((req, res) => {
    seen.push(req.url ?? '');
    const ms = Number(new URL(req.url ?? '/', 'http://host').searchParams.get('ms') ?? 0);
    setTimeout(() => res.end(JSON.stringify({ ok: true, url: req.url })), ms);
  });
  await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
  hostUrl = `http://127.0.0.1:${(host.address() as { port: number }).port}`;
});
afterAll(async () => {
  host.closeAllConnections();
  await new Promise((resolve) => host.close(resolve));
});

async function idleConnection(gateway: RunningGateway): Promise<RawConnection> {
  const connection = new RawConnection(gateway.port);
  connection.send('/health');
  const first = await connection.response();
  expect(first?.head).toMatch(/^HTTP\/1\.1 200 /);
  expect(first?.head.toLowerCase()).toContain('connection: keep-alive');
  return connection;
}

describe('#11.39 stopping drains keep-alive connections without resets', () => {
  it('#11.39: a request already sent on an idle keep-alive connection when the stop begins is answered with Connection: close, not reset', async () => {
    const gateway = await startTestGateway(hostUrl, { IAM_POLICIES_DIR: policies });
    const connections = await Promise.all([1, 2, 3].map(() => idleConnection(gateway)));
    connections.forEach((connection, i) => connection.send(`/health?second=${i}`));
    const stopped = gateway.close();
    for (const connection of connections) {
      const second = await connection.response();
      expect(second?.head).toMatch(/^HTTP\/1\.1 200 /);
      expect(second?.head.toLowerCase()).toContain('connection: close');
      await connection.closed;
      expect(connection.ending).toBe('closed');
    }
    await stopped;
  });

  it('#11.39: a response in flight when the stop begins says Connection: close and the connection then closes cleanly', async () => {
    const gateway = await startTestGateway(hostUrl, { IAM_POLICIES_DIR: policies });
    const connection = await idleConnection(gateway);
    connection.send('/slow?ms=300&inflight=1');
    await until('the host to receive the request', () => seen.includes('/slow?ms=300&inflight=1'), { every: 5 });
    const stopped = gateway.close();
    const answer = await connection.response();
    expect(answer?.head).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer?.head.toLowerCase()).toContain('connection: close');
    await connection.closed;
    expect(connection.ending).toBe('closed');
    await stopped;
  });

  it('#11.39: under steady keep-alive traffic, a stop resets no connection and every request the host received is answered', async () => {
    const gateway = await startTestGateway(hostUrl, { IAM_POLICIES_DIR: policies });
    const answered = new Set<string>();
    const connections = await Promise.all(Array.from({ length: 8 }, () => idleConnection(gateway)));
    // Assigned inside the loops below: the cast keeps TypeScript from narrowing it to `null` here.
    let stopping = null as Promise<void> | null;
    let sent = 0;
    const loops = connections.map(async (connection, c) => {
      for (let n = 0; ; n++) {
        const target = `/health?c=${c}&n=${n}`;
        connection.send(target);
        sent += 1;
        // The stop begins in the middle of the traffic.
        if (sent === 80) stopping = gateway.close();
        const answer = await connection.response();
        if (!answer) return;
        answered.add(target);
        if (/connection: close/i.test(answer.head)) {
          await connection.closed;
          return;
        }
      }
    });
    await Promise.all(loops);
    await stopping;
    expect(connections.map((connection) => connection.ending)).toEqual(connections.map(() => 'closed'));
    const unanswered = seen.filter((target) => target.includes('c=') && !answered.has(target));
    expect(unanswered).toEqual([]);
  });
});
