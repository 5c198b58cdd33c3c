/**
 * `iam-gateway serve --workers N` with real processes (#18, "Workers"): a primary forks N workers that share the
 * proxy port (node:cluster) and serves the management port for all of them. Requests on one port are answered by
 * two worker pids; a revocation through the port is refused by whichever worker answers next; /metrics on the
 * management port sums the workers' counters; a worker killed with SIGKILL is replaced while the port keeps
 * answering; SIGTERM to the primary drains an in-flight request on a worker and exits 0. Starts that cannot work
 * (more than one worker without Redis or without a database server) exit 1 naming the fix. #28: after "revoke every
 * session" through the port, the provider's access tokens issued before it are refused by every worker, also those a
 * worker never saw.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestOrm, dropPublicSchema } from '../support/database';
import { describeWithRedis, notRun, testDatabaseKind } from '../support/env';
import { bearer, login } from '../support/gateway';
import { ensureBuilt, serveUntilExit, startGatewayProcess, type GatewayProcess } from '../support/gateway-process';
import { startTestOp, type TestOp } from '../support/oidc-op';
import { RawConnection } from '../support/raw-connection';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { until } from '../support/wait';

const POLICY = `
version: 1
default: deny
routes:
  - { path: /health, methods: [GET], public: true }
  - { path: /slow/:ms, methods: [GET], public: true }
  - { path: /api/projects, methods: [GET], permission: project:list }
`;
/** The audience of the provider's access tokens the workers accept. */
const API = 'https://api.example.test';

/** One request on a connection of its own (no keep-alive), so node:cluster hands each to the next worker in turn. */
function fresh(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { agent: false, headers: { ...headers, connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    request.on('error', reject);
  });
}

async function statuses(url: string, count: number, headers: Record<string, string> = {}): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push((await fresh(url, headers)).status);
  return out;
}

/** The shared poller (test/support/wait.ts). */
function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  return until(what, probe, { within: Math.max(timeoutMs, 20_000), every: 100 });
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

type LogLine = Record<string, unknown>;
/** worker id → pid, from each worker's `iam-gateway worker listening` line. */
const workerPids = (gateway: GatewayProcess): Map<number, number> =>
  new Map(gateway.logs().filter((line) => line.msg === 'iam-gateway worker listening').map((line) => [line.worker as number, line.pid as number]));
const accessLines = (gateway: GatewayProcess, path: string): LogLine[] => gateway.logs().filter((line) => line.msg === 'access' && line.path === path);

