/**
 * Hot reload (docs/policy-format.md): the PolicyReloader on a real file system, then a real gateway
 * under a stream of requests while its policy file changes. Every wait polls a condition with a deadline.
 */
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../../src/observability/logger';
import { createMetrics, type GatewayMetrics } from '../../src/observability/metrics';
import { loadPolicyDirectory } from '../../src/policy/load-policy-directory';
import { PolicyHolder } from '../../src/policy/policy-holder';
import { PolicyReloader } from '../../src/policy/policy-watcher';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { startTestGateway } from '../support/gateway';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { until } from '../support/wait';

/** A policy where GET `path` is public (`open`) or needs a permission nobody has (`closed`: 401 anonymous). */
function policy(routes: Record<string, 'open' | 'closed'>): string {
  const lines = Object.entries(routes).map(([path, kind]) =>
    kind === 'open' ? `  - { path: ${path}, methods: [GET], public: true }` : `  - { path: ${path}, methods: [GET], permission: nobody:has }`,
  );
  return `version: 1\ndefault: deny\nroutes:\n${lines.join('\n')}\n`;
}

/** The shared poller (test/support/wait.ts), with a generous bound whatever the call names. */
function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000): Promise<T> {
  return until(what, probe, { within: Math.max(timeoutMs, 20_000) });
}

async function counter(metrics: Pick<GatewayMetrics, 'policyReloads'>, result: 'success' | 'failure'): Promise<number> {
  const values = (await metrics.policyReloads.get()).values;
  return values.find((value) => value.labels.result === result)?.value ?? 0;
}

