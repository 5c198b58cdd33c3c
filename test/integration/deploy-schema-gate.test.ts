/**
 * deploy/kubernetes/: no gateway pod migrates beside the migration Job. `serve` applies pending migrations itself,
 * so the Deployment's `wait-for-schema` init container holds each pod until `migrate status` lists nothing pending,
 * and while the database cannot be reached. Its script and the Job's command are taken from the manifests and run
 * here, as the image runs them (`/bin/sh -c`, node, the working directory holding bin/), against this run's database:
 * an empty schema keeps the gate waiting, the Job's `migrate up` releases it; an unreachable database never does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { MikroORM } from '@mikro-orm/postgresql';
import { parseAllDocuments } from 'yaml';
import { createTestOrm, dropPublicSchema } from '../support/database';
import { testDatabaseUrl } from '../support/env';
import { ROOT } from '../support/gateway';
import { ensureBuilt, runUntilExit } from '../support/gateway-process';
import { until } from '../support/wait';

const manifests = (file: string): Array<Record<string, any>> =>
  parseAllDocuments(readFileSync(join(ROOT, 'deploy', 'kubernetes', file), 'utf8')).map((doc) => doc.toJS() as Record<string, any>);
const deployment = manifests('deployment.yaml').find((manifest) => manifest.kind === 'Deployment')!;
const gate = (deployment.spec.template.spec.initContainers as Array<{ name: string; command: string[] }>).find((init) => init.name === 'wait-for-schema')!;
const job = manifests('migration-job.yaml').find((manifest) => manifest.kind === 'Job')!;

interface Gate {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Runs the init container's command with only DATABASE_URL (as the pod gives it) and `node` on the PATH. */
function runGate(databaseUrl: string): Gate {
  const [shell, ...args] = gate.command;
  const child = spawn(shell!, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: `${dirname(process.execPath)}:/usr/bin:/bin`, HOME: process.env.HOME ?? '', DATABASE_URL: databaseUrl } });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

let orm: MikroORM;
const running: Gate[] = [];

beforeAll(async () => {
  ensureBuilt();
  orm = await createTestOrm();
}, 200_000);

afterAll(async () => {
  for (const { child } of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await orm?.close(true);
});

describe('the wait-for-schema gate and the migration Job', () => {
  it('a pod waits while migrations are pending, and starts once the Job applied them', async () => {
    await dropPublicSchema(orm); // a database no migration was applied to: every one is pending
    const waiting = runGate(testDatabaseUrl());
    running.push(waiting);
    await until('the gate to wait (or to exit)', () => waiting.output().includes('wait-for-schema: migrations pending') || waiting.child.exitCode !== null, { within: 60_000 });
    expect(waiting.child.exitCode).toBeNull();

    // The Job: the image's entrypoint (node bin/iam-gateway.js) with its args.
    const migrated = await runUntilExit(job.spec.template.spec.containers[0].args as string[], { DATABASE_URL: testDatabaseUrl() }, 60_000);
    expect({ code: migrated.code, stdout: migrated.stdout }).toEqual({ code: 0, stdout: expect.stringContaining('migrate: applied ') });

    const code = await until('the gate to let the pod start', () => (waiting.child.exitCode === null ? null : { code: waiting.child.exitCode }), { within: 60_000 });
    expect(code).toEqual({ code: 0 });
  }, 200_000);

  it('a schema already current lets the pod start at once', async () => {
    const current = runGate(testDatabaseUrl());
    running.push(current);
    expect(await current.exited).toBe(0);
    expect(current.output()).not.toContain('wait-for-schema:');
  }, 60_000);

  it('a database that cannot be reached keeps the pod waiting (never taken for "nothing pending")', async () => {
    const unreachable = runGate('postgresql://iam@127.0.0.1:1/iam');
    running.push(unreachable);
    await until('the gate to wait (or to exit)', () => unreachable.output().includes('wait-for-schema: migrations pending or the database unreachable') || unreachable.child.exitCode !== null, {
      within: 60_000,
    });
    expect(unreachable.child.exitCode).toBeNull();
    unreachable.child.kill('SIGKILL');
  }, 90_000);
});
