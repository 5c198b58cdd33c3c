import { loadConfig, type GatewayConfig } from '../config';
import { startGateway } from '../app/start-gateway';
import { runPrimary } from '../workers/primary';
import { isGatewayWorker, runWorker } from '../workers/worker';
import { parseWorkersOption, resolveWorkerCount } from '../workers/worker-count';
import { parseCommandLine, UsageError, type CliCommand } from './command-line';

const USAGE = `usage: iam-gateway serve [--workers N|auto]

Starts the gateway: the proxy and /iam on PORT (server.port), /health/live, /health/ready and /metrics on
MANAGEMENT_PORT (server.management-port). SIGTERM or SIGINT stops it; in-flight requests get
server.shutdown-timeout to finish. A failed start closes what it opened and exits 1.

Options:
  --workers N|auto  processes serving the proxy port (default server.workers / SERVER_WORKERS, 1); auto = one
                    per available core. Above 1 a primary process forks them (node:cluster: they share the
                    port), serves the management port for all of them and restarts one that dies; it needs
                    REDIS_URL and DATABASE_URL. SIGTERM or SIGINT to the primary drains every worker.

The configuration comes from IAM_CONFIG (default config/default.yaml) and the environment.`;

/** `iam-gateway serve`. */
export const serveCommand: CliCommand = {
  usage: USAGE,
  async run(args) {
    const { values } = parseCommandLine(args, USAGE, { workers: { type: 'string' } }, 0);
    // A worker forked by a primary (same command line): the primary sends it the configuration.
    if (isGatewayWorker()) return runWorker();
    const flag = values.workers === undefined ? undefined : parseWorkersOption(values.workers);
    if (flag === null) throw new UsageError(`--workers: "${values.workers}" is not auto or a whole number from 1 to 1024`, USAGE);
    const config = loadConfig();
    const workers = resolveWorkerCount(flag, config);
    const code = await exitOnFailedStart(() => (workers.count > 1 ? runPrimary(config, workers) : serveOneProcess(config)));
    // close() gives up on a database or token store that does not answer, but its hung socket would keep the
    // process alive: exit anyway once everything that can finish has (the timer itself holds nothing open).
    setTimeout(() => process.exit(), 500).unref();
    return code;
  },
};

/** One process serves both ports until SIGTERM or SIGINT. */
async function serveOneProcess(config: GatewayConfig): Promise<number> {
  const gateway = await startGateway(config);
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      gateway.logger.info({ signal }, 'stopping');
      void gateway.close().then(resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

/**
 * Only a start fails (a stop always resolves): that ends the process with 1 (main prints why). The start closed
 * what it opened, and a handle that still lingers (a pool socket, a worker thread) must not keep a half-started
 * gateway alive.
 */
async function exitOnFailedStart(serve: () => Promise<number>): Promise<number> {
  try {
    return await serve();
  } catch (error) {
    setTimeout(() => process.exit(1), 500).unref();
    throw error;
  }
}
