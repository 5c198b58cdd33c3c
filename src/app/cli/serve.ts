import { loadConfig } from '../config';
import { startGateway } from '../start-gateway';
import { parseCommandLine, type CliCommand } from './command-line';

const USAGE = `usage: iam-gateway serve

Starts the gateway: the proxy and /iam on PORT (server.port), /health/live, /health/ready and /metrics on
MANAGEMENT_PORT (server.management-port). SIGTERM or SIGINT stops it; in-flight requests get
server.shutdown-timeout to finish. A failed start closes what it opened and exits 1.

Options: none; the configuration comes from IAM_CONFIG (default config/default.yaml) and the environment.`;

/** `iam-gateway serve`. */
export const serveCommand: CliCommand = {
  usage: USAGE,
  async run(args) {
    parseCommandLine(args, USAGE, {}, 0);
    const config = loadConfig();
    let gateway: Awaited<ReturnType<typeof startGateway>>;
    try {
      gateway = await startGateway(config);
    } catch (error) {
      // A failed start ends the process with 1 (main prints why): startGateway closed what it opened, and a
      // handle that still lingers (a pool socket, a worker thread) must not keep a half-started gateway alive.
      setTimeout(() => process.exit(1), 500).unref();
      throw error;
    }
    await new Promise<void>((resolve) => {
      const stop = (signal: string): void => {
        gateway.logger.info({ signal }, 'stopping');
        void gateway.close().then(resolve);
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
    // close() gives up on a database or token store that does not answer, but its hung socket would keep the
    // process alive: exit anyway once everything that can finish has (the timer itself holds nothing open).
    setTimeout(() => process.exit(), 500).unref();
    return 0;
  },
};
