import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import type { EmbeddedDatabase } from './embedded-database';
import { lockDataDirectory } from './data-dir-lock';
import { privateSocket } from './embedded-socket';

/**
 * The child's program, run with `node -e` so it needs no build step and no TypeScript loader. It starts
 * PGlite behind its wire-protocol socket, reports the address over IPC, and stops when asked or when the
 * gateway goes away (the IPC channel closes), so it never outlives its parent.
 *
 * The gateway may go away while PGlite starts (killed during its start): the channel is watched from the first
 * moment, the start is finished (a data directory is never left half created) and closed again, and nothing is sent
 * on the closed channel — a send there would be an uncaught ERR_IPC_CHANNEL_CLOSED on the gateway's stderr.
 */
const CHILD_PROGRAM = `
const { PGlite } = require(process.env.IAM_PGLITE_MODULE);
const { PGLiteSocketServer } = require(process.env.IAM_PGLITE_SOCKET_MODULE);
let parentGone = false;
let stop = () => undefined;
process.on('disconnect', () => { parentGone = true; void stop(); });
const report = (message) => { if (process.connected) process.send(message, () => undefined); };
(async () => {
  const dir = process.env.IAM_PGLITE_DIR;
  const db = await PGlite.create(dir.startsWith('memory://') ? undefined : dir);
  const server = new PGLiteSocketServer({ db, path: process.env.IAM_PGLITE_SOCKET, maxConnections: 16 });
  let stopping = false;
  let listening = false;
  stop = async () => {
    if (stopping) return;
    stopping = true;
    try { if (listening) await server.stop(); await db.close(); } finally { process.exit(0); }
  };
  if (parentGone) return stop();
  await server.start();
  listening = true;
  if (parentGone) return stop();
  process.on('message', (message) => { if (message === 'stop') void stop(); });
  report({ ready: true });
})().catch((error) => {
  report({ error: String(error && error.message || error) });
  process.exit(1);
});
`;

/**
 * Starts the embedded PGlite in a child process and returns its wire-protocol URL.
 * Running it outside the gateway's process keeps database work — a login costs ~15 ms of PGlite time —
 * off the event loop that proxies requests, and keeps its memory (WASM heap) out of the gateway's.
 */
export async function startEmbeddedDatabaseProcess(dataDir: string, startTimeoutMs = 60_000): Promise<EmbeddedDatabase> {
  if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true });
  // #11.23: one process per data directory; a second one fails here, naming the directory.
  // The lock also names the database process (adopt below): a gateway killed with SIGKILL leaves it closing the
  // directory for a moment, and no next gateway may open it meanwhile.
  const lock = dataDir.startsWith('memory://') ? null : await lockDataDirectory(dataDir);
  const release = (): void => lock?.release();
  // #11.14: a Unix socket in a directory only this user can enter, never a TCP port without a password.
  const socket = privateSocket();
  const child: ChildProcess = spawn(process.execPath, ['-e', CHILD_PROGRAM], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: {
      ...process.env,
      IAM_PGLITE_MODULE: require.resolve('@electric-sql/pglite'),
      IAM_PGLITE_SOCKET_MODULE: require.resolve('@electric-sql/pglite-socket'),
      IAM_PGLITE_DIR: dataDir,
      IAM_PGLITE_SOCKET: socket.path,
    },
  });
  if (child.pid !== undefined) lock?.adopt(child.pid);
  const exitedDuringStart = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`the embedded database did not start within ${startTimeoutMs} ms`)), startTimeoutMs);
    const fail = (error: Error): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      rmSync(socket.dir, { recursive: true, force: true });
      void exitedDuringStart.then(release);
      reject(error);
    };
    child.once('message', (message: { ready?: boolean; error?: string }) => {
      clearTimeout(timer);
      if (message.ready) resolve(socket.url);
      else fail(new Error(`the embedded database failed to start: ${message.error ?? 'unknown error'}`));
    });
    child.once('exit', (code) => fail(new Error(`the embedded database exited during start (code ${code})`)));
    child.once('error', fail);
  });
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    url,
    ...(child.pid !== undefined ? { pid: child.pid } : {}),
    async stop() {
      if (child.exitCode === null && child.connected) child.send('stop');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(socket.dir, { recursive: true, force: true });
      release();
    },
  };
}
