/**
 * PasswordVerifierPool (src/auth/password-verifier-pool.ts): argon2id verification on dedicated threads that
 * run at a lower priority than the proxy (logins must not raise the proxied p99).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { hashPassword } from '../../src/auth/password-hash';
import { PASSWORD_THREAD_NICE, PasswordVerifierPool } from '../../src/auth/password-verifier-pool';
import { ProblemError } from '../../src/domain/problem';
import { threadNiceValues } from '../support/threads';
import { notRun } from '../support/env';

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