const temps: string[] = [];
async function tempRoot(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'iam-reload-'));
  temps.push(root);
  return root;
}
afterAll(async () => {
  for (const dir of temps) await rm(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------- the reloader on its own

describe('PolicyReloader', () => {
  let dir: string;
  let holder: PolicyHolder;
  let metrics: GatewayMetrics;
  let reloader: PolicyReloader;
  let logs: Array<{ level: number; msg: string; file?: string; line?: number }>;

  async function start(files: Record<string, string>, options: { debounceMs?: number; pollIntervalMs?: number } = {}): Promise<void> {
    dir = join(await tempRoot(), 'policies');
    await mkdir(dir);
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    const loaded = await loadPolicyDirectory(dir);
    holder = new PolicyHolder(loaded.policy!);
    metrics = createMetrics({ collectDefaults: false });
    logs = [];
    const logger = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line)) });
    reloader = new PolicyReloader({
      dir,
      holder,
      debounceMs: options.debounceMs ?? 50,
      pollIntervalMs: options.pollIntervalMs ?? 0,
      defaultResolverTimeoutMs: 2000,
      logger,
      metrics,
    });
    reloader.start();
    // Reloads run one at a time: once this one is done, the start-up check is too.
    await reloader.reload('settled');
  }

  afterEach(async () => {
    await reloader?.close();
  });

  const serves = (path: string): string | null => holder.current.match('GET', path)?.route.id ?? null;

  it('reloads an edited file after the debounce, on file events alone (polling off)', async () => {
    await start({ 'a.yaml': policy({ '/one': 'open' }) });
    await writeFile(join(dir, 'a.yaml'), policy({ '/two': 'open' }));
    await waitFor('the new policy', () => serves('/two') !== null);
    expect(serves('/one')).toBeNull();
    expect(await counter(metrics, 'success')).toBe(1);
    expect(logs.some((entry) => entry.msg === 'policy: reloaded')).toBe(true);
  });

  it('round 3: says loudly when a reloaded file lost routes or half its bytes, or was removed (a file read half-written)', async () => {
    const many: Record<string, 'open'> = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`/r${i}`, 'open' as const]));
    await start({ 'a.yaml': policy(many), 'b.yaml': policy({ '/bee': 'open' }), 'c.yaml': policy({ '/sea': 'open' }) });
    // A valid file with fewer routes (what a write in two steps leaves between them) and a removed file.
    await writeFile(join(dir, 'a.yaml'), policy({ '/r0': 'open' }));
    await rm(join(dir, 'c.yaml'));
    await waitFor('the smaller policy', () => serves('/r1') === null && serves('/sea') === null);
    const warning = await waitFor('the warning', () => logs.find((entry) => entry.level === 40 && entry.msg.startsWith('policy: RELOADED POLICY LOST ROUTES OR SHRANK')));
    expect(warning.msg).toContain('a.yaml 8 -> 1 routes');
    expect(warning.msg).toContain('c.yaml 1 -> 0 routes');
    expect(warning.msg).not.toContain('b.yaml');
    // Growing, or an edit that keeps the routes and most of the bytes, is quiet.
    logs.length = 0;
    await writeFile(join(dir, 'a.yaml'), policy({ ...many, '/r8': 'open' }));
    await waitFor('the larger policy', () => serves('/r8') !== null);
    expect(logs.some((entry) => entry.level === 40)).toBe(false);
  });

  it('keeps the last good policy on a broken edit, logs every error with file:line, and recovers', async () => {
    await start({ 'a.yaml': policy({ '/one': 'open' }), 'b.yaml': policy({ '/bee': 'open' }) });
    const good = holder.current;
    await writeFile(join(dir, 'a.yaml'), 'version: 1\nroutes:\n  - { path: /one, methods: [GET], permision: x:y }\n  - { path: /two, methods: [FETCH] }\n');
    await waitFor('the rejection', () => holder.lastError !== null);
    expect(holder.current).toBe(good);
    const errors = logs.filter((entry) => entry.level === 50 && entry.file === 'a.yaml').map((entry) => `${entry.line} ${entry.msg}`);
    expect(errors).toEqual([
      '3 policy: a.yaml:3: routes[0]: unknown key "permision"',
      '4 policy: a.yaml:4: routes[1].methods[0]: must be one of "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "*"',
    ]);
    expect(holder.describe().lastError).toMatchObject({ issues: ['a.yaml:3: routes[0]: unknown key "permision"', expect.stringMatching(/^a\.yaml:4: routes\[1\]\.methods\[0\]: /)] });
    expect(await counter(metrics, 'failure')).toBe(1);

    // The same broken state is not reported again by background checks, but is by an explicit reload.
    await reloader.reload('test');
    expect(await counter(metrics, 'failure')).toBe(2);

    await writeFile(join(dir, 'a.yaml'), policy({ '/fixed': 'open' }));
    await waitFor('the fixed policy', () => serves('/fixed') !== null);
    expect(holder.lastError).toBeNull();
    expect(serves('/bee')).not.toBeNull();
  });

  it('clears the error without a swap when a broken edit is reverted', async () => {
    const original = policy({ '/one': 'open' });
    await start({ 'a.yaml': original });
    const serving = holder.current;
    await writeFile(join(dir, 'a.yaml'), 'version: [\n');
    await waitFor('the rejection', () => holder.lastError !== null);
    await writeFile(join(dir, 'a.yaml'), original);
    await waitFor('the error to clear', () => holder.lastError === null);
    expect(holder.current).toBe(serving);
    expect(await counter(metrics, 'success')).toBe(0);
  });

  it('follows a Kubernetes ConfigMap update (..data re-pointed atomically, symlinks added and removed)', async () => {
    const root = await tempRoot();
    dir = join(root, 'cm');
    await mkdir(join(dir, '..2026_11_22_10_00_00.1'), { recursive: true });
    await writeFile(join(dir, '..2026_11_22_10_00_00.1', 'routes.yaml'), policy({ '/v1': 'open' }));
    await writeFile(join(dir, '..2026_11_22_10_00_00.1', 'old.yaml'), policy({ '/old': 'open' }));
    await symlink('..2026_11_22_10_00_00.1', join(dir, '..data'));
    await symlink('..data/routes.yaml', join(dir, 'routes.yaml'));
    await symlink('..data/old.yaml', join(dir, 'old.yaml'));
    holder = new PolicyHolder((await loadPolicyDirectory(dir)).policy!);
    metrics = createMetrics({ collectDefaults: false });
    reloader = new PolicyReloader({ dir, holder, debounceMs: 50, pollIntervalMs: 0, defaultResolverTimeoutMs: 2000, logger: createLogger('silent'), metrics });
    reloader.start();
    await reloader.reload('settled');
    expect(serves('/old')).not.toBeNull();

    // What the kubelet does: write the new version aside, swap ..data with one rename, then fix the symlinks.
    const next = join(dir, '..2026_11_22_10_05_00.2');
    await mkdir(next);
    await writeFile(join(next, 'routes.yaml'), policy({ '/v2': 'open' }));
    await writeFile(join(next, 'new.yaml'), policy({ '/new': 'open' }));
    await symlink('..2026_11_22_10_05_00.2', join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    await symlink('..data/new.yaml', join(dir, 'new.yaml'));
    await unlink(join(dir, 'old.yaml'));
    await rm(join(dir, '..2026_11_22_10_00_00.1'), { recursive: true });

    await waitFor('the new ConfigMap version', () => serves('/v2') !== null && serves('/new') !== null);
    expect(serves('/v1')).toBeNull();
    expect(serves('/old')).toBeNull();
    expect(holder.current.files).toEqual(['new.yaml', 'routes.yaml']);
    expect(await counter(metrics, 'failure')).toBe(0);
  });

  it('waits out a file that is briefly missing during a swap instead of reporting it', async () => {
    await start({ 'a.yaml': policy({ '/a': 'open' }), 'b.yaml': policy({ '/b': 'open' }) }, { debounceMs: 200 });
    const aside = join(dir, '..b.next');
    await writeFile(aside, policy({ '/b2': 'open' }));
    // b.yaml now points nowhere (as a ConfigMap symlink does between the ..data swap and the clean-up).
    await unlink(join(dir, 'b.yaml'));
    await symlink('..missing/b.yaml', join(dir, 'b.yaml'));
    const outcome = reloader.reload('test');
    setTimeout(() => {
      void unlink(join(dir, 'b.yaml')).then(() => rename(aside, join(dir, 'b.yaml')));
    }, 20);
    expect(await outcome).toMatchObject({ ok: true, changed: true });
    expect(serves('/b2')).not.toBeNull();
    expect(await counter(metrics, 'failure')).toBe(0);
  });

  it('re-arms its watcher when the directory itself is replaced', async () => {
    await start({ 'a.yaml': policy({ '/first': 'open' }) });
    const root = join(dir, '..');
    await rename(dir, join(root, 'policies.old'));
    await mkdir(dir);
    await writeFile(join(dir, 'a.yaml'), policy({ '/second': 'open' }));
    await waitFor('the replacement directory', () => serves('/second') !== null);
    // Edits in the new directory are seen too (the watcher follows the new inode, polling is off).
    await writeFile(join(dir, 'a.yaml'), policy({ '/third': 'open' }));
    await waitFor('an edit in the replacement directory', () => serves('/third') !== null);
  });

  it('finds changes file events cannot see with the periodic checksum check', async () => {
    const outside = join(await tempRoot(), 'elsewhere.yaml');
    await writeFile(outside, policy({ '/before': 'open' }));
    dir = join(await tempRoot(), 'policies');
    await mkdir(dir);
    await symlink(outside, join(dir, 'routes.yaml'));
    holder = new PolicyHolder((await loadPolicyDirectory(dir)).policy!);
    metrics = createMetrics({ collectDefaults: false });
    reloader = new PolicyReloader({ dir, holder, debounceMs: 50, pollIntervalMs: 200, defaultResolverTimeoutMs: 2000, logger: createLogger('silent'), metrics });
    reloader.start();
    await reloader.reload('settled');
    await writeFile(outside, policy({ '/after': 'open' }));
    await waitFor('the periodic check', () => serves('/after') !== null);
  });

  it('stops on close: later edits change nothing', async () => {
    await start({ 'a.yaml': policy({ '/one': 'open' }) }, { pollIntervalMs: 100 });
    const serving = holder.current;
    await reloader.close();
    await writeFile(join(dir, 'a.yaml'), policy({ '/two': 'open' }));
    expect(await reloader.reload('after close')).toMatchObject({ changed: false });
    expect(holder.current).toBe(serving);
  });
});

