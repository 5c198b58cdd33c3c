import cluster from 'node:cluster';
import { createLogger } from '../observability/logger';
import { startGatewayAs } from '../app/start-gateway';
import type { RunningGateway } from '../app/running-gateway';
import { isMessage, type AskMessage, type ReplyMessage, type StartMessage, type WorkerMessage } from './protocol';

/** Set by the primary in its workers' environment: only such a process runs as a worker. */
export const WORKER_ENV = 'IAM_GATEWAY_WORKER';

/** True in a worker process forked by `serve --workers N`. */
export function isGatewayWorker(): boolean {
  return cluster.isWorker && process.env[WORKER_ENV] === '1';
}

/**
 * A worker of `serve --workers N`: waits for the primary's configuration, starts the gateway on the shared
 * proxy port (no management port: the primary serves it and asks this process for its readiness and metrics
 * over IPC), and stops gracefully on SIGTERM or SIGINT, or when the primary goes away (the IPC channel closes).
 * A signal sent to this worker alone drains it like a single process; the primary then starts a new worker
 * in its place (docs/configuration.md, "Workers"). Resolves the exit code.
 */
export async function runWorker(): Promise<number> {
  const id = cluster.worker?.id ?? 0;
  // Signals are taken from the first moment, so a stop that arrives while the gateway starts waits for the start.
  // They stay taken for the whole life of the worker: a signal sent to the process group (Ctrl-C, `kill -- -PGID`,
  // systemd's KillMode=control-group) reaches this worker and then the primary, which passes its own stop on to
  // every worker; with the handler gone, that second SIGTERM would end the worker at once and reset every
  // connection it was draining. A repeated signal changes nothing: the first one's drain is bounded, and the
  // primary kills a worker still running after it.
  const stopRequested = new Promise<string>((resolve) => {
    process.on('SIGTERM', () => resolve('SIGTERM'));
    process.on('SIGINT', () => resolve('SIGINT'));
    process.once('disconnect', () => resolve('disconnect'));
  });
  // SIGHUP reloads the policies once they are loaded (app/policy.ts); before that it must not end the process.
  process.on('SIGHUP', () => undefined);
  // The primary gone while this worker starts: nothing is served yet, and the shared port went with the primary.
  let started = false;
  process.once('disconnect', () => {
    if (!started) process.exit(1);
  });
  // A message to a primary that is gone fails with EPIPE on the worker object: the disconnect above handles it.
  cluster.worker?.on('error', () => undefined);

  const start = await Promise.race([nextStartMessage(), stopRequested.then(() => null)]);
  if (start === null) return 0;
  const logger = createLogger(start.config.log.level).child({ worker: id });
  let gateway: RunningGateway;
  try {
    gateway = await startGatewayAs(start.config, { logger }, { id, management: start.management });
  } catch (error) {
    // As in a single process (cli/serve.ts): main prints why, and a lingering handle must not keep the worker alive.
    setTimeout(() => process.exit(1), 500).unref();
    throw error;
  }
  started = true;
  process.on('message', (message: unknown) => {
    if (isMessage<AskMessage>(message, 'iam:ask')) void answer(gateway, message).then(send);
  });
  send({ type: 'iam:listening', port: gateway.port, pid: process.pid });

  const signal = await stopRequested;
  logger.info({ signal }, signal === 'disconnect' ? 'stopping: the primary went away' : 'stopping');
  send({ type: 'iam:stopping', signal });
  await gateway.close();
  if (process.connected) process.disconnect();
  // As in a single process: a hung database or token store socket must not keep the worker alive after close().
  setTimeout(() => process.exit(), 500).unref();
  return 0;
}

function nextStartMessage(): Promise<StartMessage> {
  return new Promise((resolve) => {
    const onMessage = (message: unknown): void => {
      if (!isMessage<StartMessage>(message, 'iam:start')) return;
      process.off('message', onMessage);
      resolve(message);
    };
    process.on('message', onMessage);
  });
}

async function answer(gateway: RunningGateway, ask: AskMessage): Promise<ReplyMessage> {
  try {
    if (ask.what === 'readiness') return { type: 'iam:reply', id: ask.id, what: 'readiness', readiness: await gateway.managementEndpoints.readiness() };
    const metrics = (await gateway.metrics.registry.getMetricsAsJSON()) as unknown as Extract<ReplyMessage, { what: 'metrics' }>['metrics'];
    return { type: 'iam:reply', id: ask.id, what: 'metrics', metrics };
  } catch (error) {
    return { type: 'iam:reply', id: ask.id, what: 'failed', message: (error as Error).message };
  }
}

function send(message: WorkerMessage): void {
  if (process.connected) process.send!(message);
}
