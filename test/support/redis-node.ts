/**
 * One `redis-server` process (a cluster node, a replica, a sentinel) for the scale tests of issue #17: started on a
 * loopback port in its own temp dir, logging to a file there, no persistence. The process is killed when the jest
 * worker exits, whatever happened (a failed test never leaves a server running).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export const REDIS_SERVER = '/usr/bin/redis-server';
export const REDIS_CLI = '/usr/bin/redis-cli';

/** True when redis-server and redis-cli are installed, and always in CI (where a missing binary must fail). */
export const redisEnginesAvailable = (): boolean => (existsSync(REDIS_SERVER) && existsSync(REDIS_CLI)) || process.env.CI !== undefined;

export interface RedisNode {
  port: number;
  readonly pid: number;
  readonly dir: string;
  /** True once the process has exited (killed or crashed). */
  readonly exited: boolean;
  /** The last lines of its log file (failure messages). */
  log(lines?: number): string;
  /** Sends a signal (SIGSTOP: the server hangs, as in a long GC-like stall or a frozen VM; SIGCONT: it goes on). */
  signal(signal: NodeJS.Signals): void;
  /** SIGKILL, as a crash; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Starts the process again with the same arguments in the same dir (a node coming back after a crash). */
  restart(): Promise<void>;
  /** Stops it (SIGKILL: nothing to save) and removes its dir. */
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;
function killOnExit(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const process_ of running) process_.kill('SIGKILL');
  });
}

/**
 * Runs commands one after the other on one short-lived connection to the server at `port` (no reconnect, no offline
 * queue, 5 s per command: a stopped server fails the call instead of hanging it); resolves the last reply.
 */
export async function commands(port: number, ...list: Array<[string, ...Array<string | number | Buffer>]>): Promise<unknown> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false, connectTimeout: 1000, commandTimeout: 5000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    let reply: unknown = null;
    for (const [name, ...args] of list) reply = await redis.call(name, ...args);
    return reply;
  } finally {
    redis.disconnect();
  }
}

/** Runs one command on the server at `port` (see `commands`). */
export const command = (port: number, name: string, ...args: Array<string | number | Buffer>): Promise<unknown> => commands(port, [name, ...args]);

/** `INFO`-style `key:value` lines as an object. */
export function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
}

export async function waitUntil(what: string, condition: () => Promise<boolean>, timeoutMs: number, diagnostics: () => string = () => ''): Promise<number> {
  const started = Date.now();
  let lastError: unknown = null;
  for (;;) {
    try {
      if (await condition()) return Date.now() - started;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() - started > timeoutMs) {
      const reason = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`${what}: not after ${timeoutMs} ms${reason}\n${diagnostics()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Starts `redis-server <args…> --port <port> --bind 127.0.0.1 --dir <dir> --logfile redis.log` and waits for PING. */
export async function startRedisNode(port: number, dir: string, args: string[], options: { sentinel?: boolean } = {}): Promise<RedisNode> {
  // A replica's first sync starts at once (the default waits 5 s for more replicas to share a diskless transfer).
  const tuning = options.sentinel ? [] : ['--repl-diskless-sync-delay', '0'];
  const fullArgs = [...args, ...tuning, ...(options.sentinel ? ['--sentinel'] : []), '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--logfile', join(dir, 'redis.log')];
  let child: ChildProcess;
  let exited: Promise<void>;
  const log = (lines = 40): string => {
    try {
      return readFileSync(join(dir, 'redis.log'), 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  };
  const launch = async (): Promise<void> => {
    child = spawn(REDIS_SERVER, fullArgs, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let failedToStart: Error | null = null;
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    killOnExit(child);
    const current = child;
    exited = new Promise<void>((resolve) => {
      current.once('exit', () => resolve());
      // A missing binary (ENOENT) emits 'error' and never 'exit'.
      current.once('error', (error) => {
        failedToStart = error;
        resolve();
      });
    });
    try {
      await waitUntil(`redis-server on ${port}`, async () => {
        if (failedToStart) throw new Error(`${REDIS_SERVER} did not start: ${(failedToStart as Error).message}`);
        if (current.exitCode !== null || current.signalCode !== null) throw new Error(`exited: ${stderr}`);
        return (await command(port, 'PING')) === 'PONG';
      }, 10_000, () => `${stderr}\n${log()}`);
    } catch (error) {
      current.kill('SIGKILL');
      await exited;
      throw error;
    }
  };
  await launch();
  return {
    port,
    dir,
    get pid() {
      return child.pid ?? -1;
    },
    get exited() {
      return child.exitCode !== null || child.signalCode !== null;
    },
    log,
    signal(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async restart() {
      if (child.exitCode === null && child.signalCode === null) throw new Error(`redis-server on ${port} is still running`);
      await launch();
    },
    async stop() {
      // SIGKILL ends a stopped (SIGSTOP) process too.
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
