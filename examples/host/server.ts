/**
 * Starts the example host (examples/host/app.ts) on a port. Run directly, it listens on
 * `HOST_PORT` (default 3000), where policies/example.yaml expects its resource resolvers.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HostAuthorizationOptions } from '../../src/host';
import { createHostApp } from './app';

/** A running example host. */
export interface RunningHost {
  /** Base URL, e.g. `http://127.0.0.1:3000` (no trailing slash). */
  url: string;
  /** Stops listening and closes every open connection, keep-alive ones included. */
  close(): Promise<void>;
  /** From now on, asks this gateway for decisions (lists filtered by `plan`, task moves checked on both projects). */
  connect(options: HostAuthorizationOptions): void;
}

/**
 * Starts the example host with fresh demo data.
 * @param port TCP port; `0` lets the OS choose a free one (tests), read it back from `url`.
 * @param host interface to bind; the default keeps the host reachable from this machine only, so the
 *   gateway is its only way in.
 */
export function startHost(port: number, host = '127.0.0.1'): Promise<RunningHost> {
  const app = createHostApp();
  const handle = app.callback();
  // Koa's handler settles its own promise (errors become responses): nothing to await here.
  const server = createServer((req, res) => void handle(req, res));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const { address, port: boundPort } = server.address() as AddressInfo;
      const hostPart = address.includes(':') ? `[${address}]` : address;
      resolve({
        url: `http://${hostPart}:${boundPort}`,
        connect: (options) => app.connect(options),
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()));
            server.closeAllConnections();
          }),
      });
    });
  });
}

if (require.main === module) {
  const port = Number(process.env.HOST_PORT ?? 3000);
  startHost(port).then(
    (running) => {
      process.stdout.write(`example host listening on ${running.url}\n`);
      const stop = (): void => {
        running.close().then(() => process.exit(0), () => process.exit(1));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    },
    (error: unknown) => {
      process.stderr.write(`example host failed to start: ${String(error)}\n`);
      process.exit(1);
    },
  );
}
