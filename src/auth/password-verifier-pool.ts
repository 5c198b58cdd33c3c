import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { ProblemError } from '../domain/problem';
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

interface Job {
  passwordHash: string;
  password: string;
  resolve: (ok: boolean) => void;
  reject: (error: Error) => void;
}

/** One low-priority thread; it verifies one password at a time (the pool holds the queue). */
class VerifierThread {
  private worker: Worker | null = null;
  private nextId = 1;
  /** The verification running now. */
  current: { id: number; job: Job } | null = null;

  constructor(
    private readonly nice: number,
    private readonly onIdle: () => void,
  ) {}

  run(job: Job): void {
    const worker = (this.worker ??= this.spawn());
    this.current = { id: this.nextId++, job };
    worker.ref();
    worker.postMessage({ id: this.current.id, passwordHash: job.passwordHash, password: job.password });
  }

  private spawn(): Worker {
    const worker = startLowPriorityWorker(WORKER_PROGRAM, this.nice, { argon2Module: require.resolve('@node-rs/argon2') });
    worker.unref();
    worker.on('message', (message: { id: number; ok: boolean }) => {
      const current = this.current;
      if (!current || current.id !== message.id) return;
      this.current = null;
      // An idle pool never keeps the process alive; a verification in progress does.
      worker.unref();
      current.job.resolve(message.ok === true);
      this.onIdle();
    });
    const fail = (error: Error): void => {
      if (this.worker !== worker) return;
      this.worker = null; // the next verification starts a new thread
      const current = this.current;
      this.current = null;
      current?.job.reject(error);
      this.onIdle();
    };
    worker.on('error', (error) => fail(new Error(`password verification thread failed: ${error.message}`)));
    worker.on('exit', (code) => fail(new Error(`password verification thread exited (code ${code})`)));
    return worker;
  }

  async close(): Promise<void> {
    const worker = this.worker;
    if (worker) await worker.terminate();
  }
}

/** A rough cost of one verification, for the Retry-After of a full queue. */
const VERIFICATION_MS = 50;

/**
 * Verifies argon2id password hashes on dedicated low-priority threads (logins must not raise the
 * proxied p99). argon2id is deliberately expensive (~20–50 ms of CPU each); on libuv's pool it ran at the
 * proxy's own priority and, on a busy machine, took the CPU from it. Here each thread lowers its own
 * priority ({@link PASSWORD_THREAD_NICE}); threads start on first use and are shared by all logins.
 *
 * The queue is bounded and fair (#11.10): at most `maxPending` verifications wait or run (beyond it,
 * 503 IAM_BUSY with Retry-After, at once), and waiting verifications are served by lane (the client's
 * address) in turn, so one client's flood of logins delays another client's login by about one
 * verification per flooding client, not by the whole flood.
 */
export class PasswordVerifierPool {
  private readonly threads: VerifierThread[];
  /** Waiting verifications per lane; a lane goes to the back of the map each time it is served. */
  private readonly lanes = new Map<string, Job[]>();
  private waiting = 0;
  private readonly maxPending: number;
  private closed = false;

  constructor(options: { threads?: number; nice?: number; maxPending?: number } = {}) {
    const count = options.threads ?? Math.min(4, Math.max(1, availableParallelism() - 1));
    const nice = options.nice ?? PASSWORD_THREAD_NICE;
    this.maxPending = options.maxPending ?? 64;
    this.threads = Array.from({ length: Math.max(1, count) }, () => new VerifierThread(nice, () => this.dispatch()));
  }

  /** Verifications waiting or running now. */
  get pending(): number {
    return this.waiting + this.threads.filter((thread) => thread.current !== null).length;
  }

  /**
   * True when `password` matches `passwordHash`; false for a wrong password or an unreadable hash.
   * `lane` groups the verifications served in turn (the client address). Rejects with 503 IAM_BUSY when
   * the queue is full.
   */
  verify(passwordHash: string, password: string, lane = ''): Promise<boolean> {
    if (this.closed) return Promise.reject(new Error('the password verifier is closed'));
    const pending = this.pending;
    if (pending >= this.maxPending) return Promise.reject(busy(pending, this.threads.length));
    return new Promise((resolve, reject) => {
      const jobs = this.lanes.get(lane);
      if (jobs) jobs.push({ passwordHash, password, resolve, reject });
      else this.lanes.set(lane, [{ passwordHash, password, resolve, reject }]);
      this.waiting++;
      this.dispatch();
    });
  }

  private dispatch(): void {
    if (this.closed) return;
    for (const thread of this.threads) {
      if (this.waiting === 0) return;
      if (thread.current === null) thread.run(this.next());
    }
  }

  /** The first job of the lane served least recently; that lane then goes to the back. */
  private next(): Job {
    const [lane, jobs] = this.lanes.entries().next().value as [string, Job[]];
    const job = jobs.shift()!;
    this.waiting--;
    this.lanes.delete(lane);
    if (jobs.length > 0) this.lanes.set(lane, jobs);
    return job;
  }

  async close(): Promise<void> {
    this.closed = true;
    const error = new Error('the password verifier is closed');
    for (const jobs of this.lanes.values()) for (const job of jobs) job.reject(error);
    this.lanes.clear();
    this.waiting = 0;
    await Promise.all(this.threads.map((thread) => thread.close()));
  }
}

function busy(pending: number, threads: number): ProblemError {
  const seconds = Math.max(1, Math.ceil((pending * VERIFICATION_MS) / threads / 1000));
  return new ProblemError('IAM_BUSY', `Too many logins are being checked; try again in ${seconds} s.`, { headers: { 'Retry-After': String(seconds) } });
}
