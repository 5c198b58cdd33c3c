import { execFile } from 'node:child_process';
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { ProblemError } from '../domain/problem';
import { startLowPriorityWorker } from '../threads/low-priority-worker';

/**
 * How much lower than the proxy the password threads run (Linux nice value; 19 is the lowest priority).
 * At 10 the scheduler gives a hashing thread about a tenth of a contended core. It is the priority a password
 * thread has when it cannot be SCHED_IDLE (see {@link PasswordVerifierPool}), or while the machine has no idle time.
 */
export const PASSWORD_THREAD_NICE = 10;

/**
 * A verification still running this long on a SCHED_IDLE thread is starving (the machine has no idle CPU for it:
 * argon2id needs 20–50 ms of CPU). The thread then runs at {@link PASSWORD_THREAD_NICE} instead.
 */
export const STARVED_AFTER_MS = 250;

/** After a starving verification, password threads stay at the nice value this long before trying SCHED_IDLE again. */
export const IDLE_RETRY_MS = 5000;

/** The worker's program (plain CommonJS, so it needs no TypeScript loader; `lowPriority`: threads/low-priority-worker.ts). */
const WORKER_PROGRAM = `
const { parentPort, workerData } = require('node:worker_threads');
const { verifySync } = require(workerData.argon2Module);
// SCHED_IDLE refused once (no chrt, another platform): not tried again.
let idleAvailable = lowPriority.tid !== null;
parentPort.on('message', (job) => {
  // The pool says which policy this verification runs under; the thread switches itself before it starts. What it
  // is now is read, not remembered: the pool may have moved it off SCHED_IDLE meanwhile (a starving verification).
  const now = lowPriority.isIdle();
  const wanted = job.idle && idleAvailable;
  const idle = wanted === now ? now : lowPriority.setIdle(wanted);
  if (wanted && !idle) idleAvailable = false;
  parentPort.postMessage({ started: job.id, tid: lowPriority.tid, idle });
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
  /** The thread's kernel id and whether it runs SCHED_IDLE, as it last reported (at the start of a verification). */
  tid: number | null = null;
  idle = false;
  private starvation: NodeJS.Timeout | null = null;

  constructor(
    private readonly nice: number,
    private readonly chrt: string,
    private readonly onIdle: () => void,
    private readonly starving: { afterMs: number; notice: (thread: VerifierThread) => void },
  ) {}

  run(job: Job, idle: boolean): void {
    const worker = (this.worker ??= this.spawn());
    this.current = { id: this.nextId++, job };
    worker.ref();
    worker.postMessage({ id: this.current.id, passwordHash: job.passwordHash, password: job.password, idle });
  }

  private spawn(): Worker {
    const worker = startLowPriorityWorker(WORKER_PROGRAM, this.nice, { argon2Module: require.resolve('@node-rs/argon2'), chrt: this.chrt });
    worker.unref();
    worker.on('message', (message: { id: number; ok: boolean } | { started: number; tid: number | null; idle: boolean }) => {
      const current = this.current;
      if (!current) return;
      if ('started' in message) {
        if (message.started !== current.id) return;
        this.tid = message.tid;
        this.idle = message.idle;
        if (this.idle) this.watchStarvation(current.id);
        return;
      }
      if (current.id !== message.id) return;
      this.current = null;
      this.stopWatching();
      // An idle pool never keeps the process alive; a verification in progress does.
      worker.unref();
      current.job.resolve(message.ok === true);
      this.onIdle();
    });
    const fail = (error: Error): void => {
      if (this.worker !== worker) return;
      this.worker = null; // the next verification starts a new thread
      this.stopWatching();
      const current = this.current;
      this.current = null;
      current?.job.reject(error);
      this.onIdle();
    };
    worker.on('error', (error) => fail(new Error(`password verification thread failed: ${error.message}`)));
    worker.on('exit', (code) => fail(new Error(`password verification thread exited (code ${code})`)));
    return worker;
  }

  /** A SCHED_IDLE verification that is still running after `afterMs` is starving: the pool is told. */
  private watchStarvation(id: number): void {
    this.stopWatching();
    this.starvation = setTimeout(() => {
      this.starvation = null;
      if (this.current?.id === id && this.idle) this.starving.notice(this);
    }, this.starving.afterMs);
    this.starvation.unref();
  }

  private stopWatching(): void {
    if (this.starvation !== null) clearTimeout(this.starvation);
    this.starvation = null;
  }

  /**
   * Moves the thread off SCHED_IDLE now, from outside (it is busy verifying): `chrt` on its kernel id, at the nice
   * value it already has. Resolves when done; a failure leaves it as it was.
   */
  leaveIdle(): Promise<void> {
    const tid = this.tid;
    if (tid === null || !this.idle) return Promise.resolve();
    this.idle = false;
    return new Promise((resolve) => execFile(this.chrt, ['--other', '-p', '0', String(tid)], { timeout: 5000 }, () => resolve()));
  }

  async close(): Promise<void> {
    this.stopWatching();
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
 * On Linux a verification runs under the SCHED_IDLE policy where it can (util-linux's `chrt`): it then uses only
 * CPU time nothing else wants, and a proxy thread that wakes up takes the core back at once. A nice value alone
 * still lets a hashing thread hold a core for a few milliseconds against a waking proxy thread, which is what
 * raised the proxied p99 while logins ran (bench/README.md, results). A machine with no idle CPU would starve such a
 * verification, so one still running after {@link STARVED_AFTER_MS} moves to the nice value at once, and the
 * threads stay there for {@link IDLE_RETRY_MS}: logins then cost what they cost before, and they always finish.
 *
 * The queue is bounded and fair (#11.10): at most `maxPending` verifications wait or run, and waiting
 * verifications are served by lane (the client's address) in turn, so one client's flood of logins delays another
 * client's login by about one verification per flooding client, not by the whole flood. A full queue shares its room
 * by lane too: a login whose lane holds fewer waiting verifications than the longest lane takes the place of that
 * lane's newest waiting verification, which is answered 503 IAM_BUSY with Retry-After (it checked nothing); only a
 * login whose own lane is (one of) the longest is refused. So one address's flood never keeps another address out.
 */
export class PasswordVerifierPool {
  private readonly threads: VerifierThread[];
  /** Waiting verifications per lane; a lane goes to the back of the map each time it is served. */
  private readonly lanes = new Map<string, Job[]>();
  private waiting = 0;
  private readonly maxPending: number;
  private closed = false;

  /** Whether verifications try SCHED_IDLE (Linux). */
  private readonly idle: boolean;
  private readonly idleRetryMs: number;
  /** When a SCHED_IDLE verification last starved (performance.now()); -Infinity: never. */
  private lastStarvedAt = -Infinity;
  /** How many verifications starved under SCHED_IDLE and moved to the nice value. */
  starvations = 0;

  /**
   * `idle`: try SCHED_IDLE (default: on Linux); `chrt`: the command that sets it (default `chrt` on the PATH);
   * `starvedAfterMs` / `idleRetryMs`: {@link STARVED_AFTER_MS} and {@link IDLE_RETRY_MS} (tests shorten them).
   */
  constructor(options: { threads?: number; nice?: number; maxPending?: number; idle?: boolean; chrt?: string; starvedAfterMs?: number; idleRetryMs?: number } = {}) {
    const count = options.threads ?? Math.min(4, Math.max(1, availableParallelism() - 1));
    const nice = options.nice ?? PASSWORD_THREAD_NICE;
    this.maxPending = options.maxPending ?? 64;
    this.idle = options.idle ?? process.platform === 'linux';
    this.idleRetryMs = options.idleRetryMs ?? IDLE_RETRY_MS;
    const starving = { afterMs: options.starvedAfterMs ?? STARVED_AFTER_MS, notice: (thread: VerifierThread) => this.starved(thread) };
    this.threads = Array.from({ length: Math.max(1, count) }, () => new VerifierThread(nice, options.chrt ?? 'chrt', () => this.dispatch(), starving));
  }

  /** A SCHED_IDLE verification is starving: its thread moves to the nice value now, and the others at their next one. */
  private starved(thread: VerifierThread): void {
    this.starvations++;
    this.lastStarvedAt = performance.now();
    void thread.leaveIdle();
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
    if (pending >= this.maxPending && !this.makeRoomFor(lane)) return Promise.reject(busy(pending, this.threads.length));
    return new Promise((resolve, reject) => {
      const jobs = this.lanes.get(lane);
      if (jobs) jobs.push({ passwordHash, password, resolve, reject });
      else this.lanes.set(lane, [{ passwordHash, password, resolve, reject }]);
      this.waiting++;
      this.dispatch();
    });
  }

  /**
   * A full queue: the newest waiting verification of the longest lane gives its place to a login of a shorter lane
   * (answered IAM_BUSY: nothing was checked). False when `lane` is itself as long as the longest (then it waits its turn).
   */
  private makeRoomFor(lane: string): boolean {
    const own = this.lanes.get(lane)?.length ?? 0;
    let longest: Job[] | null = null;
    for (const jobs of this.lanes.values()) if (longest === null || jobs.length > longest.length) longest = jobs;
    if (longest === null || longest.length <= own + 1) return false;
    const displaced = longest.pop()!;
    this.waiting--;
    displaced.reject(busy(this.pending, this.threads.length));
    return true;
  }

  private dispatch(): void {
    if (this.closed) return;
    for (const thread of this.threads) {
      if (this.waiting === 0) return;
      if (thread.current === null) thread.run(this.next(), this.idle && performance.now() - this.lastStarvedAt >= this.idleRetryMs);
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