// ---------------------------------------------------------------- through a real gateway

interface Sample {
  sentAt: number;
  receivedAt: number;
  status: number;
}

/** `workers` loops sending GET `path` until `stop()`; a transport error is recorded as status 0. */
function requestStream(url: string, workers = 4): { samples: Sample[]; stop: () => Promise<void> } {
  const samples: Sample[] = [];
  let running = true;
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      const sentAt = performance.now();
      let status: number;
      try {
        const response = await fetch(url);
        await response.arrayBuffer();
        status = response.status;
      } catch {
        status = 0;
      }
      samples.push({ sentAt, receivedAt: performance.now(), status });
    }
  });
  return {
    samples,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

describe('hot reload in a running gateway', () => {
  let upstream: RecordingUpstream;
  let gateway: RunningGateway;
  let dir: string;

  const status = async (path: string): Promise<number> => {
    const response = await fetch(`${gateway.url}${path}`);
    await response.arrayBuffer();
    return response.status;
  };
  // The policy state as the gateway reports it (readiness serves only `ok`: #11.16; the details are logged).
  const readiness = async (): Promise<{ hash: string; lastError: { issues: string[] } | null }> =>
    gateway.services!.policy.describe() as { hash: string; lastError: { issues: string[] } | null };
  const reloads = async (result: 'success' | 'failure'): Promise<number> => {
    const text = await (await fetch(`${gateway.managementUrl}/metrics`)).text();
    const line = text.split('\n').find((entry) => entry.startsWith(`iam_policy_reloads_total{result="${result}"}`));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  beforeAll(async () => {
    const db = await createTestDatabase();
    await db.close();
    upstream = await startRecordingUpstream();
    dir = join(await tempRoot(), 'policies');
    await mkdir(dir);
    await writeFile(join(dir, 'routes.yaml'), policy({ '/api/thing': 'open', '/slow/**': 'open' }));
    gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: dir, IAM_POLICY_DEBOUNCE: '50ms', IAM_POLICY_POLL_INTERVAL: '500ms' });
  });

  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  /**
   * "Switched, not stuck": the change is seen by the file watcher (50 ms debounce) or at worst by the 500 ms poll
   * configured above; 10 s is far above both on a loaded machine and only turns a policy that never switches into a
   * failure. How fast it switches is the bench's business.
   */
  const SWITCHED_NOT_STUCK_MS = 10_000;

  it('switches from policy A to B under load: every answer is A’s or B’s, none fails, then only B’s', async () => {
    expect(await status('/api/thing')).toBe(200);
    const inFlight = fetch(`${gateway.url}/slow/800`).then((response) => response.status);
    const stream = requestStream(`${gateway.url}/api/thing`);
    await waitFor('requests flowing', () => stream.samples.length >= 20);
    const changedAt = performance.now();
    await writeFile(join(dir, 'routes.yaml'), policy({ '/api/thing': 'closed', '/slow/**': 'closed' }));
    const firstB = await waitFor('policy B', () => stream.samples.find((sample) => sample.status === 401 && sample.sentAt >= changedAt));
    await waitFor('more requests on B', () => stream.samples.filter((sample) => sample.sentAt > firstB.receivedAt).length >= 20);
    await stream.stop();

    expect(stream.samples.filter((sample) => sample.status !== 200 && sample.status !== 401)).toEqual([]);
    expect(stream.samples.filter((sample) => sample.sentAt > firstB.receivedAt && sample.status !== 401)).toEqual([]);
    expect(firstB.receivedAt - changedAt).toBeLessThan(SWITCHED_NOT_STUCK_MS);
    // The request already authorized under A finishes normally.
    expect(await inFlight).toBe(200);
    expect(await reloads('failure')).toBe(0);
  });

  it('keeps serving the last good policy on a broken edit: error in readiness and in the metric', async () => {
    const failuresBefore = await reloads('failure');
    const hash = (await readiness()).hash;
    await writeFile(join(dir, 'routes.yaml'), 'version: 1\nroutes:\n  - { path: /api/thing, methods: [GET], public: maybe }\n');
    const detail = await waitFor('the error in readiness', async () => {
      const current = await readiness();
      return current.lastError ? current : undefined;
    });
    expect(detail.hash).toBe(hash);
    expect(detail.lastError!.issues).toEqual([expect.stringMatching(/^routes\.yaml:3: routes\[0\]\.public: /)]);
    expect(await reloads('failure')).toBe(failuresBefore + 1);
    expect(await status('/api/thing')).toBe(401);

    const successesBefore = await reloads('success');
    await writeFile(join(dir, 'routes.yaml'), policy({ '/api/thing': 'open', '/api/fixed': 'open' }));
    await waitFor('the fixed policy', async () => (await status('/api/fixed')) === 200);
    expect(await status('/api/thing')).toBe(200);
    expect((await readiness()).lastError).toBeNull();
    expect(await reloads('success')).toBe(successesBefore + 1);
  });

  it('reloads when a file is added and when it is deleted', async () => {
    await writeFile(join(dir, 'extra.yaml'), policy({ '/api/extra': 'open' }));
    await waitFor('the added file', async () => (await status('/api/extra')) === 200);
    await unlink(join(dir, 'extra.yaml'));
    await waitFor('the deleted file', async () => (await status('/api/extra')) === 403);
    expect(gateway.services!.policy.current.files).toEqual(['routes.yaml']);
  });

  it('follows a ConfigMap-style ..data symlink swap of the gateway’s directory', async () => {
    const failuresBefore = await reloads('failure');
    await mkdir(join(dir, '..2026_11_22_a'));
    await writeFile(join(dir, '..2026_11_22_a', 'routes.yaml'), policy({ '/api/cm': 'open' }));
    await symlink('..2026_11_22_a', join(dir, '..data'));
    await symlink('..data/routes.yaml', join(dir, 'routes.yaml.link'));
    await rename(join(dir, 'routes.yaml.link'), join(dir, 'routes.yaml'));
    await waitFor('the ConfigMap layout', async () => (await status('/api/cm')) === 200);

    await mkdir(join(dir, '..2026_11_22_b'));
    await writeFile(join(dir, '..2026_11_22_b', 'routes.yaml'), policy({ '/api/cm': 'closed' }));
    await symlink('..2026_11_22_b', join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    await rm(join(dir, '..2026_11_22_a'), { recursive: true });
    await waitFor('the swapped version', async () => (await status('/api/cm')) === 401);
    expect(await reloads('failure')).toBe(failuresBefore);
  });
});

describe('SIGHUP', () => {
  let upstream: RecordingUpstream;
  let gateway: RunningGateway;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
  });

  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('reloads a change neither file events nor polling see (polling off, file behind an outside symlink)', async () => {
    const outside = join(await tempRoot(), 'routes.yaml');
    await writeFile(outside, policy({ '/api/hup': 'open' }));
    const dir = join(await tempRoot(), 'policies');
    await mkdir(dir);
    await symlink(outside, join(dir, 'routes.yaml'));
    gateway = await startTestGateway(upstream.url, { IAM_POLICIES_DIR: dir, IAM_POLICY_DEBOUNCE: '50ms', IAM_POLICY_POLL_INTERVAL: '0' });
    expect((await fetch(`${gateway.url}/api/hup`)).status).toBe(200);

    await writeFile(outside, policy({ '/api/hup': 'closed' }));
    const reload = jest.spyOn(gateway.services!.policyReloader, 'reload');
    process.emit('SIGHUP', 'SIGHUP');
    expect(reload).toHaveBeenCalledWith('SIGHUP');
    // Only this reload can have seen the change: it is the one that swapped the new policy in.
    expect(await reload.mock.results[0].value).toMatchObject({ ok: true, changed: true });
    expect((await fetch(`${gateway.url}/api/hup`)).status).toBe(401);
    reload.mockRestore();
  });

  it('stops listening for SIGHUP when the gateway closes', async () => {
    const before = process.listenerCount('SIGHUP');
    await gateway.close();
    expect(process.listenerCount('SIGHUP')).toBe(before - 1);
  });
});