/** The value of one sample line of a Prometheus exposition (0 when absent). */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((entry) => entry.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const runnable = testDatabaseKind() === 'postgres' || process.env.CI !== undefined;
const describeWithServers = runnable ? describeWithRedis : (title: string, body: () => void): void => (notRun(`${title}: DATABASE_URL unset (CI always sets it)`), describe.skip(title, body));

describeWithServers('serve --workers 2 (Redis and PostgreSQL)', () => {
  let policies: string;
  let upstream: RecordingUpstream;
  let gateway: GatewayProcess;
  let op: TestOp;
  const others: GatewayProcess[] = [];

  beforeAll(async () => {
    ensureBuilt();
    // An empty schema: the primary migrates it once, before its workers start.
    const orm = await createTestOrm();
    await dropPublicSchema(orm);
    await orm.close(true);
    policies = mkdtempSync(join(tmpdir(), 'iam-workers-'));
    writeFileSync(join(policies, 'routes.yaml'), POLICY);
    upstream = await startRecordingUpstream();
    op = await startTestOp({ clients: [{ client_id: 'app', client_secret: 'app-secret', redirect_uris: ['http://127.0.0.1:1/cb'] }], resourceAudience: API });
    gateway = await startGatewayProcess(
      upstream.url,
      { IAM_POLICIES_DIR: policies, IAM_ACCESS_LOG: 'all', IAM_OIDC_ISSUER: op.issuer, IAM_OIDC_ACCEPT_ACCESS_TOKENS: 'true', IAM_OIDC_AUDIENCE: API, IAM_OIDC_USERS: 'existing', IAM_OIDC_CLIENT_ID: 'iam-gateway' },
      ['--workers', '2'],
    );
  }, 120_000);

  afterAll(async () => {
    for (const started of [gateway, ...others]) await started?.kill();
    await upstream?.close();
    await op?.close();
  });

  it('the primary migrates once, then two workers with their own pids listen on the one port', async () => {
    // Each process writes its own log lines to the shared stdout: a worker's may come after the primary's.
    await waitFor('both workers\' listening lines', () => (workerPids(gateway).size === 2 ? true : undefined));
    const logs = gateway.logs();
    const migrated = logs.findIndex((line) => line.msg === 'database ready, migrations applied');
    expect(logs[migrated]?.worker).toBe(0);
    const listening = logs.find((line) => line.msg === 'iam-gateway listening')!;
    expect(listening).toMatchObject({ worker: 0, workers: 2, port: gateway.port, managementPort: gateway.managementPort });
    const pids = workerPids(gateway);
    expect(pids.size).toBe(2);
    expect(new Set(pids.values()).size).toBe(2);
    expect([...pids.values()]).not.toContain(gateway.pid);
    expect([...pids.values()].sort()).toEqual([...(listening.pids as number[])].sort());
    // Every line of a worker carries its id; the workers found the schema current (migrated by the primary).
    expect(logs.filter((line) => line.worker !== 0 && line.msg === 'database ready, migrations applied')).toHaveLength(2);
    expect(await (await fetch(`${gateway.managementUrl}/health/ready`)).json()).toEqual({
      status: 'ready',
      checks: { workers: { ok: true }, database: { ok: true }, tokenStore: { ok: true }, eventsChannel: { ok: true }, policy: { ok: true } },
    });
  });

  it('serves requests on one port from two different worker pids', async () => {
    expect(await statuses(`${gateway.url}/health`, 40)).toEqual(Array(40).fill(200));
    // The access log names the worker of each request (its lines are written in batches: wait for both).
    const served = await waitFor('access log lines of both workers', () => {
      const workers = new Set(accessLines(gateway, '/health').map((line) => line.worker as number));
      return workers.size === 2 ? workers : undefined;
    });
    const pids = workerPids(gateway);
    expect(new Set([...served].map((worker) => pids.get(worker)))).toEqual(new Set(pids.values()));
  });

  it('a revocation through the port is refused on the next request, whichever worker answers', async () => {
    const keeper = await login(gateway.url, 'alice');
    const victim = await login(gateway.url, 'alice', 'alice-password', 'API');
    // Both workers have seen (and cached) the session.
    expect(await statuses(`${gateway.url}/api/projects`, 10, bearer(victim.accessToken))).toEqual(Array(10).fill(200));
    const answer = await fetch(`${gateway.url}/iam/sessions/${victim.sessionId}/revoke`, { method: 'POST', headers: { ...bearer(keeper.accessToken), connection: 'close' } });
    expect(answer.status).toBe(204);
    expect(await statuses(`${gateway.url}/api/projects`, 20, bearer(victim.accessToken))).toEqual(Array(20).fill(401));
    expect(await statuses(`${gateway.url}/api/projects`, 6, bearer(keeper.accessToken))).toEqual(Array(6).fill(200));
  });

  it('#28: after "revoke every session" through the port, provider tokens issued before it are refused by every worker (seen or not); later ones work', async () => {
    const now = (): number => Math.floor(Date.now() / 1000);
    // Signed with the provider's own key and typed as an access token: what it issues for u-bob (resource-server
    // mode, `users: existing`), whose provider account an admin linked (a new account never joins a user by itself).
    const providerToken = (iat: number): Promise<string> => op.sign({ iss: op.issuer, aud: API, sub: 'u-bob', iat, exp: now() + 300 }, { typ: 'at+jwt' });
    const admin = { ...bearer((await login(gateway.url, 'admin')).accessToken), connection: 'close' };
    const linked = await fetch(`${gateway.url}/iam/admin/identities/${encodeURIComponent('oidc:u-bob')}`, {
      method: 'PUT',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'u-bob', identityDomain: op.issuer, enabled: true }),
    });
    expect(linked.status).toBe(201);
    const seen = await providerToken(now());
    const unseen = await providerToken(now() - 1);
    // Both workers have verified (and cached) `seen`; `unseen` was issued but never presented.
    expect(await statuses(`${gateway.url}/api/projects`, 10, bearer(seen))).toEqual(Array(10).fill(200));
    expect((await fetch(`${gateway.url}/iam/admin/users/u-bob/sessions/revoke`, { method: 'POST', headers: admin })).status).toBe(200);
    const user = (await (await fetch(`${gateway.url}/iam/admin/users/u-bob`, { headers: admin })).json()) as { sessionsRevokedAt: string };
    expect(await statuses(`${gateway.url}/api/projects`, 10, bearer(unseen))).toEqual(Array(10).fill(401));
    expect(await statuses(`${gateway.url}/api/projects`, 10, bearer(seen))).toEqual(Array(10).fill(401));
    // `iat` has whole seconds: the provider's next token comes from the first second after the revocation.
    const next = (Math.floor(Date.parse(user.sessionsRevokedAt) / 1000) + 1) * 1000;
    await until('the first whole second after the revocation', () => Date.now() >= next);
    expect(await statuses(`${gateway.url}/api/projects`, 10, bearer(await providerToken(now())))).toEqual(Array(10).fill(200));
  });

  it('/metrics on the management port sums the requests of both workers', async () => {
    const series = 'iam_http_requests_total{route="/health",method="GET",status_class="2xx"}';
    const before = sample(await (await fetch(`${gateway.managementUrl}/metrics`)).text(), series);
    const linesBefore = accessLines(gateway, '/health').length;
    expect(await statuses(`${gateway.url}/health`, 30)).toEqual(Array(30).fill(200));
    const text = await (await fetch(`${gateway.managementUrl}/metrics`)).text();
    expect(sample(text, series) - before).toBe(30);
    // Both workers answered some of these 30 (round-robin over fresh connections).
    const served = await waitFor('access lines of both workers', () => {
      const workers = new Set(accessLines(gateway, '/health').slice(linesBefore).map((line) => line.worker));
      return workers.size === 2 ? workers : undefined;
    });
    expect(served.size).toBe(2);
    // One family per name, one line per series: the workers' metrics (default ones included) merged, not listed twice.
    const types = text.split('\n').filter((line) => line.startsWith('# TYPE '));
    expect(new Set(types).size).toBe(types.length);
    const samples = text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).map((line) => line.slice(0, line.lastIndexOf(' ')));
    expect(new Set(samples).size).toBe(samples.length);
    expect(sample(text, 'iam_workers')).toBe(2);
    expect(sample(text, 'iam_store_events_connected')).toBe(1);
    // A gauge both workers report the same: `first`, not summed.
    const [major, minor, patch] = process.versions.node.split('.');
    expect(sample(text, `iam_nodejs_version_info{version="${process.version}",major="${major}",minor="${minor}",patch="${patch}"}`)).toBe(1);
    expect(sample(text, 'iam_process_cpu_seconds_total')).toBeGreaterThan(0);
  });

  it('a policy edit is picked up by every worker; SIGHUP to the primary reloads every worker', async () => {
    const linesBefore = gateway.logs().length;
    expect(await statuses(`${gateway.url}/added`, 6)).toEqual(Array(6).fill(403)); // no route: default deny
    writeFileSync(join(policies, 'routes.yaml'), `${POLICY}  - { path: /added, methods: [GET], public: true }\n`);
    const reloaded = await waitFor('both workers to reload', () => {
      const workers = new Set(gateway.logs().slice(linesBefore).filter((line) => line.msg === 'policy: reloaded').map((line) => line.worker));
      return workers.size === 2 ? workers : undefined;
    });
    expect([...reloaded]).not.toContain(0);
    expect(await statuses(`${gateway.url}/added`, 10)).toEqual(Array(10).fill(200));

    const beforeHup = gateway.logs().length;
    gateway.child.kill('SIGHUP');
    const asked = await waitFor('both workers to answer SIGHUP', () => {
      const lines = gateway.logs().slice(beforeHup).filter((line) => line.msg === 'policy: reload requested; the directory matches the serving policy' && line.reason === 'SIGHUP');
      return lines.length === 2 ? lines : undefined;
    });
    expect(new Set(asked.map((line) => line.worker))).toEqual(reloaded);
    expect(gateway.child.exitCode).toBeNull();
  });

  it('a worker killed with SIGKILL is replaced, and the port keeps answering', async () => {
    const series = 'iam_http_requests_total{route="/health",method="GET",status_class="2xx"}';
    const before = sample(await (await fetch(`${gateway.managementUrl}/metrics`)).text(), series);
    const [victimId, victimPid] = [...workerPids(gateway)][0]!;
    const linesBefore = gateway.logs().length;
    process.kill(victimPid, 'SIGKILL');
    const exit = await waitFor('the primary to notice', () => gateway.logs().slice(linesBefore).find((line) => line.msg === 'worker exited unexpectedly; a new worker starts after the backoff'));
    // Round 3: a first death is replaced at once, not after a backoff.
    expect(exit).toMatchObject({ worker: 0, workerId: victimId, workerPid: victimPid, signal: 'SIGKILL', restartInMs: 0 });
    // One worker serves meanwhile, and the instance stays ready: the dead slot takes no connections.
    const readyMeanwhile: number[] = [];
    while (!gateway.logs().slice(linesBefore).some((line) => line.msg === 'iam-gateway worker listening')) {
      readyMeanwhile.push((await fetch(`${gateway.managementUrl}/health/ready`)).status);
      expect(await statuses(`${gateway.url}/health`, 4)).toEqual(Array(4).fill(200));
    }
    expect(readyMeanwhile.filter((status) => status !== 200)).toEqual([]);
    const replacement = await waitFor('a new worker', () => gateway.logs().slice(linesBefore).find((line) => line.msg === 'iam-gateway worker listening'));
    expect(replacement.pid).not.toBe(victimPid);
    expect(isAlive(replacement.pid as number)).toBe(true);
    await waitFor('readiness', async () => ((await fetch(`${gateway.managementUrl}/health/ready`)).status === 200 ? true : undefined));
    expect(await statuses(`${gateway.url}/health`, 20)).toEqual(Array(20).fill(200));
    // The killed worker's counts (as of the last scrape) stay in the sums: no counter goes down.
    const text = await (await fetch(`${gateway.managementUrl}/metrics`)).text();
    expect(sample(text, series)).toBeGreaterThanOrEqual(before + 30);
    expect(sample(text, 'iam_worker_restarts_total{reason="crashed"}')).toBe(1);

    // The same slot's worker dies again before it served a minute: a crash loop backs off (1 s), still ready meanwhile.
    const againFrom = gateway.logs().length;
    process.kill(replacement.pid as number, 'SIGKILL');
    const again = await waitFor('the second death', () => gateway.logs().slice(againFrom).find((line) => line.msg === 'worker exited unexpectedly; a new worker starts after the backoff'));
    expect(again).toMatchObject({ workerPid: replacement.pid, restartInMs: 1000 });
    expect((await fetch(`${gateway.managementUrl}/health/ready`)).status).toBe(200);
    await waitFor('its replacement', () => gateway.logs().slice(againFrom).find((line) => line.msg === 'iam-gateway worker listening'));
  }, 60_000);

  it('SIGTERM to one worker alone drains it and a new worker takes its place', async () => {
    const [victimId, victimPid] = [...workerPids(gateway)].at(-1)!;
    const linesBefore = gateway.logs().length;
    process.kill(victimPid, 'SIGTERM');
    const replaced = await waitFor('the replacement', () => gateway.logs().slice(linesBefore).find((line) => line.msg === 'iam-gateway worker listening'));
    expect(replaced.pid).not.toBe(victimPid);
    await waitFor('the old worker to exit', () => (isAlive(victimPid) ? undefined : true));
    expect(gateway.logs().slice(linesBefore).find((line) => line.msg === 'worker stopped')).toMatchObject({ workerId: victimId, code: 0 });
    expect(await statuses(`${gateway.url}/health`, 10)).toEqual(Array(10).fill(200));
    expect(gateway.child.exitCode).toBeNull();
  }, 60_000);

  it('SIGTERM to the primary drains an in-flight slow request on a worker, stops every worker and exits 0', async () => {
    const stopping = await startGatewayProcess(upstream.url, { IAM_POLICIES_DIR: policies, SERVER_WORKERS: '2', SERVER_SHUTDOWN_TIMEOUT: '10s' });
    others.push(stopping);
    await waitFor('both workers\' listening lines', () => (workerPids(stopping).size === 2 ? true : undefined));
    const pids = [...workerPids(stopping).values()];
    expect(pids).toHaveLength(2);
    const slow = fresh(`${stopping.url}/slow/1500`);
    await waitFor('the slow request at the host', async () => ((await upstream.requests()).some((request) => request.url === '/slow/1500') ? true : undefined));
    stopping.child.kill('SIGTERM');
    const answered = await slow;
    expect(answered.status).toBe(200);
    const { code, signal } = await stopping.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
    const stopped = stopping.logs().filter((line) => line.msg === 'iam-gateway stopped').map((line) => line.worker);
    expect(stopped.sort()).toEqual([0, ...workerPids(stopping).keys()].sort());
  }, 60_000);

  // A signal to the group reaches each worker itself, then the primary, which passes its own stop on to every worker.
  it.each([
    ['the primary alone', (stopping: GatewayProcess): void => void stopping.child.kill('SIGTERM')],
    ['the whole process group (Ctrl-C, kill -- -PGID, systemd KillMode=control-group)', (stopping: GatewayProcess): void => void process.kill(-stopping.pid, 'SIGTERM')],
  ])('SIGTERM to %s: every worker drains like a single process: requests in flight and requests sent after the signal on open keep-alive connections are answered with Connection: close, no connection is reset', async (_to, stop) => {
    const stopping = await startGatewayProcess(upstream.url, { IAM_POLICIES_DIR: policies, SERVER_WORKERS: '2', SERVER_SHUTDOWN_TIMEOUT: '10s' }, [], { processGroup: true });
    others.push(stopping);
    await waitFor('both workers\' listening lines', () => (workerPids(stopping).size === 2 ? true : undefined));
    // Fresh connections are handed out round-robin: both workers hold some of them.
    const open = async (): Promise<RawConnection> => {
      const connection = new RawConnection(stopping.port);
      connection.send('/health');
      expect((await connection.response())?.head).toMatch(/^HTTP\/1\.1 200 [^]*connection: keep-alive/i);
      return connection;
    };
    const inFlight = await Promise.all([0, 1, 2, 3].map(open));
    const idle = await Promise.all([0, 1, 2, 3].map(open));
    const id = Date.now();
    inFlight.forEach((connection, i) => connection.send(`/slow/1500?stop=${id}&c=${i}`));
    await waitFor('the slow requests at the host', async () => ((await upstream.requests()).filter((request) => request.url.includes(`stop=${id}`)).length === 4 ? true : undefined));
    const linesBefore = stopping.logs().length;
    stop(stopping);
    // Each worker has taken the stop (or, the defect this guards against, was ended by it: its connections then show it).
    const workers = [...workerPids(stopping)];
    await waitFor('both workers to take the stop', () =>
      workers.every(([worker, pid]) => !isAlive(pid) || stopping.logs().slice(linesBefore).some((line) => line.msg === 'stopping' && line.worker === worker)) ? true : undefined,
    );
    idle.forEach((connection, i) => connection.send(`/health?after=${id}&c=${i}`));
    for (const connection of [...inFlight, ...idle]) {
      const answer = await connection.response();
      expect(answer?.head).toMatch(/^HTTP\/1\.1 200 /);
      expect(answer?.head).toMatch(/^connection: close$/im);
      await connection.closed;
      expect(connection.ending).toBe('closed');
    }
    const { code, signal } = await stopping.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    const stopped = stopping.logs().filter((line) => line.msg === 'iam-gateway stopped').map((line) => line.worker);
    expect(stopped.sort()).toEqual([0, ...workerPids(stopping).keys()].sort());
  }, 60_000);
});

