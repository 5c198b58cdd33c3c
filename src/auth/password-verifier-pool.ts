import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { startLowPriorityWorker } from '../threads/low-priority-worker';

/**
 * How much lower than the proxy the password threads run (Linux nice value; 19 is the lowest priority).
 * At 10 the scheduler gives a hashing thread about a tenth of a contended core and lets a proxy thread
 * that wakes up preempt it at once, so proxied latency holds while logins run; on an idle machine a
 * login is exactly as fast as before.
 */
export const PASSWORD_THREAD_NICE = 10;

/** The worker's program (plain CommonJS, so it needs no TypeScript loader). */
const WORKER_PROGRAM = `
const { parentPort, workerData } = require('node:worker_threads');
const { verifySync } = require(workerData.argon2Module);
parentPort.on('message', (job) => {
  let ok = false;
  try { ok = verifySync(job.passwordHash, job.password); } catch { ok = false; }
  parentPort.postMessage({ id: job.id, ok });
});
`;

interface Pending {
  resolve: (ok: boolean) => void;
  reject: (error: Error) => void;
}

class VerifierThread {
  private worker: Worker | null = null;
  readonly pending = new Map<number, Pending>();

  constructor(private readonly nice: number) {}

  post(id: number, passwordHash: string, password: string, waiter: Pending): void {
    const worker = (this.worker ??= this.spawn());
    this.pending.set(id, waiter);
    if (this.pending.size === 1) worker.ref();
    worker.postMessage({ id, passwordHash, password });
  }

  private spawn(): Worker {
    const worker = startLowPriorityWorker(WORKER_PROGRAM, this.nice, { argon2Module: require.resolve('@node-rs/argon2') });
    worker.unref();
    worker.on('message', (message: { id: number; ok: boolean }) => {
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      // An idle pool never keeps the process alive; a verification in progress does.
      if (this.pending.size === 0) worker.unref();
      waiter.resolve(message.ok === true);
    });
    const fail = (error: Error): void => {
      if (this.worker === worker) this.worker = null; // the next verification starts a new thread
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    };
    worker.on('error', (error) => fail(new Error(`password verification thread failed: ${error.message}`)));
    worker.on('exit', (code) => fail(new Error(`password verification thread exited (code ${code})`)));
    return worker;
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
  }
}

/**
 * Verifies argon2id password hashes on dedicated low-priority threads (issue 7: logins must not raise the
 * proxied p99). argon2id is deliberately expensive (~20–50 ms of CPU each); on libuv's pool it ran at the
 * proxy's own priority and, on a busy machine, took the CPU from it. Here each thread lowers its own
 * priority ({@link PASSWORD_THREAD_NICE}); threads start on first use and are shared by all logins, each
 * verification going to the thread with the fewest waiting.
 */
export class PasswordVerifierPool {
  private readonly threads: VerifierThread[];
  private nextId = 1;
  private closed = false;

  constructor(options: { threads?: number; nice?: number } = {}) {
    const count = options.threads ?? Math.min(4, Math.max(1, availableParallelism() - 1));
    const nice = options.nice ?? PASSWORD_THREAD_NICE;
    this.threads = Array.from({ length: Math.max(1, count) }, () => new VerifierThread(nice));
  }

  /** True when `password` matches `passwordHash`; false for a wrong password or an unreadable hash. */
  verify(passwordHash: string, password: string): Promise<boolean> {
    if (this.closed) return Promise.reject(new Error('the password verifier is closed'));
    let chosen = this.threads[0]!;
    for (const thread of this.threads) if (thread.pending.size < chosen.pending.size) chosen = thread;
    return new Promise((resolve, reject) => chosen.post(this.nextId++, passwordHash, password, { resolve, reject }));
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.threads.map((thread) => thread.close()));
  }
}
