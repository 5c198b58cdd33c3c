/**
 * #11.19: a policy file written in two steps (first half, a pause shorter than the settle window, second
 * half) is never served half-written nor reported as a broken reload, whatever triggers the read: file
 * events, the periodic check, or an explicit reload (SIGHUP) arriving during the pause.
 */
import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompiledPolicy, PolicyIssue } from '../../src/policy/compiled-policy';
import { createLogger } from '../../src/observability/logger';
import { createMetrics } from '../../src/observability/metrics';
import { loadPolicyDirectory } from '../../src/policy/load-policy-directory';
import { PolicyHolder } from '../../src/policy/policy-holder';
import { PolicyReloader } from '../../src/policy/policy-watcher';
import { until } from '../support/wait';

const SETTLE_MS = 1000;
/** Between the writes of one edit: the scenario (an editor saving in pieces), not a wait for something to happen. */
const PAUSE_MS = 150;

const OLD = 'version: 1\nroutes:\n  - { path: /old, methods: [GET], public: true }\n  - { path: /admin/**, methods: ["*"], permission: admin:write }\n';
const NEW = 'version: 1\nroutes:\n  - { path: /new, methods: [GET], public: true }\n  - { path: /admin/**, methods: ["*"], permission: admin:write }\n';

let root: string;
let reloader: PolicyReloader | undefined;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'iam-settle-'));
});
afterEach(async () => {
  await reloader?.close();
  reloader = undefined;
  await rm(root, { recursive: true, force: true });
});

/** A reloader on `routes.yaml` = OLD that records every policy it serves and every failure it reports. */
async function startReloader(pollIntervalMs: number): Promise<{ file: string; served: CompiledPolicy[]; reported: PolicyIssue[][]; holder: PolicyHolder }> {
  const dir = join(root, 'policies');
  await mkdir(dir);
  const file = join(dir, 'routes.yaml');
  await writeFile(file, OLD);
  const holder = new PolicyHolder((await loadPolicyDirectory(dir)).policy!);
  const served: CompiledPolicy[] = [];
  const reported: PolicyIssue[][] = [];
  const swap = holder.swap.bind(holder);
  const reject = holder.reject.bind(holder);
  holder.swap = (next) => {
    if (next !== holder.current) served.push(next);
    swap(next);
  };
  holder.reject = (issues) => {
    reported.push(issues);
    reject(issues);
  };
  reloader = new PolicyReloader({ dir, holder, debounceMs: SETTLE_MS, pollIntervalMs, defaultResolverTimeoutMs: 2000, logger: createLogger('silent'), metrics: createMetrics({ collectDefaults: false }) });
  reloader.start();
  await reloader.reload('settled');
  return { file, served, reported, holder };
}

/** Writes `text` into `file` through one descriptor: the first `cut` characters, a pause, the rest. */
async function writeInTwoSteps(file: string, text: string, cut: number, during?: () => void): Promise<void> {
  const handle = await open(file, 'w');
  try {
    await handle.write(text.slice(0, cut));
    during?.();
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    await handle.write(text.slice(cut));
  } finally {
    await handle.close();
  }
}

describe('#11.19 a policy file written in two steps', () => {
  it.each([
    ['at a line boundary (the first half is a valid, smaller policy)', NEW.indexOf('  - { path: /admin')],
    ['mid-line (the first half does not parse)', NEW.indexOf('admin:write')],
  ])('is never served or reported half-written, %s; file events and a 25 ms periodic check', async (_name, cut) => {
    const { file, served, reported, holder } = await startReloader(25);
    await writeInTwoSteps(file, NEW, cut);
    await until('the new policy', () => holder.current.match('GET', '/new') !== null);
    expect(reported).toEqual([]);
    expect(served).toHaveLength(1);
    expect(served[0].match('DELETE', '/admin/users')?.route.permission).toBe('admin:write');
  });

  it('is never served half-written by an explicit reload (SIGHUP) arriving during the pause', async () => {
    const { file, served, reported, holder } = await startReloader(0);
    let explicit: ReturnType<PolicyReloader['reload']> | undefined;
    await writeInTwoSteps(file, NEW, NEW.indexOf('  - { path: /admin'), () => {
      explicit = reloader!.reload('SIGHUP');
    });
    expect(await explicit).toMatchObject({ ok: true, changed: true });
    expect(holder.current.match('GET', '/new')).not.toBeNull();
    expect(holder.current.match('POST', '/admin/x')?.route.permission).toBe('admin:write');
    expect(reported).toEqual([]);
    expect(served).toHaveLength(1);
  });

  it('a write whose file keeps growing past the settle window is read once it stops', async () => {
    const { file, served, reported, holder } = await startReloader(25);
    const handle = await open(file, 'w');
    const lines = NEW.split(/(?<=\n)/);
    try {
      for (const line of lines) {
        await handle.write(line);
        await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
      }
    } finally {
      await handle.close();
    }
    await until('the new policy', () => holder.current.match('GET', '/new') !== null);
    expect(reported).toEqual([]);
    expect(served.map((policy) => policy.routes.length)).toEqual([2]);
  });
});