describe('serve --workers refuses what several processes cannot share', () => {
  beforeAll(() => ensureBuilt(), 180_000);

  it('without REDIS_URL: exit 1 naming REDIS_URL', async () => {
    const outcome = await serveUntilExit({ SERVER_WORKERS: '2', DATABASE_URL: 'postgresql://nobody@127.0.0.1:9/none' }, 20_000);
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toMatch(/cannot run 2 worker processes \(server\.workers 2\); run one, or: they need a shared token store.*Set REDIS_URL/);
    expect(outcome.stderr).not.toMatch(/DATABASE_URL/);
  });

  it('without DATABASE_URL (the embedded database): exit 1 naming DATABASE_URL; the flag wins over the configuration', async () => {
    const outcome = await serveUntilExit({ SERVER_WORKERS: '1', REDIS_URL: 'redis://127.0.0.1:9', DATABASE_URL: '' }, 20_000, ['--workers', '3']);
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toMatch(/cannot run 3 worker processes \(--workers 3\); run one, or: they need a database server.*Set DATABASE_URL/);
  });

  it('a bad --workers value is a usage error (exit 2)', async () => {
    const outcome = await serveUntilExit({}, 20_000, ['--workers', 'many']);
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toMatch(/--workers: "many" is not auto or a whole number/);
  });
});
