import type { DatabaseKind } from '../registry';
import type { Worker } from 'node:worker_threads';
import { startLowPriorityWorker } from '../../threads/low-priority-worker';
import type { AdminRepository } from '../../domain/admin-repository';
import type { DatabaseProgressListener, DatabaseSettings } from './database';
import {
  DATABASE_METHODS,
  decodeError,
  type DatabaseTarget,
  type EncodedError,
  type FromDatabaseThread,
  type ToDatabaseThread,
} from './database-thread-protocol';
import { DatabaseUnavailableError, type IamRepository } from '../../domain/iam-repository';

/**
 * How much lower than the proxy the database thread runs (Linux nice value). Its work (logins, admin writes,
 * audit and last-seen flushes, loading a grant that is not cached) can wait a little; proxied requests
 * should not wait behind it.
 */
export const DATABASE_THREAD_NICE = 5;

/**
 * The thread's program: from the built package it loads the compiled worker module; from the TypeScript
 * sources (the test suite) it first installs a transpile-only loader. Its output is cached on disk by the hash
 * of the source (a test run starts hundreds of database threads; without the cache each one loads the
 * TypeScript compiler and transpiles the same files again, about a second per start).
 */
const THREAD_PROGRAM = `
const { workerData } = require('node:worker_threads');
if (workerData.typescriptModule) {
  const fs = require('node:fs');
  const path = require('node:path');
  const { createHash } = require('node:crypto');
  const cacheDir = path.join(require('node:os').tmpdir(), 'iam-gateway-ts-' + (process.getuid ? process.getuid() : 'user'));
  let ts = null;
  require.extensions['.ts'] = (module, filename) => {
    const source = fs.readFileSync(filename, 'utf8');
    const key = createHash('sha256').update(workerData.typescriptModule).update('\\0').update(filename).update('\\0').update(source).digest('hex');
    const cached = path.join(cacheDir, key + '.js');
    let output = null;
    try {
      // Only a cache directory of this user's own (mode 0700) is read: nobody else can plant code in it.
      const owner = fs.statSync(cacheDir);
      if (owner.uid === process.getuid?.() && (owner.mode & 0o077) === 0) output = fs.readFileSync(cached, 'utf8');
    } catch {}
    if (output === null) {
      ts ??= require(workerData.typescriptModule);
      output = ts.transpileModule(source, {
        fileName: filename,
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true, resolveJsonModule: true },
      }).outputText;
      try {
        fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
        const partial = cached + '.' + process.pid + '.' + require('node:worker_threads').threadId;
        fs.writeFileSync(partial, output);
        fs.renameSync(partial, cached);
      } catch {}
    }
    module._compile(output, filename);
  };
}
require(workerData.entry).runDatabaseThread();
`;

/** The database, open on its own thread, behind the same repository interfaces. */
export interface DatabaseThread {
  repository: IamRepository;
  admin: AdminRepository;
  kind: DatabaseKind;
  /** The worker serving calls now (null before a restart); for diagnostics and tests. */
  currentThread(): Worker | null;
  /** Closes the pool (and the embedded database, if any), then ends the thread. */
  close(): Promise<void>;
}

export interface DatabaseThreadOptions {
  nice?: number;
  /** Told when the thread stops unexpectedly (it is started again on the next call). */
  onUnexpectedExit?: (detail: { code: number | null; error: Error | null }) => void;
  /** Told each step of opening the database (the first start, each time the thread starts again). */
  onProgress?: DatabaseProgressListener;
  /** How long `close()` waits for the thread to close its pool before ending it (default 10 s). */
  closeTimeoutMs?: number;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/**
 * Opens the database on a worker thread and resolves once it is migrated and ready.
 *
 * Why: MikroORM's unit of work (query building, hydration, change sets) costs several milliseconds of CPU
 * per login. On the proxy's event loop every proxied request waits behind those chunks (20 logins/s
 * tripled the proxied p99). On its own thread, at a lower priority, that work no longer sits in front of the
 * proxy, and the proxy's loop never runs ORM code at all.
 *
 * Semantics are those of the in-process repositories: calls are queued in order, errors keep their class
 * (`DatabaseUnavailableError` → 503, admin write errors → 404/409/422). If the thread dies, the calls in
 * flight reject with `DatabaseUnavailableError` and the next call starts a new thread.
 */
export async function openDatabaseThread(settings: DatabaseSettings, options: DatabaseThreadOptions = {}): Promise<DatabaseThread> {
  const client = new DatabaseThreadClient(settings, options);
  const kind = await client.start();
  const remote = <T>(target: DatabaseTarget, methods: readonly string[]): T => {
    const api: Record<string, (...args: unknown[]) => Promise<unknown>> = {};
    for (const method of methods) api[method] = (...args: unknown[]) => client.call(target, method, args);
    return api as T;
  };
  return {
    repository: remote<IamRepository>('iam', DATABASE_METHODS.iam),
    admin: remote<AdminRepository>('admin', DATABASE_METHODS.admin),
    kind,
    currentThread: () => client.current(),
    close: () => client.close(),
  };
}

class DatabaseThreadClient {
  private worker: Worker | null = null;
  private starting: Promise<DatabaseKind> | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closing = false;

