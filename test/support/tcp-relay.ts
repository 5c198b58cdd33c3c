/**
 * A TCP relay placed between the gateway and a real server (Redis, PostgreSQL, PGlite), so reliability tests
 * can inject real network faults without stopping a server other test runs share:
 *  - `cut()`: the server crashed or the network dropped: every connection reset, new connections refused;
 *  - `freeze()`: a silent partition: nothing passes and nothing tells the client;
 *  - `cutOnRequest(pattern)`: at a chosen request: before it reaches the server, or (the worst moment) after
 *    it reached the server but before its reply came back;
 *  - `restore()`: the server is back on the same address.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface TcpRelay {
  /** The relay's own port on 127.0.0.1 (stable across cut/restore). */
  readonly port: number;
  /** True between `cut()` and `restore()`. */
  readonly isCut: boolean;
  /** How many client connections the relay has accepted since it started. */
  readonly accepted: number;
  /** Destroys every relayed connection (both sides) and stops listening: new connections are refused. */
  cut(): Promise<void>;
  /**
   * A silent partition: connections stay open (and new ones are accepted) but no byte passes in either
   * direction, as when packets are dropped. Nothing tells the client; only its own timeouts can.
   */
  freeze(): void;
  /**
   * Arms a one-shot fault for the next bytes sent to the target that contain `pattern`. With `deliver`
   * (default) they reach the target but nothing it answers on that connection reaches the client any more,
   * and `settleMs` later (time for the server to act on them; default 100) the relay is cut: the client
   * cannot know whether its request took effect. Without `deliver` the relay is cut before they are sent.
   * Resolves once it has cut.
   */
  cutOnRequest(pattern: string, options?: { deliver?: boolean; settleMs?: number }): Promise<void>;
  /** Ends a cut (listens again on the same port) or a freeze (bytes flow again, held connections proceed). */
  restore(): Promise<void>;
  /** Stops for good. */
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  target: Socket;
  /** Set by `cutAfterRequest`: the target's answers are dropped. */
  replyLost: boolean;
}

/** Starts a relay on 127.0.0.1 (OS-assigned port) forwarding every connection to `targetHost:targetPort`. */
export async function startTcpRelay(targetHost: string, targetPort: number): Promise<TcpRelay> {
  const sockets = new Set<Socket>();
  /** Connections accepted while frozen, waiting for `restore()`. */
  const held = new Set<Socket>();
  const pairs = new Set<Pair>();
  let accepted = 0;
  let cut = false;
  let frozen = false;
  let closed = false;
  let trigger: { pattern: Buffer; deliver: boolean; fire: (pair: Pair) => void } | null = null;

  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    // A reset peer must not become an unhandled 'error' event in the test process.
    socket.on('error', () => socket.destroy());
  };

  const forward = (from: Socket, to: Socket, pair: Pair, toTarget: boolean): void => {
    from.on('data', (chunk: Buffer) => {
      if (!toTarget && pair.replyLost) return;
      if (toTarget && trigger && chunk.includes(trigger.pattern)) {
        const { fire, deliver } = trigger;
        trigger = null;
        fire(pair);
        if (!deliver) return;
      }
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (!frozen) from.resume();
        });
      }
    });
    from.once('end', () => to.end());
  };

  const relay = (client: Socket): void => {
    // A target host that is a path is a Unix socket (the embedded database's: #11.14).
    const target = targetHost.startsWith('/') ? connect({ path: targetHost }) : connect({ host: targetHost, port: targetPort });
    track(target);
    const pair: Pair = { client, target, replyLost: false };
    pairs.add(pair);
    forward(client, target, pair, true);
    forward(target, client, pair, false);
    // Either side closing takes the other one down, as a real broken connection would.
    client.once('close', () => {
      pairs.delete(pair);
      target.destroy();
    });
    target.once('close', () => client.destroy());
    client.resume();
  };

  const onConnection = (client: Socket): void => {
    accepted++;
    track(client);
    client.pause();
    if (!frozen) return relay(client);
    held.add(client);
    client.once('close', () => held.delete(client));
  };

  const listen = (server: Server, port: number): Promise<void> =>
    new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });

  let server = createServer(onConnection);
  await listen(server, 0);
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('tcp relay: no address');
  const port = address.port;

  const stopListening = (): Promise<void> =>
    new Promise((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });

  const cutNow = async (): Promise<void> => {
    cut = true;
    trigger = null;
    const stopped = stopListening();
    for (const socket of sockets) socket.destroy();
    await stopped;
  };

  return {
    port,
    get isCut() {
      return cut;
    },
    get accepted() {
      return accepted;
    },
    cut: cutNow,
    freeze() {
      frozen = true;
      for (const { client, target } of pairs) {
        client.pause();
        target.pause();
      }
    },
    cutOnRequest(pattern, { deliver = true, settleMs = 100 } = {}) {
      return new Promise<void>((resolve, reject) => {
        trigger = {
          pattern: Buffer.from(pattern),
          deliver,
          fire: (pair) => {
            pair.replyLost = true;
            if (!deliver) return void cutNow().then(resolve, reject);
            setTimeout(() => void cutNow().then(resolve, reject), settleMs);
          },
        };
      });
    },
    async restore() {
      if (closed) throw new Error('tcp relay: closed');
      if (frozen) {
        frozen = false;
        for (const { client, target } of pairs) {
          client.resume();
          target.resume();
        }
        for (const client of held) {
          held.delete(client);
          relay(client);
        }
      }
      if (server.listening) return;
      server = createServer(onConnection);
      // The port was ours a moment ago; another process may grab it in between, so retry briefly.
      for (let attempt = 0; ; attempt++) {
        try {
          await listen(server, port);
          break;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 20) throw error;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      cut = false;
    },
    async close() {
      closed = true;
      await cutNow();
    },
  };
}

/** `url` with its host and port replaced by the relay's (`redis://h:6379/0` → `redis://127.0.0.1:<relay>/0`). */
export function relayedUrl(url: string, relay: Pick<TcpRelay, 'port'>): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(relay.port);
  parsed.searchParams.delete('host'); // libpq's Unix-socket directory: the relay is reached over TCP
  return parsed.toString();
}

/** Host and port of a `redis://` or `postgresql://` URL (with the scheme's default port). */
export function targetOf(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  const defaults: Record<string, number> = { 'redis:': 6379, 'rediss:': 6379, 'postgres:': 5432, 'postgresql:': 5432 };
  const port = parsed.port ? Number(parsed.port) : defaults[parsed.protocol];
  if (!port) throw new Error(`no port in ${url}`);
  // libpq's `?host=/dir` (the embedded database, #11.14): the socket file is `<dir>/.s.PGSQL.<port>`.
  const socketDir = parsed.searchParams.get('host');
  if (socketDir?.startsWith('/')) return { host: `${socketDir}/.s.PGSQL.${port}`, port };
  // URL keeps IPv6 literals in brackets; net.connect wants them bare.
  return { host: parsed.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1', port };
}
