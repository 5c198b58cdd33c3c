import cluster, { type Worker } from 'node:cluster';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listen, SHUTDOWN_CLEANUP_GRACE_MS } from '../http/server-lifecycle';
import { createLogger, type Logger } from '../observability/logger';
import { createPrimaryMetrics, type PrimaryMetrics } from '../observability/metrics';
import { CleanupStack } from '../app/cleanup-stack';
import type { GatewayConfig } from '../config';
import { openGatewayDatabase } from '../app/database';
import { urlHost } from '../app/listeners';
import { serveManagement, type ManagementEndpoints, type ReadinessReport } from '../app/management-server';
import { loadPolicyOrFail } from '../app/policy';
import { EndingSpool, replaySpooledEndings } from '../sessions/ending-spool';
import { preflight } from '../app/preflight';
import { ClusterMetrics, type MetricFamily } from './cluster-metrics';
import { type AskMessage, type ReplyMessage, type StartMessage, type WorkerMessage } from './protocol';
import { WORKER_ENV } from './worker';
import { workerRefusal, type WorkerCount } from './worker-count';

/**
 * A crashed worker is replaced at once; a slot whose replacement dies again (a worker that cannot start, a crash
 * loop) waits 1 s, then twice as long after each further crash, up to this.
 */
const MAX_RESTART_DELAY_MS = 30_000;
const FIRST_BACKOFF_MS = 1000;
/** A worker that served this long before it crashed starts its slot's backoff over. */
const STABLE_AFTER_MS = 60_000;
/** How long the primary waits for a worker's readiness or metrics (a worker's own checks give up after 2 s). */
const ASK_TIMEOUT_MS = 3000;
/** After a signal to a worker alone, how long the primary waits before replacing it: a signal to the whole group reaches the primary too. */
const REPLACE_AFTER_STOP_MS = 200;

type Answer = Extract<ReplyMessage, { what: 'readiness' | 'metrics' }>;

/** One worker process the primary forked. */
interface WorkerState {
  worker: Worker;
  slot: Slot;
  pid: number;
  /** When it said it listens (null while it starts). */
  listeningSince: number | null;
  /** The signal it said it stops on (a signal to this worker alone, unless the primary is stopping too). */
  stopSignal: string | null;
  /** A new worker took its slot (it stopped on its own signal): its exit is expected. */
  replaced: boolean;
  exited: Promise<void>;
}

/** One of the N places a worker serves in; a replacement takes the slot of the worker it replaces. */
interface Slot {
  index: number;
  current: WorkerState | null;
  crashes: number;
  restartTimer: NodeJS.Timeout | null;
}

/**
 * The primary of `serve --workers N` (node:cluster): checks that the configuration can be shared by several
 * processes, runs what must run once (preflight, the policy check, the migrations and the start-time
 * provisioning), serves the management port for all workers, forks N workers that share the proxy port (the
 * primary accepts connections and hands them out round-robin), replaces a worker that dies (with a backoff),
 * forwards SIGHUP, and on SIGTERM or SIGINT stops every worker gracefully and exits 0. Resolves the exit code;
 * throws when the start fails (nothing left running).
 */