  constructor(
    private readonly settings: DatabaseSettings,
    private readonly options: DatabaseThreadOptions,
  ) {}

  current(): Worker | null {
    return this.worker;
  }

  start(): Promise<DatabaseKind> {
    this.starting ??= this.spawn().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  private spawn(): Promise<DatabaseKind> {
    const entry = require.resolve('./database-thread-worker');
    const worker = startLowPriorityWorker(THREAD_PROGRAM, this.options.nice ?? DATABASE_THREAD_NICE, {
      entry,
      typescriptModule: entry.endsWith('.ts') ? require.resolve('typescript') : null,
      settings: this.settings,
      progress: this.options.onProgress !== undefined,
    });
    return new Promise((resolve, reject) => {
      let ready = false;
      let failure: Error | null = null;
      worker.on('message', (message: FromDatabaseThread) => {
        switch (message.type) {
          case 'ready':
            ready = true;
            this.worker = worker;
            worker.unref(); // calls wait for the start before they register, so none is pending yet
            resolve(message.kind);
            return;
          case 'progress':
            this.options.onProgress?.(message.progress);
            return;
          case 'open-failed':
            failure = decodeError(message.error);
            void worker.terminate();
            return;
          case 'result':
          case 'error':
            this.settle(message.id, message.type === 'error' ? message.error : null, message.type === 'result' ? message.value : undefined);
            return;
          default:
            return;
        }
      });
      worker.on('error', (error) => {
        failure ??= error;
      });
      worker.on('exit', (code) => {
        if (this.worker === worker) this.worker = null;
        if (!ready) {
          reject(failure ?? new Error(`the database thread exited during start (code ${code})`));
          return;
        }
        const stopped = new DatabaseUnavailableError(`the database thread stopped${failure ? `: ${failure.message}` : ` (code ${code})`}`);
        for (const waiter of this.pending.values()) waiter.reject(stopped);
        this.pending.clear();
        if (!this.closing) this.options.onUnexpectedExit?.({ code, error: failure });
      });
    });
  }

  private settle(id: number, error: EncodedError | null, value: unknown): void {
    const waiter = this.pending.get(id);
    if (!waiter) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
    if (error) waiter.reject(decodeError(error));
    else waiter.resolve(value);
  }

  async call(target: DatabaseTarget, method: string, args: unknown[]): Promise<unknown> {
    if (this.closing) throw new DatabaseUnavailableError('the database is closed');
    if (!this.worker) {
      try {
        await this.start();
      } catch (error) {
        throw new DatabaseUnavailableError(`the database thread cannot start: ${(error as Error).message}`, { cause: error });
      }
    }
    const worker = this.worker!;
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // A database call in flight keeps the process alive; an idle thread never does.
      if (this.pending.size === 1) worker.ref();
      try {
        worker.postMessage({ type: 'call', id, target, method, args } satisfies ToDatabaseThread);
      } catch (error) {
        this.pending.delete(id);
        reject(error as Error);
      }
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.starting?.catch(() => undefined);
    const worker = this.worker;
    if (!worker) return;
    worker.ref();
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage({ type: 'close' } satisfies ToDatabaseThread);
    const timer = setTimeout(() => void worker.terminate(), this.options.closeTimeoutMs ?? 10_000);
    await exited;
    clearTimeout(timer);
  }
}
