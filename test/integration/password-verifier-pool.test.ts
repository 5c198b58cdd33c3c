/**
 * PasswordVerifierPool (src/auth/password-verifier-pool.ts): argon2id verification on dedicated threads that
 * run at a lower priority than the proxy (logins must not raise the proxied p99).
 */
import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { hashPassword } from '../../src/auth/password-hash';
import { PASSWORD_THREAD_NICE, PasswordVerifierPool } from '../../src/auth/password-verifier-pool';
import { UsersFileAuthenticator } from '../../src/auth/users-file-authenticator';
import { createMetrics, type GatewayMetrics } from '../../src/observability/metrics';
import { ProblemError } from '../../src/domain/problem';
import { threadNiceValues, threadPolicies } from '../support/threads';
import { SCHED_IDLE } from '../../src/threads/low-priority-worker';
import { notRun } from '../support/env';
import { until } from '../support/wait';

const ROOT = join(__dirname, '..', '..');

let aliceHash: string;
let bobHash: string;

beforeAll(async () => {
  [aliceHash, bobHash] = await Promise.all([hashPassword('alice-secret'), hashPassword('bob-secret')]);
});

describe('PasswordVerifierPool', () => {
  it('accepts the right password and refuses a wrong one or an unreadable hash', async () => {
    const pool = new PasswordVerifierPool({ threads: 1 });
    try {
      expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
      expect(await pool.verify(aliceHash, 'alice-secret ')).toBe(false);
      expect(await pool.verify(aliceHash, '')).toBe(false);
      expect(await pool.verify('not-a-hash', 'alice-secret')).toBe(false);
      expect(await pool.verify('$argon2id$v=19$m=19456,t=2,p=1$broken', 'x')).toBe(false);
    } finally {
      await pool.close();
    }
  });

  it('answers every caller of many concurrent verifications with its own result', async () => {
    const pool = new PasswordVerifierPool({ threads: 2 });
    try {
      const cases = Array.from({ length: 16 }, (_, i) => ({
        hash: i % 2 === 0 ? aliceHash : bobHash,
        password: [`alice-secret`, `bob-secret`, 'wrong'][i % 3]!,
      }));
      const answers = await Promise.all(cases.map((entry) => pool.verify(entry.hash, entry.password)));
      expect(answers).toEqual(cases.map((entry) => (entry.hash === aliceHash ? entry.password === 'alice-secret' : entry.password === 'bob-secret')));
    } finally {
      await pool.close();
    }
  });

  // Thread priorities are read from /proc; elsewhere the pool does not renice at all (see the module).
  if (process.platform !== 'linux') notRun('password-verifier-pool: thread priority test (Linux only)');
  else it('verifies on a thread of lower priority while the calling thread keeps its own', async () => {
    const own = threadNiceValues()[0];
    const before = threadNiceValues().filter((nice) => nice === PASSWORD_THREAD_NICE).length;
    const pool = new PasswordVerifierPool({ threads: 1 });
    try {
      expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
      const after = threadNiceValues();
      expect(after.filter((nice) => nice === PASSWORD_THREAD_NICE).length).toBe(before + 1);
      expect(after[0]).toBe(own); // the main (proxy) thread is untouched
      expect(own).not.toBe(PASSWORD_THREAD_NICE);
    } finally {
      await pool.close();
    }
  });

  // SCHED_IDLE needs Linux and util-linux's chrt (in every Debian install, and in CI); elsewhere the nice value applies.
  const chrt = process.platform === 'linux' && (() => {
    try {
      execFileSync('chrt', ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  if (!chrt && !process.env.CI) notRun('password-verifier-pool: SCHED_IDLE tests (need Linux and chrt)');
  else {
    /** Polls `probe` every 10 ms until true (test/support/wait.ts): the policy changes of another thread land asynchronously. */
    const eventually = async (what: string, probe: () => boolean): Promise<void> => {
      await until(what, probe, { every: 10 });
    };
    const idleThreads = (): number => threadPolicies().filter((policy) => policy === SCHED_IDLE).length;

    it('verifies under SCHED_IDLE (only idle CPU, preempted by any ordinary thread), the calling thread untouched', async () => {
      const before = idleThreads();
      // A machine kept busy by other work may have no idle CPU for longer than the default 250 ms: starving (the next
      // test's subject) would then move the thread off SCHED_IDLE. Here it may wait; the verification still completes.
      const pool = new PasswordVerifierPool({ threads: 1, starvedAfterMs: 20_000 });
      try {
        expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
        expect(await pool.verify(aliceHash, 'wrong')).toBe(false);
        expect(idleThreads()).toBe(before + 1);
        expect(threadPolicies()[0]).toBe(0); // the main (proxy) thread keeps the ordinary policy
        expect(pool.starvations).toBe(0);
      } finally {
        await pool.close();
      }
    });

    it('a verification starving under SCHED_IDLE moves to the nice value at once, and the threads stay there for a while', async () => {
      const before = idleThreads();
      // Every verification "starves" after 1 ms (argon2id needs ~20 ms or more), as on a machine with no idle CPU.
      const pool = new PasswordVerifierPool({ threads: 1, starvedAfterMs: 1, idleRetryMs: 60_000 });
      try {
        expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
        expect(pool.starvations).toBe(1);
        await eventually('the starving thread left SCHED_IDLE', () => idleThreads() === before);
        expect(threadNiceValues().filter((nice) => nice === PASSWORD_THREAD_NICE).length).toBeGreaterThanOrEqual(1);
        // Within idleRetryMs the next verifications run at the nice value from the start (no new starvation to notice).
        expect(await pool.verify(bobHash, 'bob-secret')).toBe(true);
        expect(pool.starvations).toBe(1);
        expect(idleThreads()).toBe(before);
      } finally {
        await pool.close();
      }
    });

    it('counts starving verifications in iam_password_verifications_starved_total, through the users-file authenticator', async () => {
      const pool = new PasswordVerifierPool({ threads: 1, starvedAfterMs: 1, idleRetryMs: 0 });
      const authenticator = new UsersFileAuthenticator(join(ROOT, 'config', 'users.example.yaml'), pool);
      const metrics = createMetrics({ collectDefaults: false });
      metrics.observePasswordStarvations(() => authenticator.starvedVerifications());
      const starved = async (gateway: GatewayMetrics): Promise<number> => (await gateway.passwordStarvations.get()).values[0]?.value ?? 0;
      try {
        expect(await starved(metrics)).toBe(0);
        for (const [username, password] of [
          ['alice', 'alice-password'],
          ['bob', 'bob-password'],
        ]) {
          expect((await authenticator.authenticate({ username: username!, password: password!, clientType: 'WEB' })).kind).toBe('accepted');
        }
        expect(pool.starvations).toBe(2);
        expect(await starved(metrics)).toBe(2);
        // A scrape adds only what happened since the last one.
        expect(await starved(metrics)).toBe(2);
      } finally {
        await authenticator.close();
      }
    });

    it('tries SCHED_IDLE again once idleRetryMs has passed since the last starving verification', async () => {
      const before = idleThreads();
      const pool = new PasswordVerifierPool({ threads: 1, starvedAfterMs: 1, idleRetryMs: 0 });
      try {
        expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
        expect(pool.starvations).toBe(1);
        await eventually('the starving thread left SCHED_IDLE', () => idleThreads() === before);
        // The next verification starts under SCHED_IDLE again (and starves again, with a 1 ms threshold).
        expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
        expect(pool.starvations).toBe(2);
      } finally {
        await pool.close();
      }
    });

    it('verifies at the nice value where SCHED_IDLE is refused (no chrt)', async () => {
      const before = idleThreads();
      const pool = new PasswordVerifierPool({ threads: 1, chrt: '/nonexistent/chrt' });
      try {
        expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
        expect(await pool.verify(aliceHash, 'wrong')).toBe(false);
        expect(idleThreads()).toBe(before);
        expect(threadNiceValues().filter((nice) => nice === PASSWORD_THREAD_NICE).length).toBeGreaterThanOrEqual(1);
      } finally {
        await pool.close();
      }
    });
  }

  it('rejects the verifications of a thread that dies, and starts a new thread for the next one', async () => {
    const pool = new PasswordVerifierPool({ threads: 1 });
    try {
      expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
      const pending = pool.verify(aliceHash, 'alice-secret');
      // White-box: end the thread under the pending verification.
      const thread = (pool as unknown as { threads: Array<{ worker: { terminate(): Promise<number> } | null }> }).threads[0]!;
      await thread.worker!.terminate();
      await expect(pending).rejects.toThrow(/password verification thread/);
      expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it('#11.10: beyond maxPending verifications waiting or running, answers 503 IAM_BUSY with Retry-After at once', async () => {
    const pool = new PasswordVerifierPool({ threads: 1, maxPending: 3 });
    try {
      const admitted = [1, 2, 3].map(() => pool.verify(aliceHash, 'alice-secret'));
      const refused = await pool.verify(aliceHash, 'alice-secret').then(
        () => null,
        (error: unknown) => error as ProblemError,
      );
      expect(refused).toBeInstanceOf(ProblemError);
      expect(refused!.code).toBe('IAM_BUSY');
      expect(refused!.status).toBe(503);
      expect(Number(refused!.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
      expect(await Promise.all(admitted)).toEqual([true, true, true]);
      expect(await pool.verify(aliceHash, 'alice-secret')).toBe(true); // room again
    } finally {
      await pool.close();
    }
  });

  it('#11.10: serves waiting verifications by lane in turn: one lane\'s flood delays another lane by about one check', async () => {
    const pool = new PasswordVerifierPool({ threads: 1, maxPending: 100 });
    try {
      const order: string[] = [];
      const flood = Array.from({ length: 12 }, (_, i) => pool.verify(aliceHash, 'wrong', 'flooder').then(() => order.push(`flood-${i}`)));
      const real = pool.verify(bobHash, 'bob-secret', 'someone-else').then((ok) => (order.push('real'), ok));
      expect(await real).toBe(true);
      await Promise.all(flood);
      // The first flood check was already running; the other lane is served next.
      expect(order.indexOf('real')).toBeLessThanOrEqual(2);
    } finally {
      await pool.close();
    }
  });

  it('round 3: a full queue shares its room by lane: another lane always gets in, the flood\'s newest waiting check gives way', async () => {
    const pool = new PasswordVerifierPool({ threads: 1, maxPending: 8 });
    try {
      const outcome = (promise: Promise<boolean>): Promise<string> => promise.then(String, (error: unknown) => (error as ProblemError).code);
      // One lane fills the whole queue; a ninth check of the same lane is refused (it is the longest lane).
      const flood = Array.from({ length: 8 }, () => outcome(pool.verify(aliceHash, 'wrong', 'flooder')));
      expect(await outcome(pool.verify(aliceHash, 'wrong', 'flooder'))).toBe('IAM_BUSY');
      // Two other lanes get in, each in place of the flood's newest waiting check.
      const others = [outcome(pool.verify(bobHash, 'bob-secret', 'someone-else')), outcome(pool.verify(aliceHash, 'alice-secret', 'a-third'))];
      expect(await Promise.all(others)).toEqual(['true', 'true']);
      expect(await Promise.all(flood)).toEqual(['false', 'false', 'false', 'false', 'false', 'false', 'IAM_BUSY', 'IAM_BUSY']);
      // Lanes of equal length: the newcomer waits its turn rather than displace (no churn between equals).
      const a = Array.from({ length: 4 }, () => outcome(pool.verify(aliceHash, 'wrong', 'a')));
      const b = Array.from({ length: 4 }, () => outcome(pool.verify(aliceHash, 'wrong', 'b')));
      expect(await outcome(pool.verify(aliceHash, 'wrong', 'a'))).toBe('IAM_BUSY');
      expect([...(await Promise.all(a)), ...(await Promise.all(b))].every((result) => result === 'false')).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it('refuses verifications once closed, and rejects those still waiting', async () => {
    const pool = new PasswordVerifierPool({ threads: 1 });
    const running = pool.verify(aliceHash, 'alice-secret');
    const waiting = pool.verify(aliceHash, 'alice-secret');
    const settled = Promise.allSettled([running, waiting]);
    await pool.close();
    expect((await settled).map((result) => result.status)).toEqual(['rejected', 'rejected']);
    await expect(pool.verify(aliceHash, 'alice-secret')).rejects.toThrow('closed');
  });

  it('never keeps a process alive once idle (built package)', async () => {
    const program = `
      const { PasswordVerifierPool } = require('./dist/src/auth/password-verifier-pool');
      const { hashPassword } = require('./dist/src/auth/password-hash');
      (async () => {
        const pool = new PasswordVerifierPool({ threads: 1 });
        const ok = await pool.verify(await hashPassword('p'), 'p');
        process.stdout.write(ok ? 'verified' : 'refused');
      })();`;
    const started = Date.now();
    const output = await new Promise<string>((resolve, reject) =>
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- an ExecFileException is an Error (typed through Omit<>)
      execFile(process.execPath, ['-e', program], { cwd: ROOT, timeout: 20_000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
    );
    expect(output).toBe('verified');
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
