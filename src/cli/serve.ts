import * as path from 'node:path';
import { loadConfig, type GatewayConfig } from '../config';
import { startGateway } from '../app/start-gateway';
import { runPrimary, type ServeHooks } from '../workers/primary';
import { isGatewayWorker, runWorker } from '../workers/worker';
import { parseWorkersOption, resolveWorkerCount } from '../workers/worker-count';
import { parseCommandLine, UsageError, type CliCommand } from './command-line';
import { claimPidFile } from './pid-file';

const USAGE = `usage: iam-gateway serve [--workers N|auto] [--pid-file FILE]

Starts the gateway: the proxy and /iam on PORT (server.port), /health/live, /health/ready and /metrics on
MANAGEMENT_PORT (server.management-port). SIGTERM or SIGINT stops it; in-flight requests get
server.shutdown-timeout to finish. A failed start closes what it opened and exits 1.

Options:
  --pid-file FILE   once listening, write this process's pid to FILE (with --workers: the primary's); a clean
                    stop removes it. Stop the gateway with \`kill $(cat FILE)\`. A FILE naming a gateway that
                    still runs refuses the start (exit 2); one naming a process that is gone is overwritten.
  --workers N|auto  processes serving the proxy port (default server.workers / SERVER_WORKERS, 1); auto = one
                    per available core. Above 1 a primary process forks them (node:cluster: they share the
                    port), serves the management port for all of them and restarts one that dies; it needs
                    REDIS_URL and DATABASE_URL. SIGTERM or SIGINT to the primary drains every worker.

The configuration comes from IAM_CONFIG (default config/default.yaml) and the environment. Without IAM_CONFIG,
IAM_POLICIES_DIR and a policies/ directory here, it serves the example policy the package ships (said on stderr).`;

/** `iam-gateway serve`. */
export const serveCommand: CliCommand = {
  usage: USAGE,
  async run(args, { stderr }) {
    const { values } = parseCommandLine(args, USAGE, { workers: { type: 'string' }, 'pid-file': { type: 'string' } }, 0);
    // A worker forked by a primary (same command line): the primary sends it the configuration.
    if (isGatewayWorker()) return runWorker();
    const flag = values.workers === undefined ? undefined : parseWorkersOption(values.workers);
    if (flag === null) throw new UsageError(`--workers: "${values.workers}" is not auto or a whole number from 1 to 1024`, USAGE);
    if (values['pid-file'] === '') throw new UsageError('--pid-file: the file name is empty', USAGE);
    // Checked before anything is opened: a second gateway started by mistake fails here, not on the port or the data lock.
    const pidFile = values['pid-file'] === undefined ? null : claimPidFile(path.resolve(values['pid-file']));
    // Like the configuration file, the policy falls back to the package's own when the working directory has none.
    const config = loadConfig({ packagedPolicy: true });
    if (config.source.packagedPolicy) {
      stderr.write(
        `iam-gateway: no policies/ directory here and no iam.policy.dir (IAM_POLICIES_DIR) set: serving the example policy the package ships, ${path.join(config.iam.policy.dir, 'example.yaml')}; write your own in policies/ (docs/policies.md)\n`,
      );
    }
    const workers = resolveWorkerCount(flag, config);
    // What a first start spends seconds on (creating the embedded database, the migrations) is shown as it happens.
    const hooks: ServeHooks = { onListening: () => pidFile?.write(), progress: (line) => stderr.write(`${line}\n`) };
    let code: number;
    try {
      code = await exitOnFailedStart(() => (workers.count > 1 ? runPrimary(config, workers, hooks) : serveOneProcess(config, hooks)));
    } finally {
      pidFile?.remove();
    }
    // close() gives up on a database or token store that does not answer, but its hung socket would keep the
    // process alive: exit anyway once everything that can finish has (the timer itself holds nothing open).
    setTimeout(() => process.exit(), 500).unref();
    return code;
  },
};

/** One process serves both ports until SIGTERM or SIGINT. */
async function serveOneProcess(config: GatewayConfig, hooks: ServeHooks): Promise<number> {
  const gateway = await startGateway(config, hooks.progress ? { progress: hooks.progress } : {});
  hooks.onListening?.();
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
