import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Keeps the set of open sockets so shutdown can close idle ones and, at the deadline, the rest. */
export function trackConnections(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return sockets;
}

/**
 * Graceful stop (issue: SIGTERM): stop accepting, close idle keep-alive connections now, let in-flight
 * requests finish until `deadlineMs`, then destroy what is left.
 */
export async function stopServer(server: Server, sockets: Set<Socket>, deadlineMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // Connections that finish their request later must not stay open for keep-alive.
  const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
  const deadline = new Promise<void>((resolve) => setTimeout(resolve, deadlineMs).unref());
  await Promise.race([closed, deadline]);
  clearInterval(idleSweep);
  for (const socket of sockets) socket.destroy();
  await closed;
}

/** Time allowed after the drain for closing pools and flushing buffered writes (then the stop gives up). */
export const SHUTDOWN_CLEANUP_GRACE_MS = 3000;

/**
 * How often Node's HTTP server checks `headersTimeout`/`requestTimeout` (its `connectionsCheckingInterval`,
 * 30 s by default, which would let a slowloris client hold a socket up to 30 s past the configured timeout):
 * a quarter of the shortest enabled timeout, between 100 ms and 1 s.
 */
export function timeoutSweepInterval(...timeoutsMs: number[]): number {
  const enabled = timeoutsMs.filter((ms) => ms > 0);
  if (enabled.length === 0) return 1000;
  return Math.min(1000, Math.max(100, Math.floor(Math.min(...enabled) / 4)));
}

/**
 * Resolves true when `work` settles within `ms`, false otherwise (it keeps running; its outcome is
 * ignored). Shutdown uses it so that an unreachable database or token store cannot hold a stop forever.
 */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work.then(() => true, () => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}
