/**
 * The gateway as a real process (`node bin/iam-gateway.js serve` over the compiled dist), for tests of what
 * only a process has: signals, exit codes, the event loop draining at shutdown. Configured like users do,
 * through the environment (config/default.yaml plus overrides).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testDatabaseKind, testDatabaseUrl, testRedisUrl, uniquePrefix } from './env';
import { ROOT } from './gateway';

const ENTRY = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const BIN = join(ROOT, 'bin', 'iam-gateway.js');
const SOURCE_DIRS = ['src', 'migrations'].map((dir) => join(ROOT, dir));

export interface GatewayProcess {
  pid: number;
  url: string;
  port: number;
  managementUrl: string;
  managementPort: number;
  child: ChildProcess;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** Everything the process wrote so far (stdout then stderr), for failure messages. */
  output(): string;
  /** Parsed JSON log lines written so far. */
  logs(): Array<Record<string, unknown>>;
  /** SIGKILLs the process if it is still running (test cleanup). */
  kill(): Promise<void>;
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(path));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * Runs `npm run build` when dist is missing or older than any source file, so the process runs the code
 * under test. Returns what it did. tsc still emits when other files of the tree have type errors; the
 * build output is kept for the failure message only if dist is still missing afterwards.
 */
export function ensureBuilt(): 'fresh' | 'built' {
  const sourcesAt = Math.max(...SOURCE_DIRS.map(newestMtime));
  if (existsSync(ENTRY) && statSync(ENTRY).mtimeMs >= sourcesAt) return 'fresh';
  let output = '';
  try {
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'pipe', timeout: 170_000 });
  } catch (error) {
    const failure = error as { stdout?: Buffer; stderr?: Buffer };
    output = `${failure.stdout?.toString() ?? ''}${failure.stderr?.toString() ?? ''}`;
  }
  if (!existsSync(ENTRY) || statSync(ENTRY).mtimeMs < sourcesAt - 1000) throw new Error(`npm run build did not produce ${ENTRY}:\n${output}`);
  return 'built';
}

/**
 * The `serve` process {@link startGatewayProcess} waits for, spawned with the same environment (the test run's
 * database and token store, the example users; `env` overrides any key), for a test that must act before it listens.
 */
export function spawnGatewayProcess(upstreamUrl: string, env: Record<string, string> = {}, args: string[] = [], options: { processGroup?: boolean; output?: number } = {}): ChildProcess {
  return spawn(process.execPath, [BIN, 'serve', ...args], {
    cwd: ROOT,
    detached: options.processGroup === true,
    // `output`: a file descriptor both streams write to, so what the process printed keeps its order.
    stdio: options.output === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', options.output, options.output],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: '0',
      MANAGEMENT_PORT: '0',
      SERVER_HOST: '127.0.0.1',
      UPSTREAM_URL: upstreamUrl,
      DATABASE_URL: testDatabaseUrl(),
      DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '4',
      // Empty = null: the in-process store when this test run has no Redis.
      REDIS_URL: testRedisUrl() ?? '',
      IAM_TOKEN_STORE_PREFIX: uniquePrefix('proc'),
      // Each process its own audit spool unless the test shares one (the repository's .data is not the tests').
      IAM_AUDIT_SPOOL_DIR: join(tmpdir(), uniquePrefix('audit-spool')),
      LOG_LEVEL: 'info',
      // The access log (default `denied`) would mix its lines into the log the tests read; its own tests turn it on.
      IAM_ACCESS_LOG: 'off',
      // config/default.yaml names no users (#11.21); the tests log in the example users like the demo does.
      IAM_AUTHENTICATOR_TYPE: 'users-file',
      IAM_AUTHENTICATOR_PATH: 'config/users.example.yaml',
      IAM_PROVISION_FILE: 'config/provision.example.yaml',
      ...env,
    },
  });
}

/**
 * Spawns a gateway process on OS-assigned ports against the test run's database and token store, and
 * resolves once it logged that it listens. `env` overrides any configuration key (e.g.
 * `{ SERVER_SHUTDOWN_TIMEOUT: '2s' }`); `args` follow `serve` (e.g. `['--workers', '2']`). With `processGroup` the
 * process leads a process group of its own (with its workers), so a test can signal the group as a terminal's
 * Ctrl-C or systemd's KillMode=control-group does: `process.kill(-gateway.pid, 'SIGTERM')`.
 */
export async function startGatewayProcess(upstreamUrl: string, env: Record<string, string> = {}, args: string[] = [], options: { processGroup?: boolean } = {}): Promise<GatewayProcess> {
  const child = spawnGatewayProcess(upstreamUrl, env, args, options);
  let stdout = '';
  let stderr = '';
  const logs: Array<Record<string, unknown>> = [];
  let pendingLine = '';
  child.stdout!.setEncoding('utf8');
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  const output = (): string => `--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`;

  const listening = new Promise<{ port: number; managementPort: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway process did not listen within 30 s\n${output()}`)), 30_000);
    child.stdout!.on('data', (chunk: string) => {
      stdout += chunk;
      const lines = (pendingLine + chunk).split('\n');
      pendingLine = lines.pop() ?? '';
      for (const line of lines) {
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(line) as Record<string, unknown>;
        } catch {
          continue;
        }
        logs.push(entry);
        if (entry.msg === 'iam-gateway listening' && typeof entry.port === 'number' && typeof entry.managementPort === 'number') {
          clearTimeout(timer);
          resolve({ port: entry.port, managementPort: entry.managementPort });
        }
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gateway process exited before listening (code ${String(code)}, signal ${String(signal)})\n${output()}`));
    });
  });

  try {
    const { port, managementPort } = await listening;
    return {
      pid: child.pid ?? -1,
      url: `http://127.0.0.1:${port}`,
      port,
      managementUrl: `http://127.0.0.1:${managementPort}`,
      managementPort,
      child,
      exited,
      output,
      logs: () => logs,
      kill: async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        child.kill('SIGKILL');
        await exited;
      },
    };
  } catch (error) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw error;
  }
}

/** How a `serve` process that was expected to stop on its own ended. */
export interface ServeOutcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** Everything it wrote to stdout (the JSON log, the access log). */
  stdout: string;
  elapsedMs: number;
}

/**
 * Runs `iam-gateway serve` with only `env` (plus PATH, HOME, loopback, an upstream nobody listens on) and
 * resolves when it exits; kills it and rejects if it is still running after `boundMs`. For starts that must
 * fail fast. `args` follow `serve`.
 */
export function serveUntilExit(env: Record<string, string>, boundMs: number, args: string[] = []): Promise<ServeOutcome> {
  return runUntilExit(['serve', ...args], env, boundMs);
}

/** Any `iam-gateway` command (`provision FILE`, `serve`...) as {@link serveUntilExit} runs `serve`. */
export function runUntilExit(args: string[], env: Record<string, string>, boundMs: number): Promise<ServeOutcome> {
  const started = Date.now();
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', SERVER_HOST: '127.0.0.1', UPSTREAM_URL: 'http://127.0.0.1:9', ...env },
  });
  let stderr = '';
  let stdout = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the process was still running after ${boundMs} ms\n${stderr}`));
    }, boundMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stderr, stdout, elapsedMs: Date.now() - started });
    });
  });
}
