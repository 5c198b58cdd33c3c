/**
 * #11.1: an upgrade request never opens a path for unchecked bytes. Only `Upgrade: websocket` is tunnelled,
 * and only after the host answered 101; any other answer is relayed and the connection closed; bytes the
 * client sends before the 101 never reach the host; an open tunnel closes when its session is logged out,
 * revoked or expires, and after `upstream.websocket-idle-timeout`. Everything over raw sockets (node:net),
 * against a host that ignores Upgrade headers and keeps connections alive, as most HTTP frameworks do.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { describeWithRedis, uniquePrefix } from '../support/env';
import { bearer, login, startTestGateway } from '../support/gateway';

const POLICY = `
version: 1
default: deny
routes:
  - { path: /health, methods: [GET], public: true }
  - { path: /public-ws, methods: [GET], public: true }
  - { path: /ws, methods: [GET], permission: project:read }
  - { path: /api/admin/**, methods: ["*"], permission: admin:write }
`;

/** What the host saw: every HTTP request it parsed, and the bytes that reached each tunnel after its 101. */
interface HostRecord {
  requests: Array<{ method: string; url: string; headers: IncomingMessage['headers'] }>;
  tunnels: Array<{ bytes: Buffer; closed: Promise<void> }>;
}

/**
 * A host in the test process: `/ws` and `/public-ws` accept WebSocket handshakes (101, after `?delay=ms`) and
 * echo every byte; any other upgrade request is answered 200 keep-alive with the Upgrade ignored, and the
 * connection goes on as HTTP — the behaviour that turned the old byte pipe into an unchecked channel.
 */
function startHost(): Promise<{ server: Server; url: string; record: HostRecord; stop: () => Promise<void> }> {
  const record: HostRecord = { requests: [], tunnels: [] };
  const server = createServer((req, res) => {
    record.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ok: true }));
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    record.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const url = new URL(req.url ?? '/', 'http://host');
    if (url.pathname !== '/ws' && url.pathname !== '/public-ws') {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: keep-alive\r\n\r\n{"ok":true}');
      if (head.length > 0) socket.unshift(head);
      server.emit('connection', socket);
      return;
    }
    const tunnel = { bytes: Buffer.alloc(0), closed: new Promise<void>((resolve) => socket.once('close', () => resolve())) };
    record.tunnels.push(tunnel);
    socket.on('error', () => socket.destroy());
    // The gateway closing its side ends the tunnel (upgraded sockets allow half-open connections).
    socket.once('end', () => socket.end());
    const onData = (chunk: Buffer): void => {
      tunnel.bytes = Buffer.concat([tunnel.bytes, chunk]);
      if (socket.writable) socket.write(chunk);
    };
    socket.on('data', onData);
    setTimeout(() => {
      if (socket.destroyed) return;
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      if (head.length > 0) onData(head);
    }, Number(url.searchParams.get('delay') ?? 0));
  });
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const stop = (): Promise<void> =>
    new Promise((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, record, stop })));
}

