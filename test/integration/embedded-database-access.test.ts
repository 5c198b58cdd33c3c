/**
 * #11.14: the embedded database (PGlite's wire protocol, no password) is reachable by this user only: it
 * listens on a Unix socket in a private directory (mode 0700), on no TCP port, so another local process
 * cannot connect to it and rewrite profiles.
 */
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { MikroORM } from '@mikro-orm/postgresql';
import type { EmbeddedDatabase } from '../../src/adapters/pglite/embedded-database';
import { startEmbeddedDatabaseProcess } from '../../src/adapters/pglite/embedded-database-process';
import { connectionOptions } from '../../src/adapters/postgres/orm';

/** The socket directory named by an embedded database URL (libpq's `?host=/dir`). */
function socketDirOf(url: string): string {
  const dir = new URL(url).searchParams.get('host');
  if (!dir?.startsWith('/')) throw new Error(`not a Unix-socket URL: ${url}`);
  return dir;
}

/** Inodes of the TCP sockets (IPv4 and IPv6) in LISTEN state on this machine. */
function listeningTcpInodes(): Set<string> {
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.trim().split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[3] === '0A') inodes.add(fields[9]!);
    }
  }
  return inodes;
}

/** Socket inodes a process holds open. */
function socketInodesOf(pid: number): string[] {
  return readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      return match ? [match[1]!] : [];
    } catch {
      return [];
    }
  });
}

/** Connects to the socket as another local user (nobody); resolves the outcome: 'connected' or an error code. */
function connectAsNobody(socketPath: string): Promise<string> {
  const program = `require('node:net').connect(${JSON.stringify(socketPath)}).on('connect', () => { console.log('connected'); process.exit(0); }).on('error', (e) => { console.log(e.code); process.exit(0); });`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', program], { uid: 65534, gid: 65534, cwd: '/', stdio: ['ignore', 'pipe', 'pipe'], env: {} });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('exit', () => resolve(out.trim()));
  });
}

async function version(url: string): Promise<string> {
  const orm = await MikroORM.init({ ...connectionOptions(url), entities: [], discovery: { warnWhenNoEntities: false }, pool: { min: 0, max: 1 } });
  try {
    const [row] = await orm.em.fork().execute<Array<{ version: string }>>('select version() as version');
    return row!.version;
  } finally {
    await orm.close(true);
  }
}

// The gateway's embedded database runs in a child process (startEmbeddedDatabaseProcess); the test harness's
// in-process one (startEmbeddedDatabase, global-setup.ts) uses the same private socket and serves every
// test file of a run without DATABASE_URL.
describe('#11.14 the embedded database', () => {
  let db: EmbeddedDatabase;
  beforeAll(async () => {
    db = await startEmbeddedDatabaseProcess('memory://');
  }, 60_000);
  afterAll(async () => {
    await db?.stop();
  });

  it('#11.14: listens on a Unix socket in a 0700 directory of this user, and the driver reaches PGlite through it', async () => {
    const dir = socketDirOf(db.url);
    const info = statSync(dir);
    expect(info.mode & 0o777).toBe(0o700);
    expect(info.uid).toBe(process.getuid!());
    expect(statSync(`${dir}/.s.PGSQL.5432`).isSocket()).toBe(true);
    // Through the socket, not a PostgreSQL that happens to listen on localhost.
    expect(await version(db.url)).toMatch(/PGlite/);
  });

  it('#11.14: holds no listening TCP port', () => {
    expect(db.pid).toEqual(expect.any(Number));
    const listening = listeningTcpInodes();
    expect(socketInodesOf(db.pid!).filter((inode) => listening.has(inode))).toEqual([]);
  });

  it('#11.14: another local user cannot connect', async () => {
    const socketPath = `${socketDirOf(db.url)}/.s.PGSQL.5432`;
    if (process.getuid!() === 0) {
      expect(await connectAsNobody(socketPath)).toBe('EACCES');
    } else {
      // Without root the test cannot become another user; the directory mode is what refuses them.
      expect(statSync(socketDirOf(db.url)).mode & 0o077).toBe(0);
    }
  });
});