export async function runPrimary(config: GatewayConfig, workers: WorkerCount, hooks: ServeHooks = {}): Promise<number> {
  const refusal = workerRefusal(config, workers);
  if (refusal !== null) throw new Error(refusal);
  const logger = createLogger(config.log.level).child({ worker: 0 });
  for (const warning of config.warnings) logger.warn({}, warning);
  if (config.iam.enabled) await prepareOnce(config, logger, hooks.progress ?? null);
  const primary = new Primary(config, workers.count, logger);
  // Taken before the workers are forked: a stop during the start stops the workers that started, gracefully.
  let signalled: string | null = null;
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      signalled = signal;
      logger.info({ signal }, 'stopping: every worker drains, then the primary exits');
      void primary.stop().then(resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  try {
    await primary.start();
    if (signalled === null) hooks.onListening?.();
  } catch (error) {
    if (signalled === null) throw error;
  }
  await stopped;
  return 0;
}

/** What `serve` does around a start that listens (the pid file of `--pid-file`). */
export interface ServeHooks {
  /** Called once every worker listens (not for a start that was stopped first). */
  onListening?: () => void;
  /** Where the start's progress lines go (a new database, its migrations). */
  progress?: (line: string) => void;
}

/**
 * What N workers must not each do at once: preflight (one clear error instead of N), the policy check, the
 * migrations (concurrent `migrate up` runs would race on the same DDL) and the start-time provisioning file.
 * The workers then find the schema current and skip the provisioning file.
 */
async function prepareOnce(config: GatewayConfig, logger: Logger, progress: ((line: string) => void) | null): Promise<void> {
  const files = preflight(config);
  try {
    await loadPolicyOrFail(config, logger, { warnings: false });
    const cleanups = new CleanupStack(logger);
    try {
      const database = await openGatewayDatabase(config, logger, cleanups, files.provisioning, progress);
      // Endings an earlier stop spooled are recorded before any worker serves (a worker replays too, at its own
      // start: what a crashed sibling left).
      await replaySpooledEndings(new EndingSpool(config.iam.audit.spoolDir), database.repository, logger);
    } finally {
      await cleanups.run();
    }
  } finally {
    await files.authenticator.close?.();
  }
}

class Primary {
  private readonly slots: Slot[];
  private readonly live = new Map<number, WorkerState>();
  private readonly metrics: PrimaryMetrics = createPrimaryMetrics();
  private readonly clusterMetrics = new ClusterMetrics();
  private readonly pending = new Map<number, { worker: number; resolve: (answer: Answer | null) => void; reject: (error: Error) => void }>();
  private nextAsk = 1;
  private management: Server | null = null;
  private managementPort = 0;
  private stopping = false;
  private stopped: Promise<void> | null = null;
  /** Set while the first N workers start: any exit then fails the start. */
  private starting: { fail: (error: Error) => void; listening: () => void } | null = null;
  private port: number | null = null;
  private readonly onSighup = (): void => this.reloadPolicies();

  constructor(
    private readonly config: GatewayConfig,
    count: number,
    private readonly logger: Logger,
  ) {
    this.slots = Array.from({ length: count }, (_, index) => ({ index, current: null, crashes: 0, restartTimer: null }));
  }

  async start(): Promise<void> {
    const endpoints: ManagementEndpoints = { readiness: () => this.readiness(), metrics: () => this.scrape(), contentType: this.metrics.registry.contentType };
    const management = serveManagement(endpoints, this.config.server, this.logger);
    await listen(management, this.config.server.managementPort, this.config.server.managementHost);
    this.management = management;
    this.managementPort = (management.address() as AddressInfo).port;
    if (this.stopping) {
      // Stopped while the port opened (stop() found nothing to close yet): fork nothing.
      management.close();
      throw new Error('stopped during the start');
    }

    // Advanced serialization: metric values may be NaN or ±Infinity, which JSON cannot carry.
    cluster.setupPrimary({ serialization: 'advanced' });
    cluster.on('message', (worker: Worker, message: unknown) => this.onMessage(worker, message));
    process.on('SIGHUP', this.onSighup);

    try {
      await new Promise<void>((resolve, reject) => {
        let listening = 0;
        this.starting = {
          fail: reject,
          listening: () => {
            if (++listening === this.slots.length) resolve();
          },
        };
        for (const slot of this.slots) this.fork(slot);
      });
    } catch (error) {
      this.starting = null;
      await this.stop();
      throw error;
    }
    this.starting = null;
    if (this.stopping) throw new Error('stopped during the start');
    this.logger.info(
      {
        port: this.port,
        managementPort: this.managementPort,
        upstream: this.config.upstream.url,
        enabled: this.config.iam.enabled,
        workers: this.slots.length,
        pids: this.slots.map((slot) => slot.current?.pid),
      },
      'iam-gateway listening',
    );
  }

  /** Stops every worker gracefully (each drains within server.shutdown-timeout), then closes the management port. */
  stop(): Promise<void> {
    this.stopped ??= this.stopWorkers();
    return this.stopped;
  }

  private async stopWorkers(): Promise<void> {
    this.stopping = true;
    // A stop during the start ends the start (the workers that started are stopped below).
    this.starting?.fail(new Error('stopped during the start'));
    process.off('SIGHUP', this.onSighup);
    for (const slot of this.slots) if (slot.restartTimer) clearTimeout(slot.restartTimer);
    const states = [...this.live.values()];
    for (const state of states) signal(state.worker, 'SIGTERM');
    // A worker drains for up to shutdown-timeout, then closes its subsystems within the cleanup grace.
    const deadline = this.config.server.shutdownTimeoutMs + SHUTDOWN_CLEANUP_GRACE_MS + 2000;
    const allExited = Promise.all(states.map((state) => state.exited));
    const timer = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), deadline).unref());
    if ((await Promise.race([allExited, timer])) === 'late') {
      const late = [...this.live.values()];
      this.logger.error({ workerIds: late.map((state) => state.worker.id), graceMs: deadline }, 'shutdown: workers still running after the drain and cleanup grace; killing them');
      for (const state of late) signal(state.worker, 'SIGKILL');
      await allExited;
    }
    const management = this.management;
    if (management) {
      await new Promise<void>((resolve) => management.close(() => resolve()));
      management.closeAllConnections();
    }
    this.logger.info({}, 'iam-gateway stopped');
  }

  private fork(slot: Slot): void {
    slot.restartTimer = null;
    const worker = cluster.fork({ [WORKER_ENV]: '1' });
    let exited!: () => void;
    const state: WorkerState = {
      worker,
      slot,
      pid: worker.process.pid ?? -1,
      listeningSince: null,
      stopSignal: null,
      replaced: false,
      exited: new Promise<void>((resolve) => (exited = resolve)),
    };
    slot.current = state;
    this.live.set(worker.id, state);
    worker.on('exit', (code: number | null, signalName: string | null) => {
      this.onExit(state, code, signalName);
      exited();
    });
    // The child's IPC can fail when it dies while a message is on its way: its exit is handled above.
    worker.on('error', (error: Error) => this.logger.warn({ err: error, workerId: worker.id }, 'worker IPC error'));
    const start: StartMessage = { type: 'iam:start', config: this.config, management: { url: `http://${urlHost(this.config.server.managementHost)}:${this.managementPort}`, port: this.managementPort } };
    worker.send(start);
  }

  private onMessage(worker: Worker, message: unknown): void {
    const state = this.live.get(worker.id);
    if (state === undefined || typeof message !== 'object' || message === null) return;
    const typed = message as WorkerMessage;
    if (typed.type === 'iam:listening') {
      state.listeningSince = Date.now();
      this.port ??= typed.port;
      this.metrics.workers.set(this.listeningCount());
      this.starting?.listening();
    } else if (typed.type === 'iam:stopping') {
      state.stopSignal = typed.signal;
      // A signal to this worker alone (the primary sends its own only when it stops): the worker drains like a single
      // process, and a new one takes its slot while it drains. Decided a moment later (or at its exit, if sooner), in
      // case the signal went to the whole process group and reaches the primary too.
      setTimeout(() => this.replace(state), REPLACE_AFTER_STOP_MS).unref();
    } else if (typed.type === 'iam:reply') {
      const pending = this.pending.get(typed.id);
      if (pending === undefined) return;
      this.pending.delete(typed.id);
      if (typed.what === 'failed') pending.reject(new Error(`worker ${worker.id}: ${typed.message}`));
      else pending.resolve(typed);
    }
  }

  private onExit(state: WorkerState, code: number | null, signalName: string | null): void {
    const { worker, slot } = state;
    this.live.delete(worker.id);
    if (slot.current === state) slot.current = null;
    this.metrics.workers.set(this.listeningCount());
    void this.clusterMetrics.retire(worker.id);
    for (const [id, pending] of this.pending) {
      if (pending.worker !== worker.id) continue;
      this.pending.delete(id);
      pending.resolve(null);
    }
    const how = { workerId: worker.id, workerPid: state.pid, code, signal: signalName };
    if (this.stopping) return;
    if (this.starting) {
      this.logger.error(how, 'a worker exited during the start');
      this.starting.fail(new Error(`worker ${worker.id} (pid ${state.pid}) exited during the start (${signalName ?? `exit code ${String(code)}`}); see its error above`));
      return;
    }
    if (state.stopSignal !== null) {
      this.logger.info(how, 'worker stopped');
      this.replace(state);
      return;
    }
    // Crashed, killed, or stopped without a word: restart with a backoff, so a worker that cannot start is not a crash loop.
    const stable = state.listeningSince !== null && Date.now() - state.listeningSince >= STABLE_AFTER_MS;
    slot.crashes = stable ? 1 : slot.crashes + 1;
    const delayMs = slot.crashes === 1 ? 0 : Math.min(MAX_RESTART_DELAY_MS, FIRST_BACKOFF_MS * 2 ** (slot.crashes - 2));
    this.logger.error({ ...how, restartInMs: delayMs }, 'worker exited unexpectedly; a new worker starts after the backoff');
    this.metrics.workerRestarts.inc({ reason: 'crashed' });
    slot.restartTimer = setTimeout(() => this.fork(slot), delayMs);
  }

  /** A worker stopping on a signal sent to it alone: a new worker takes its slot at once (no backoff). */
  private replace(state: WorkerState): void {
    if (this.stopping || this.starting || state.replaced) return;
    state.replaced = true;
    this.logger.info({ workerId: state.worker.id, workerPid: state.pid, signal: state.stopSignal }, 'worker stopping on a signal sent to it alone; a new worker takes its place');
    this.metrics.workerRestarts.inc({ reason: 'stopped' });
    this.fork(state.slot);
  }

  /** SIGHUP to the primary: every worker that has loaded its policies reloads them (app/policy.ts). */
  private reloadPolicies(): void {
    const listening = [...this.live.values()].filter((state) => state.listeningSince !== null);
    this.logger.info({ workerIds: listening.map((state) => state.worker.id) }, 'SIGHUP: the workers reload their policies');
    for (const state of listening) signal(state.worker, 'SIGHUP');
  }

  /**
   * Ready when at least one worker listens and every listening worker is ready; not ready while stopping. The
   * primary hands connections only to listening workers, so a slot whose worker died (and is being replaced) takes
   * no traffic and does not make the instance unready: the others serve everything meanwhile. A listening worker
   * that is not ready (or does not answer) does get traffic, so it does.
   */
  private async readiness(): Promise<ReadinessReport> {
    const listening = [...this.live.values()].filter((state) => state.listeningSince !== null);
    const answers = await Promise.all(
      listening.map((state) =>
        this.ask(state, 'readiness').then(
          (answer) => (answer?.what === 'readiness' ? answer.readiness : null),
          () => null,
        ),
      ),
    );
    const checks: Record<string, { ok: boolean }> = {};
    if (this.stopping) checks.shutdown = { ok: false };
    checks.workers = { ok: listening.length > 0 && answers.every((answer) => answer !== null) };
    for (const answer of answers) {
      for (const [name, { ok }] of Object.entries(answer?.checks ?? {})) checks[name] = { ok: ok && (checks[name]?.ok ?? true) };
    }
    const ready = !this.stopping && listening.length > 0 && answers.every((answer) => answer?.ready === true);
    return { ready, checks };
  }

  /** Every worker's metrics, aggregated; fails (500) when a live worker does not answer, rather than serve partial sums. */
  private async scrape(): Promise<string> {
    const states = [...this.live.values()].filter((state) => state.listeningSince !== null);
    const answers = await Promise.all(states.map((state) => this.ask(state, 'metrics')));
    const families: MetricFamily[][] = [];
    answers.forEach((answer, index) => {
      if (answer?.what !== 'metrics') return; // exited meanwhile: its counters are retired
      this.clusterMetrics.record(states[index]!.worker.id, answer.metrics);
      families.push(answer.metrics);
    });
    return this.clusterMetrics.exposition(families, this.metrics.registry);
  }

  /** Asks a worker; null when it exits before answering; rejects when it does not answer in time. */
  private ask(state: WorkerState, what: AskMessage['what']): Promise<Answer | null> {
    const id = this.nextAsk++;
    return new Promise<Answer | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`worker ${state.worker.id} did not answer (${what}) within ${ASK_TIMEOUT_MS} ms`));
      }, ASK_TIMEOUT_MS);
      const settle =
        <T>(fn: (value: T) => void) =>
        (value: T): void => {
          clearTimeout(timer);
          fn(value);
        };
      this.pending.set(id, { worker: state.worker.id, resolve: settle(resolve), reject: settle(reject) });
      const message: AskMessage = { type: 'iam:ask', id, what };
      try {
        state.worker.send(message);
      } catch {
        this.pending.delete(id);
        settle(resolve)(null);
      }
    });
  }

  private listeningCount(): number {
    return [...this.live.values()].filter((state) => state.listeningSince !== null && !state.replaced).length;
  }
}

function signal(worker: Worker, name: NodeJS.Signals): void {
  try {
    worker.process.kill(name);
  } catch {
    // Already gone.
  }
}
