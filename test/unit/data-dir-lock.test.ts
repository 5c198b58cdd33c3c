/**
 * #11.23: the embedded data directory's lock names the gateway and its database process. A gateway killed with
 * SIGKILL leaves that process closing the database (writing the directory) for a moment: a next gateway waits for
 * it to exit before taking the lock over, and refuses when it does not.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataDirectoryLockedError, LOCK_FILE, lockDataDirectory } from '../../src/adapters/pglite/data-dir-lock';
import { processState } from '../support/processes';
import { until } from '../support/wait';

const children: ChildProcess[] = [];

/** A live process (a stand-in for a gateway or its database process) that ends after `seconds`. */
function liveProcess(seconds: number): { pid: number; exited: Promise<void> } {
  const child = spawn(process.execPath, ['-e', `setTimeout(() => {}, ${seconds * 1000})`], { stdio: 'ignore' });
  children.push(child);
  return { pid: child.pid!, exited: new Promise((resolve) => child.once('exit', () => resolve())) };
}

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

describe('#11.23 embedded data directory lock', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'iam-lock-unit-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  afterAll(() => {
    for (const child of children) child.kill('SIGKILL');
  });

  it('#11.23: records this process, then its database process, and releases only its own lock', async () => {
    const lock = await lockDataDirectory(dir);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n`);
    lock.adopt(4242);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n4242\n`);
    lock.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);

    const again = await lockDataDirectory(dir);
    writeFileSync(join(dir, LOCK_FILE), '999999\n');
    again.release();
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe('999999\n');
  });

  it('#11.23: refuses a directory whose gateway is alive, naming it', async () => {
    const gateway = liveProcess(30);
    writeFileSync(join(dir, LOCK_FILE), `${gateway.pid}\n${await deadPid()}\n`);
    await expect(lockDataDirectory(dir, 0)).rejects.toThrow(new DataDirectoryLockedError(dir, gateway.pid));
  });

  it('#11.23: takes over from a killed gateway only once its database process has exited', async () => {
    const database = liveProcess(1);
    writeFileSync(join(dir, LOCK_FILE), `${await deadPid()}\n${database.pid}\n`);
    const lock = await lockDataDirectory(dir, 20_000);
    // Gone or a zombie when the lock is taken. (Its 'exit' event may reach this process a moment later: waiting for
    // that event instead failed once in CI although the process had exited.)
    expect(processState(database.pid)).toMatch(/^(gone|Z|X)$/);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n`);
    lock.release();
  });

  it('#11.23: refuses when the database process of a gone gateway does not exit, naming it', async () => {
    const database = liveProcess(30);
    const gone = await deadPid();
    writeFileSync(join(dir, LOCK_FILE), `${gone}\n${database.pid}\n`);
    const refusal = lockDataDirectory(dir, 300);
    await expect(refusal).rejects.toBeInstanceOf(DataDirectoryLockedError);
    await expect(refusal).rejects.toThrow(`pid ${database.pid}`);
    await expect(refusal).rejects.toThrow(`a gateway that is gone (pid ${gone})`);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe(`${gone}\n${database.pid}\n`);
  });

  it('#11.23: takes over a lock whose processes are all gone', async () => {
    writeFileSync(join(dir, LOCK_FILE), `${await deadPid()}\n${await deadPid()}\n`);
    const lock = await lockDataDirectory(dir, 0);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n`);
    lock.release();
  });
});

describe('#11.23 embedded data directory lock and unreaped processes', () => {
  it('#11.23: a database process that exited but was never reaped (a zombie) does not hold the lock', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-lock-unit-'));
    // The shell execs into a sleeper whose child exits and is never waited for: a zombie for as long as it sleeps.
    const parent = spawn('sh', ['-c', `${process.execPath} -e '' & exec ${process.execPath} -e 'setTimeout(() => {}, 30000)'`], { stdio: 'ignore' });
    try {
      const zombie = await until('the unreaped child', () => readdirSafe(`/proc/${parent.pid}/task/${parent.pid}/children`).find((task) => processState(task) === 'Z'), { every: 50 });
      writeFileSync(join(dir, LOCK_FILE), `${await deadPid()}\n${zombie}\n`);
      const lock = await lockDataDirectory(dir, 0);
      expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n`);
      lock.release();
    } finally {
      parent.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** The pids listed in a /proc `children` file (empty when unreadable). */
function readdirSafe(path: string): number[] {
  try {
    return readFileSync(path, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
