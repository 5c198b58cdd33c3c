import { availableParallelism } from 'node:os';
import type { GatewayConfig } from '../config';

/** How many worker processes `serve` runs, and where that number came from (for messages). */
export interface WorkerCount {
  count: number;
  /** `--workers 2`, `server.workers` or `server.workers auto (2 cores)`. */
  source: string;
}

/** `--workers N|auto`: null when the value is neither (the caller reports a usage error). */
export function parseWorkersOption(value: string): number | 'auto' | null {
  if (value === 'auto') return 'auto';
  if (!/^[1-9][0-9]{0,3}$/.test(value) || Number(value) > 1024) return null;
  return Number(value);
}

/** The flag wins over `server.workers`; `auto` = `os.availableParallelism()`. */
export function resolveWorkerCount(flag: number | 'auto' | undefined, config: GatewayConfig, cores = availableParallelism()): WorkerCount {
  const setting = flag ?? config.server.workers;
  const origin = flag === undefined ? 'server.workers' : '--workers';
  if (setting === 'auto') return { count: Math.max(1, cores), source: `${origin} auto: ${cores} core${cores === 1 ? '' : 's'}` };
  return { count: setting, source: `${origin} ${setting}` };
}

/**
 * Why this configuration cannot run several workers, as one message (null: it can). Each worker is its own process,
 * so whatever lives in one process cannot be shared. Checked before anything is opened or forked.
 */
export function workerRefusal(config: GatewayConfig, workers: WorkerCount): string | null {
  if (workers.count <= 1 || !config.iam.enabled) return null;
  const reasons: string[] = [];
  if (config.redis.url === null) {
    reasons.push(
      'they need a shared token store: the in-process one (redis.url unset) lives in a single process, so a session issued or revoked by one worker would be unknown to the others. Set REDIS_URL (redis.url).',
    );
  }
  if (config.database.url === null) {
    reasons.push(
      'they need a database server: the embedded PGlite database (database.url unset) is opened by one process at a time (its data directory is locked; memory:// would give each worker a database of its own). Set DATABASE_URL (database.url).',
    );
  }
  const assertion = config.iam.forward.assertion;
  if (assertion.enabled && !assertion.keyFile) {
    reasons.push(
      "they need iam.forward.assertion.key-file (IAM_FORWARD_ASSERTION_KEY_FILE): without it each worker would sign assertions with a key of its own, generated at start, and the host could not verify the others'. Give them one Ed25519 key.",
    );
  }
  if (reasons.length === 0) return null;
  const head = `cannot run ${workers.count} worker processes (${workers.source}); run one, or:`;
  return reasons.length === 1 ? `${head} ${reasons[0]}` : `${head}\n${reasons.map((reason) => `  - ${reason}`).join('\n')}`;
}
