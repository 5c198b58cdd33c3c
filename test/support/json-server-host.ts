/**
 * A real third-party REST server behind the gateway: json-server (a dev dependency, its own binary, started as a
 * user starts it), serving a copy of `data` from a temporary folder. It is the host "you cannot change" of
 * docs/guides/app-you-cannot-change.md: `GET /projects`, `/projects/{id}`, `/projects?id=2`, `/tasks/{id}` (whose
 * `projectId` names its project), `_page`/`_limit` with `X-Total-Count` and `Link`, and gzip when asked for it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './front-proxy';
import { hasExited } from './processes';
import { until } from './wait';

export const JSON_SERVER_BIN = join(__dirname, '..', '..', 'node_modules', 'json-server', 'lib', 'cli', 'bin.js');

/** Three projects and four tasks: tasks 1 and 2 in project 1, task 3 in project 2, task 4 in project 3. */
export const SAMPLE_DATA = {
  projects: [
    { id: 1, name: 'Apollo' },
    { id: 2, name: 'Gemini' },
    { id: 3, name: 'Mercury' },
  ],
  tasks: [
    { id: 1, projectId: 1, title: 'Launch' },
    { id: 2, projectId: 1, title: 'Orbit' },
    { id: 3, projectId: 2, title: 'Dock' },
    { id: 4, projectId: 3, title: 'Splash' },
  ],
};

export interface JsonServerHost {
  /** `http://127.0.0.1:<port>`, the gateway's upstream. */
  origin: string;
  process: ChildProcess;
  /** What the server printed so far (stdout and stderr), for a failure's message. */
  output(): string;
  close(): Promise<void>;
}

export async function startJsonServer(data: object = SAMPLE_DATA): Promise<JsonServerHost> {
  const folder = mkdtempSync(join(tmpdir(), 'iam-json-server-'));
  const file = join(folder, 'db.json');
  writeFileSync(file, JSON.stringify(data, null, 2));
  const port = await freePort();
  const child = spawn(process.execPath, [JSON_SERVER_BIN, '--port', String(port), '--host', '127.0.0.1', '--quiet', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  let printed = '';
  child.stdout!.on('data', (chunk: Buffer) => (printed += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (printed += chunk.toString()));
  const origin = `http://127.0.0.1:${port}`;
  const close = async (): Promise<void> => {
    if (child.pid !== undefined && !hasExited(child.pid)) {
      child.kill('SIGTERM');
      await until('json-server to exit', () => child.exitCode !== null || child.signalCode !== null);
    }
    rmSync(folder, { recursive: true, force: true });
  };
  try {
    await until(`json-server on ${origin}`, async () => {
      if (child.exitCode !== null) throw new Error(`json-server exited with ${child.exitCode}: ${printed}`);
      const res = await fetch(`${origin}/projects`).catch(() => null);
      return res !== null && res.ok;
    });
  } catch (error) {
    await close();
    throw error;
  }
  return { origin, process: child, output: () => printed, close };
}