function handshakeHead(path: string, extra: string[] = [], upgrade = 'websocket'): string {
  const lines = [`GET ${path} HTTP/1.1`, 'Host: gw.test', `Upgrade: ${upgrade}`, 'Connection: Upgrade', `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13'];
  return [...lines, ...extra, '', ''].join('\r\n');
}

const FORGED = 'GET /api/admin/stats HTTP/1.1\r\nHost: gw.test\r\nX-IAM-User-Id: u-admin\r\nX-IAM-Permission: admin:write\r\n\r\n';

/** A raw client connection: everything it received, and a promise for its close. */
interface RawClient {
  socket: Socket;
  received: () => string;
  /** Resolves with the first response head once it is complete. */
  head: Promise<string>;
  closed: Promise<number>;
  /** Resolves once `text` has been received (after the head). */
  waitFor(text: string): Promise<void>;
}

function open(gateway: RunningGateway, first: string): RawClient {
  const socket = connect(gateway.port, '127.0.0.1');
  let data = '';
  const waiters: Array<{ text: string; resolve: () => void }> = [];
  let resolveHead: (head: string) => void = () => undefined;
  const head = new Promise<string>((resolve) => (resolveHead = resolve));
  socket.on('data', (chunk: Buffer) => {
    data += chunk.toString('latin1');
    const end = data.indexOf('\r\n\r\n');
    if (end >= 0) resolveHead(data.slice(0, end));
    for (const waiter of waiters.filter((w) => end >= 0 && data.slice(end).includes(w.text))) waiter.resolve();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  void closed.then(() => resolveHead(data));
  socket.write(first);
  return {
    socket,
    received: () => data,
    head,
    closed,
    waitFor: (text) => new Promise((resolve) => waiters.push({ text, resolve })),
  };
}

/**
 * "Answered, not hung": the bound every `within` below uses. A loaded machine answers a handshake or closes a tunnel in
 * well under a second; this only turns a tunnel that never answers or never closes into a failure naming what was
 * awaited. It stays far below what else would close a tunnel in these tests (the default 30 s recheck interval, the
 * 5 min default idle timeout, an 8 h session), so a close within it still proves what closed it.
 */
const NOT_HUNG_MS = 10_000;

/** `promise`, or a rejection naming `what` after `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

let policies: string;
let host: Awaited<ReturnType<typeof startHost>>;
let gateway: RunningGateway;
/**
 * The idle timeout of `gateway`: long enough that the 200 ms between two ticks of the idle test, and the few steps of a
 * test between two writes, stay far inside it on a loaded machine; short enough to wait for it once.
 */
const IDLE_TIMEOUT_MS = 2000;

beforeAll(async () => {
  policies = mkdtempSync(join(tmpdir(), 'iam-websocket-tunnel-'));
  writeFileSync(join(policies, 'routes.yaml'), POLICY);
  const db = await createTestDatabase();
  await db.close();
  host = await startHost();
  gateway = await startTestGateway(host.url, { IAM_POLICIES_DIR: policies, UPSTREAM_WEBSOCKET_IDLE_TIMEOUT: `${IDLE_TIMEOUT_MS}ms` });
});
afterAll(async () => {
  await gateway?.close();
  await host?.stop();
});
beforeEach(() => {
  host.record.requests.length = 0;
  host.record.tunnels.length = 0;
});

function forgedReachedHost(): boolean {
  return host.record.requests.some((r) => r.url.startsWith('/api/admin') || r.headers['x-iam-user-id'] === 'u-admin');
}

describe('#11.1 upgrade requests tunnel nothing unchecked', () => {
  it.each([
    ['in the same write as the handshake', 'together'],
    ['right after the handshake, before its answer', 'after'],
    ['after the host answered 200', 'answered'],
  ])('#11.1: a host answering 200 keep-alive to a handshake never sees a forged request written %s', async (_name, when) => {
    const client = open(gateway, handshakeHead('/health') + (when === 'together' ? FORGED : ''));
    if (when === 'after') client.socket.write(FORGED);
    const head = await within(client.head, NOT_HUNG_MS, 'answer');
    if (when === 'answered' && !client.socket.destroyed) client.socket.write(FORGED);
    await within(client.closed, NOT_HUNG_MS, 'the gateway closes the connection');
    // Either the host's answer relayed (then closed), or a refusal of the early bytes: never a tunnel.
    expect(head).toMatch(/^HTTP\/1\.1 (200|400) /);
    if (head.startsWith('HTTP/1.1 200')) expect(head.toLowerCase()).toContain('connection: close');
    if (head.startsWith('HTTP/1.1 400')) expect(client.received()).toContain('"code":"IAM_BAD_REQUEST"');
    expect(forgedReachedHost()).toBe(false);
    expect(host.record.requests.length).toBeLessThanOrEqual(1);
  });

  it.each([
    ['h2c', ['HTTP2-Settings: AAMAAABkAAQAAP__'], 'Connection: Upgrade, HTTP2-Settings'],
    ['websocket, h2c', [], null],
    ['TLS/1.2', [], null],
    ['foo', [], null],
  ])('#11.1: "Upgrade: %s" is refused with 400 and nothing reaches the host', async (upgrade, extra, connection) => {
    let request = handshakeHead('/health', extra, upgrade);
    if (connection) request = request.replace('Connection: Upgrade', connection);
    const client = open(gateway, request + FORGED);
    await within(client.closed, NOT_HUNG_MS, 'the gateway closes the connection');
    expect(client.received()).toMatch(/^HTTP\/1\.1 400 /);
    expect(client.received()).toContain('"code":"IAM_BAD_REQUEST"');
    expect(host.record.requests).toEqual([]);
  });

  it('#11.1: a WebSocket handshake that is not a plain GET is refused', async () => {
    const client = open(gateway, handshakeHead('/public-ws').replace(/^GET/, 'POST').replace('\r\n\r\n', '\r\nContent-Length: 5\r\n\r\nhello'));
    await within(client.closed, NOT_HUNG_MS, 'the gateway closes the connection');
    expect(client.received()).toContain('"code":"IAM_BAD_REQUEST"');
    expect(host.record.requests).toEqual([]);
  });

  it('#11.1: bytes written before the 101 never reach the host; the handshake ends with 400', async () => {
    // The host holds its 101 for 2 s (a scenario window, nothing to poll): the early bytes land inside it however
    // slowly this machine runs.
    const client = open(gateway, handshakeHead('/public-ws?delay=2000'));
    // The host has the handshake (the gateway forwarded it) but has not answered yet.
    while (host.record.requests.length === 0) await new Promise((resolve) => setImmediate(resolve));
    client.socket.write('early bytes');
    await within(client.closed, NOT_HUNG_MS, 'the gateway closes the connection');
    expect(client.received()).toMatch(/^HTTP\/1\.1 400 /);
    expect(client.received()).toContain('"code":"IAM_BAD_REQUEST"');
    for (const tunnel of host.record.tunnels) await within(tunnel.closed, NOT_HUNG_MS, 'the host connection closes');
    expect(host.record.tunnels.map((t) => t.bytes.toString())).toEqual(host.record.tunnels.map(() => ''));
  });

  it('#11.1: after the 101 the tunnel carries bytes both ways', async () => {
    const client = open(gateway, handshakeHead('/public-ws'));
    expect(await within(client.head, NOT_HUNG_MS, '101')).toMatch(/^HTTP\/1\.1 101 /);
    client.socket.write('ping-1');
    await within(client.waitFor('ping-1'), NOT_HUNG_MS, 'echo');
    client.socket.destroy();
  });

  it('#11.1: an open tunnel closes after websocket-idle-timeout without traffic, not while bytes flow', async () => {
    const client = open(gateway, handshakeHead('/public-ws'));
    expect(await within(client.head, NOT_HUNG_MS, '101')).toMatch(/^HTTP\/1\.1 101 /);
    // Traffic every 200 ms for longer than the idle timeout: the tunnel stays open. The pauses are the scenario
    // (bytes spaced out in time), not a wait for something to happen.
    let last = Date.now();
    const trafficFrom = last;
    for (let i = 0; Date.now() - trafficFrom < 1.5 * IDLE_TIMEOUT_MS; i++) {
      client.socket.write(`tick-${i};`);
      await within(client.waitFor(`tick-${i};`), NOT_HUNG_MS, 'echo');
      last = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(client.socket.destroyed).toBe(false);
    const closedAt = await within(client.closed, NOT_HUNG_MS, 'the idle tunnel closes');
    // A lower bound: it waited for the idle timeout after the last byte (the echo passed the gateway before `last`).
    expect(closedAt - last).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 100);
  });

  describe('#11.1 a tunnel lives only as long as its session', () => {
    // Its own gateway with the default idle timeout (5 min): a quiet tunnel here can only be closed by its session
    // ending (or the 30 s default recheck), never by `gateway`'s short idle timeout, so a close proves the session path
    // and the surviving tunnel survives however slowly the steps between its writes run.
    let sessions: RunningGateway;
    beforeAll(async () => {
      sessions = await startTestGateway(host.url, { IAM_POLICIES_DIR: policies });
    });
    afterAll(async () => {
      await sessions?.close();
    });

    async function openTunnel(token: string): Promise<RawClient> {
      const client = open(sessions, handshakeHead('/ws', [`Authorization: Bearer ${token}`]));
      expect(await within(client.head, NOT_HUNG_MS, '101')).toMatch(/^HTTP\/1\.1 101 /);
      client.socket.write('hello');
      await within(client.waitFor('hello'), NOT_HUNG_MS, 'echo');
      return client;
    }

    it('#11.1: logging out closes the open tunnel', async () => {
      const alice = await login(sessions.url, 'alice');
      const client = await openTunnel(alice.accessToken);
      expect((await fetch(`${sessions.url}/iam/auth/logout`, { method: 'POST', headers: bearer(alice.accessToken) })).status).toBe(204);
      await within(client.closed, NOT_HUNG_MS, 'the tunnel closes after logout');
      await within(host.record.tunnels[0]!.closed, NOT_HUNG_MS, 'the host side closes too');
    });

    it('#11.1: revoking the session (from another session of the user) closes the open tunnel', async () => {
      const alice = await login(sessions.url, 'alice');
      const other = await login(sessions.url, 'alice');
      const client = await openTunnel(alice.accessToken);
      const survivor = await openTunnel(other.accessToken);
      expect((await fetch(`${sessions.url}/iam/sessions/revoke-others`, { method: 'POST', headers: bearer(other.accessToken) })).status).toBe(204);
      await within(client.closed, NOT_HUNG_MS, 'the revoked session tunnel closes');
      // The other session's tunnel is untouched.
      survivor.socket.write('still-here');
      await within(survivor.waitFor('still-here'), NOT_HUNG_MS, 'echo on the surviving tunnel');
      survivor.socket.destroy();
    });

    it('#11.1: a logout while the host is still answering the handshake: the 101 is not relayed, the client gets 401', async () => {
      const alice = await login(sessions.url, 'alice');
      // The host holds its 101 for 2 s (a scenario window): the logout lands inside it however slowly this machine runs.
      const client = open(sessions, handshakeHead('/ws?delay=2000', [`Authorization: Bearer ${alice.accessToken}`]));
      while (host.record.requests.length === 0) await new Promise((resolve) => setImmediate(resolve));
      expect((await fetch(`${sessions.url}/iam/auth/logout`, { method: 'POST', headers: bearer(alice.accessToken) })).status).toBe(204);
      expect(await within(client.head, NOT_HUNG_MS, 'the answer')).toMatch(/^HTTP\/1\.1 401 /);
      await within(client.closed, NOT_HUNG_MS, 'the connection closes');
      expect(client.received()).toContain('"code":"IAM_UNAUTHENTICATED"');
      await within(host.record.tunnels[0]!.closed, NOT_HUNG_MS, 'the host side closes too');
    });

    it('#11.1: revoking every session of the user closes the open tunnel', async () => {
      const alice = await login(sessions.url, 'alice');
      const client = await openTunnel(alice.accessToken);
      const userId = (alice.principal as { userId: string }).userId;
      await sessions.services!.sessions.revokeUser(userId, 'test', 'u-admin', { requestId: 'test', clientAddress: null });
      await within(client.closed, NOT_HUNG_MS, 'the tunnel closes after revocation');
    });
  });
});

describe('#11.1 a tunnel closes when its session expires', () => {
  let shortLived: RunningGateway;
  beforeAll(async () => {
    shortLived = await startTestGateway(host.url, { IAM_POLICIES_DIR: policies, IAM_TOKEN_TTL: '2s' });
  });
  afterAll(async () => {
    await shortLived?.close();
  });

  it('#11.1: the tunnel of a session closes at its absolute expiry even while bytes flow', async () => {
    const alice = await login(shortLived.url, 'alice');
    const client = open(shortLived, handshakeHead('/ws', [`Authorization: Bearer ${alice.accessToken}`]));
    expect(await within(client.head, NOT_HUNG_MS, '101')).toMatch(/^HTTP\/1\.1 101 /);
    const ticker = setInterval(() => client.socket.writable && client.socket.write('tick'), 100);
    try {
      const closedAt = await within(client.closed, NOT_HUNG_MS, 'the tunnel closes at expiry');
      expect(closedAt).toBeGreaterThanOrEqual(Date.parse(alice.expiresAt) - 50);
    } finally {
      clearInterval(ticker);
    }
  });
});

describe('#11.1 an open tunnel is authorized again', () => {
  let dir: string;
  let rechecking: RunningGateway;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'iam-websocket-recheck-'));
    writeFileSync(join(dir, 'routes.yaml'), POLICY);
    rechecking = await startTestGateway(host.url, { IAM_POLICIES_DIR: dir, UPSTREAM_WEBSOCKET_RECHECK_INTERVAL: '300ms' });
  });
  afterAll(async () => {
    await rechecking?.close();
  });

  it('#11.1: a tunnel the policy no longer allows closes within websocket-recheck-interval', async () => {
    const alice = await login(rechecking.url, 'alice');
    const client = open(rechecking, handshakeHead('/ws', [`Authorization: Bearer ${alice.accessToken}`]));
    expect(await within(client.head, NOT_HUNG_MS, '101')).toMatch(/^HTTP\/1\.1 101 /);
    // The route now needs a permission alice does not hold; no event tells the tunnel.
    writeFileSync(join(dir, 'routes.yaml'), POLICY.replace('{ path: /ws, methods: [GET], permission: project:read }', '{ path: /ws, methods: [GET], permission: admin:write }'));
    expect(client.socket.destroyed).toBe(false);
    expect((await rechecking.services!.policyReloader.reload('test')).ok).toBe(true);
    // Open until the reload, closed after it: only a recheck can close it, and the configured 300 ms interval is the
    // only one that runs within NOT_HUNG_MS (the default interval is 30 s, the idle timeout 5 min).
    await within(client.closed, NOT_HUNG_MS, 'the tunnel closes after a failed recheck');
  });
});

const redisUrl = process.env.REDIS_URL;

describeWithRedis('#11.1 revocation reaches the tunnels of every instance', () => {
  let a: RunningGateway;
  let b: RunningGateway;
  beforeAll(async () => {
    const shared = { IAM_POLICIES_DIR: policies, IAM_TOKEN_STORE_PREFIX: uniquePrefix('ws-multi'), REDIS_URL: redisUrl! };
    a = await startTestGateway(host.url, shared);
    b = await startTestGateway(host.url, shared);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('#11.1: logging out through instance A closes the tunnel open on instance B', async () => {
    const alice = await login(a.url, 'alice');
    const client = open(b, handshakeHead('/ws', [`Authorization: Bearer ${alice.accessToken}`]));
    expect(await within(client.head, NOT_HUNG_MS, '101')).toMatch(/^HTTP\/1\.1 101 /);
    expect((await fetch(`${a.url}/iam/auth/logout`, { method: 'POST', headers: bearer(alice.accessToken) })).status).toBe(204);
    await within(client.closed, NOT_HUNG_MS, 'the tunnel on B closes');
  });
});
