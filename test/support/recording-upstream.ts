/**
 * A real upstream for end-to-end tests: a `node:http` server in a separate Node process that records every
 * request exactly as it arrived, so tests can assert what the gateway forwarded (and that a refused request
 * never reached the host). See recording-upstream-process.js for the paths it answers.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/** One request as the upstream received it. */
export interface RecordedRequest {
  /** 1-based arrival order since start (not reset by `clear()`). */
  seq: number;
  /**
   * `upgrade`: a request with `Upgrade:`, answered 101 on `/ws` (WebSocket); on any other path answered 200
   * keep-alive like a host without WebSocket support, and what follows on that connection is parsed as HTTP.
   */
  kind: 'http' | 'upgrade';
  /** Epoch milliseconds at which the request head arrived. */
  receivedAt: number;
  method: string;
  /** The request-target exactly as on the request line (not normalized, not decoded). */
  url: string;
  httpVersion: string;
  /** Names and values alternating, original case and order (Node's `rawHeaders`). */
  rawHeaders: string[];
  bodyLength: number;
  /** Hex SHA-256 of the body bytes received so far (of the empty body when there was none). */
  bodySha256: string;
  /** The first 4 KiB of the body, decoded as UTF-8. */
  bodyText: string;
  /** False while the body is still arriving, or when the sender went away before its end. */
  bodyComplete: boolean;
  /** Messages received on an upgraded `/ws` connection (each was echoed back). */
  wsMessages?: Array<{ binary: boolean; length: number; text: string }>;
}

export interface RecordingUpstream {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  port: number;
  /** The upstream process id (it is not the test process). */
  pid: number;
  /** Every request received since start or the last `clear()`, in arrival order. */
  requests(): Promise<RecordedRequest[]>;
  clear(): Promise<void>;
  /** Closes every connection (hanging ones included) and ends the process. */
  close(): Promise<void>;
}

type Reply = { id: number; result?: unknown; error?: string };

const PROCESS_SCRIPT = join(__dirname, 'recording-upstream-process.js');
const CALL_TIMEOUT_MS = 10_000;

/** Starts the recording upstream in a child process on 127.0.0.1 with an OS-assigned port. */
export async function startRecordingUpstream(): Promise<RecordingUpstream> {
  // execArgv: [] keeps jest's or ts-node's flags away from a plain JS child.
  const child = fork(PROCESS_SCRIPT, [], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await waitForReady(child);
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let nextId = 1;

  child.on('message', (message: Reply) => {
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.error) waiter.reject(new Error(message.error));
    else waiter.resolve(message.result);
  });
  child.once('exit', () => {
    for (const waiter of pending.values()) waiter.reject(new Error('recording upstream exited'));
    pending.clear();
  });

  const call = (command: 'requests' | 'clear' | 'close'): Promise<unknown> =>
    new Promise((resolve, reject) => {
      if (!child.connected) {
        reject(new Error('recording upstream is not running'));
        return;
      }
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`recording upstream did not answer "${command}"`));
      }, CALL_TIMEOUT_MS);
      const settle = <T>(done: (value: T) => void) => (value: T) => {
        clearTimeout(timer);
        done(value);
      };
      pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
      child.send({ id, command });
    });

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
    requests: async () => (await call('requests')) as RecordedRequest[],
    clear: async () => {
      await call('clear');
    },
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      await call('close').catch(() => child.kill('SIGKILL'));
      await exited;
    },
  };
}

/** All values of a header in a recorded request (case-insensitive name), in arrival order. */
export function recordedHeader(request: RecordedRequest, name: string): string[] {
  const wanted = name.toLowerCase();
  const values: string[] = [];
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if (request.rawHeaders[i].toLowerCase() === wanted) values.push(request.rawHeaders[i + 1]);
  }
  return values;
}

function waitForReady(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type?: string; port?: number }): void => {
      if (message.type !== 'ready' || typeof message.port !== 'number') return;
      cleanUp();
      resolve(message.port);
    };
    const onExit = (code: number | null): void => {
      cleanUp();
      reject(new Error(`recording upstream exited before listening (code ${String(code)})`));
    };
    const cleanUp = (): void => {
      child.off('message', onMessage);
      child.off('exit', onExit);
      child.off('error', onExit);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.once('error', onExit);
  });
}
