/**
 * What the scale tests of issue #17 share (test/scale): gateway processes on one token store, many logins with
 * bounded concurrency, revocation latency across instances, and a watch that keeps asking every instance about
 * revoked and valid tokens while a Redis primary is killed and replaced.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { uniquePrefix } from './env';
import { bearer, ROOT } from './gateway';
import { startGatewayProcess, type GatewayProcess } from './gateway-process';
import { until } from './wait';

export const E2E_POLICIES = join(ROOT, 'test/fixtures/e2e-policies');

export interface Session {
  user: string;
  accessToken: string;
  sessionId: string;
}

export const sha256Hex = (token: string): string => createHash('sha256').update(token).digest('hex');
/**
 * The token-store key of a token (src/domain/token-store.ts). No hash tag: no operation spans a token and
 * another key's slot, so each lands in the slot of its whole name, and the names are those a single Redis has
 * always had (an upgrade to a Cluster keeps nothing, but one server keeps its sessions across the upgrade).
 */
export const tokenKey = (prefix: string, token: string): string => `${prefix}:token:${sha256Hex(token)}`;
/** The user's session index. */
export const userIndexKey = (prefix: string, userId: string): string => `${prefix}:user:${userId}:sessions`;

/** `n` gateway processes sharing the token store at `redisUrl` under one fresh prefix (started one after the other). */
export async function startGatewayFleet(count: number, upstreamUrl: string, redisUrl: string, env: Record<string, string> = {}): Promise<{ prefix: string; gateways: GatewayProcess[] }> {
  const prefix = uniquePrefix('scale');
  const gateways: GatewayProcess[] = [];
  try {
    for (let index = 0; index < count; index++) {
      gateways.push(
        await startGatewayProcess(upstreamUrl, {
          IAM_POLICIES_DIR: E2E_POLICIES,
          IAM_TOKEN_STORE_PREFIX: prefix,
          REDIS_URL: redisUrl,
          // nginx (on loopback) sets X-Forwarded-For.
          IAM_FORWARD_TRUSTED_PROXIES: '127.0.0.1',
          // The tests hold hundreds of sessions per user.
          IAM_TOKEN_MAX_SESSIONS_PER_USER: '5000',
          ...env,
        }),
      );
    }
  } catch (error) {
    await Promise.all(gateways.map((gateway) => gateway.kill()));
    throw error;
  }
  return { prefix, gateways };
}

/** A problem+json 503 (the fail-closed answer), as a one-line description, or null when it is one. */
export async function describeUnlessFailClosed(response: Response): Promise<string | null> {
  const body = await response.text();
  const type = response.headers.get('content-type') ?? '';
  if (response.status === 503 && type.startsWith('application/problem+json')) return null;
  return `${response.status} ${type} ${body.slice(0, 200)}`;
}

/** Logs in `count` sessions (users in turn) through `url`, `concurrency` at a time; throws on any failure. */
export async function loginMany(url: string, count: number, users: string[], concurrency: number): Promise<Session[]> {
  const sessions: Session[] = new Array<Session>(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const index = next++;
      const user = users[index % users.length]!;
      const response = await fetch(`${url}/iam/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: user, password: `${user}-password`, clientType: 'API' }),
      });
      if (response.status !== 200) throw new Error(`login ${index} of ${user}: ${response.status} ${await response.text()}`);
      const body = (await response.json()) as { accessToken: string; sessionId: string };
      sessions[index] = { user, accessToken: body.accessToken, sessionId: body.sessionId };
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return sessions;
}

export const projects = async (base: string, token: string): Promise<Response> => fetch(`${base}/api/projects`, { headers: bearer(token) });

export async function statusOf(base: string, token: string): Promise<number> {
  const response = await projects(base, token);
  await response.arrayBuffer();
  return response.status;
}

/** Runs `task` over `items`, `concurrency` at a time. */
export async function eachLimited<T>(items: T[], concurrency: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const index = next++;
        await task(items[index]!, index);
      }
    }),
  );
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * Logs the session out through `revokeVia`, then asks every instance in `instances` about the token without pause
 * until each refuses it (401). Returns the time from the logout's answer until the last instance refused, in ms.
 * Any answer other than 200 (before) or 401 fails.
 */
export async function revocationLatency(revokeVia: string, instances: string[], session: Session, boundMs = 5000): Promise<number> {
  const logout = await fetch(`${revokeVia}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) });
  await logout.arrayBuffer();
  if (logout.status !== 204) throw new Error(`logout of ${session.sessionId}: ${logout.status}`);
  const answered = performance.now();
  const refusedAfter = await Promise.all(
    instances.map(async (instance) => {
      for (;;) {
        const status = await statusOf(instance, session.accessToken);
        const at = performance.now();
        if (status === 401) return at - answered;
        if (status !== 200) throw new Error(`${instance} answered ${status} for a token being revoked`);
        if (at - answered > boundMs) throw new Error(`${instance} still accepts ${session.sessionId} ${boundMs} ms after its logout was answered`);
      }
    }),
  );
  return Math.max(...refusedAfter);
}

/** One answer seen by the watch. */
export interface Observation {
  at: number;
  instance: string;
  kind: 'revoked' | 'valid' | 'login' | 'revoke';
  status: number;
  /** Set when the answer broke the rules (a revoked token accepted, an error that is not a fail-closed 503). */
  violation?: string;
}

export interface Watch {
  observations: Observation[];
  /** Tokens the watch must never see accepted again (add while it runs). */
  revoked: Set<string>;
  stop(): Promise<void>;
}

/**
 * Keeps asking every instance, round robin, about every revoked token (must be 401, or a fail-closed 503) and
 * every valid one (200, or a fail-closed 503), with a login now and then (200 or 503) and, when `revokable` has
 * sessions, a logout now and then: a logout answered 204 adds its token to the revoked ones; one answered 503
 * leaves it unknown (no longer checked). Anything else is recorded as a violation.
 */
export function startWatch(instances: string[], options: { revoked: Session[]; valid: Session[]; revokable?: Session[]; loginUser: string; loops?: number }): Watch {
  const observations: Observation[] = [];
  const revoked = new Set(options.revoked.map((session) => session.accessToken));
  const valid = new Set(options.valid.map((session) => session.accessToken));
  const revokable = [...(options.revokable ?? [])];
  let running = true;
  let turn = 0;
  const record = (instance: string, kind: Observation['kind'], status: number, violation?: string): void => {
    observations.push({ at: Date.now(), instance, kind, status, ...(violation ? { violation } : {}) });
  };
  const safely = async (instance: string, kind: Observation['kind'], call: () => Promise<void>): Promise<void> => {
    try {
      await call();
    } catch (error) {
      record(instance, kind, 0, `no answer: ${(error as Error).message}`);
    }
  };
  const checkToken = async (instance: string, token: string): Promise<void> => {
    const isRevoked = revoked.has(token);
    const kind = isRevoked ? 'revoked' : 'valid';
    await safely(instance, kind, async () => {
      const response = await projects(instance, token);
      if (response.status === 200) {
        await response.arrayBuffer();
        record(instance, kind, 200, isRevoked ? 'a revoked token was accepted' : undefined);
      } else if (response.status === 401 && isRevoked) {
        await response.arrayBuffer();
        record(instance, kind, 401);
      } else {
        const problem = await describeUnlessFailClosed(response);
        record(instance, kind, response.status, problem ? `${isRevoked ? 'revoked' : 'valid'} token: ${problem}` : undefined);
      }
    });
  };
  const loop = async (): Promise<void> => {
    while (running) {
      const instance = instances[turn++ % instances.length]!;
      for (const token of [...revoked, ...valid]) {
        if (!running) break;
        await checkToken(instance, token);
        // Paced: a few hundred answers a second per loop is plenty, and the machine is shared.
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      if (turn % 3 === 0) {
        await safely(instance, 'login', async () => {
          const response = await fetch(`${instance}/iam/auth/login`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ username: options.loginUser, password: `${options.loginUser}-password`, clientType: 'API' }),
          });
          if (response.status === 200) {
            const { accessToken } = (await response.json()) as { accessToken: string };
            record(instance, 'login', 200);
            // Logged out at once: the watch also learns whether that logout holds.
            const out = await fetch(`${instance}/iam/auth/logout`, { method: 'POST', headers: bearer(accessToken) });
            await out.arrayBuffer();
            if (out.status === 204) revoked.add(accessToken);
            else if (out.status !== 503) record(instance, 'revoke', out.status, `logout of a fresh session: ${out.status}`);
          } else {
            const problem = await describeUnlessFailClosed(response);
            record(instance, 'login', response.status, problem ? `login: ${problem}` : undefined);
          }
        });
      }
      const target = turn % 2 === 0 ? revokable.shift() : undefined;
      if (target) {
        valid.delete(target.accessToken);
        await safely(instance, 'revoke', async () => {
          const response = await fetch(`${instance}/iam/auth/logout`, { method: 'POST', headers: bearer(target.accessToken) });
          if (response.status === 204) {
            await response.arrayBuffer();
            revoked.add(target.accessToken);
            record(instance, 'revoke', 204);
          } else {
            const problem = await describeUnlessFailClosed(response);
            record(instance, 'revoke', response.status, problem ? `logout: ${problem}` : undefined);
          }
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  };
  const loops = Array.from({ length: options.loops ?? 2 }, loop);
  return {
    observations,
    revoked,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** First and last fail-closed 503 seen, relative to `since` (ms), or null when there was none. */
export function failClosedWindow(observations: Observation[], since: number): { first: number; last: number; count: number } | null {
  const closed = observations.filter((observation) => observation.status === 503 && !observation.violation);
  if (closed.length === 0) return null;
  return { first: closed[0]!.at - since, last: closed[closed.length - 1]!.at - since, count: closed.length };
}

/** The violations, one line each with the time relative to `since`, for a failure message. */
export function describeViolations(observations: Observation[], since: number, limit = 30): string {
  const violations = observations.filter((observation) => observation.violation);
  return violations
    .slice(0, limit)
    .map((observation) => `+${observation.at - since} ms ${observation.instance} ${observation.kind}: ${observation.violation}`)
    .join('\n') + (violations.length > limit ? `\n… ${violations.length - limit} more` : '');
}

export interface FailoverScenario {
  /** `cluster` or `sentinel`, for the printed line. */
  label: string;
  /** Every gateway instance, asked directly. */
  instances: string[];
  /** Where clients go (nginx, or one of the instances). */
  entry: string;
  /** Live sessions whose token key is on the primary that will be killed (at least 80), and elsewhere (at least 50, or none). */
  onVictim: Session[];
  elsewhere: Session[];
  loginUsers: string[];
  kill(): Promise<void>;
  waitForFailover(): Promise<{ description: string; afterKillMs: number }>;
  /** How long after the engine's failover completed the gateways may still answer 503. */
  recoveryGraceMs: number;
  diagnostics(): string;
}

/**
 * A primary killed mid-run, while a watch asks every instance about revoked and valid tokens:
 *  - tokens revoked right before the kill (the last with no pause), all cached on every instance, are never accepted,
 *    during the failover or after it (watched until well past the token cache's 2 s revalidation);
 *  - every answer is either the right one or a fail-closed 503 problem+json, and 503s end within `recoveryGraceMs` of
 *    the engine's failover;
 *  - afterwards, without a restart: valid tokens work on every instance, new logins work, and a revocation reaches
 *    every instance.
 */
export async function runFailover(scenario: FailoverScenario): Promise<void> {
  const { instances, entry, onVictim, elsewhere } = scenario;
  const part = (list: Session[], from: number, to: number): Session[] => list.slice(from, to);
  const revokedBefore = [...part(onVictim, 0, 20), ...part(elsewhere, 0, 5)];
  const valid = [...part(onVictim, 20, 40), ...part(elsewhere, 5, 25)];
  const revokable = [...part(onVictim, 40, 70), ...part(elsewhere, 25, 40)];
  const afterwards = [...part(onVictim, 70, 80), ...part(elsewhere, 40, 50)];
  if (onVictim.length < 80 || (elsewhere.length > 0 && elsewhere.length < 50)) throw new Error(`too few sessions: ${onVictim.length} on the killed primary, ${elsewhere.length} elsewhere`);

  // Every token checked is cached on every instance first.
  for (const session of [...revokedBefore, ...valid]) {
    for (const instance of instances) expect(await statusOf(instance, session.accessToken)).toBe(200);
  }
  const watch = startWatch([...new Set([...instances, entry])], { revoked: [], valid, revokable, loginUser: scenario.loginUsers[0]! });
  let killedAt = Date.now();
  let failover: { description: string; afterKillMs: number } | null = null;
  try {
    // Revoked right before the kill, the last with no pause at all: a revocation that only reached the primary
    // would be lost with it.
    for (const session of revokedBefore) {
      const response = await fetch(`${entry}/iam/auth/logout`, { method: 'POST', headers: bearer(session.accessToken) });
      await response.arrayBuffer();
      expect(response.status).toBe(204);
      watch.revoked.add(session.accessToken);
    }
    killedAt = Date.now();
    await scenario.kill();
    failover = await scenario.waitForFailover();
    // Watched through the recovery and past the cache's revalidate interval (2 s): a revocation lost in the failover
    // would show as a revoked token accepted again.
    const deadline = Date.now() + 30_000;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      const window = failClosedWindow(watch.observations, killedAt);
      const quietSince = killedAt + (window ? window.last : 0);
      if (Date.now() - killedAt > failover.afterKillMs + 8000 && Date.now() - quietSince > 4000) break;
      if (Date.now() > deadline) break;
    }
  } finally {
    await watch.stop();
  }
  const window = failClosedWindow(watch.observations, killedAt);
  const revokedDuring = watch.observations.filter((observation) => observation.kind === 'revoke' && observation.status === 204).length;
  process.stdout.write(
    `[scale] ${scenario.label} failover: ${failover.description} ${failover.afterKillMs} ms after the SIGKILL; ` +
      `the gateways answered 503 ${window ? `from +${window.first} ms to +${window.last} ms (${window.count} answers)` : 'never'}; ` +
      `${watch.observations.length} answers watched, ${watch.revoked.size} revoked tokens checked (${revokedDuring} logouts answered 204 during the run)\n`,
  );
  const violations = describeViolations(watch.observations, killedAt);
  if (violations) throw new Error(`${scenario.label}: wrong answers during/after the failover (times from the SIGKILL):\n${violations}\n${scenario.diagnostics()}`);
  if (window && window.last >= failover.afterKillMs + scenario.recoveryGraceMs) {
    throw new Error(`${scenario.label}: 503s went on until +${window.last} ms, ${window.last - failover.afterKillMs} ms after the failover completed\n${scenario.diagnostics()}`);
  }

  // Service resumed without a restart.
  for (const session of afterwards) {
    for (const instance of instances) expect(await statusOf(instance, session.accessToken)).toBe(200);
  }
  const fresh = await loginMany(entry, 6, scenario.loginUsers, 3);
  for (const session of [...afterwards, ...fresh]) {
    for (const instance of instances) expect(await statusOf(instance, session.accessToken)).toBe(200);
    expect(await revocationLatency(entry, instances, session)).toBeLessThan(2000);
  }
  for (const token of watch.revoked) {
    for (const instance of instances) expect(await statusOf(instance, token)).toBe(401);
  }
}

export interface LostRevocationScenario {
  label: string;
  instances: string[];
  entry: string;
  /** A live session whose token key is on the primary that will be killed. */
  victim: Session;
  /** Live sessions (any primary) that must work again after the failover. */
  keepers: Session[];
  /** SIGSTOPs the killed primary's replica, and SIGCONTs it. */
  pauseReplica(): void;
  resumeReplica(): void;
  /**
   * Writes enough to the primary (tens of MB) that what follows cannot fit in the socket buffers between it and the
   * paused replica: the revocation's delete then stays in the primary's own output buffer and dies with it.
   */
  clogReplication(): Promise<void>;
  /** Whether the (resumed) replica has the victim's token key: before its promotion, and again after the failover. */
  replicaHasToken(): Promise<boolean>;
  kill(): Promise<void>;
  waitForFailover(): Promise<{ description: string; afterKillMs: number }>;
  diagnostics(): string;
}

/**
 * How many bytes `clogReplication` writes so that a paused replica's connection cannot take them all: the kernel's
 * largest TCP receive buffer (the paused replica's side grows up to it) plus its largest send buffer (the primary's
 * side), plus 32 MiB left in the primary's own output buffer; at least 48 MiB. Capped at 192 MiB, under Redis's
 * 256 MiB hard output limit for a replica (which would drop it instead). A VM whose `tcp_rmem` allows 32 MiB took a
 * fixed 48 MiB in its socket buffers and let the revocation through.
 */
export function replicationClogBytes(): number {
  const largest = (file: string): number => {
    try {
      return Number(readFileSync(file, 'utf8').trim().split(/\s+/).pop()) || 0;
    } catch {
      return 0;
    }
  };
  const mib = 1024 * 1024;
  const buffers = largest('/proc/sys/net/ipv4/tcp_rmem') + largest('/proc/sys/net/ipv4/tcp_wmem');
  return Math.min(192 * mib, Math.max(48 * mib, buffers + 32 * mib));
}

/**
 * A revocation that no replica received before its primary died: the replica is paused, the replication stream
 * clogged, the session logged out (its WAIT for a replica times out; the logout still answers 204), the primary
 * SIGKILLed, the replica resumed and promoted. Redis has the token again; the gateways must still refuse it, on every
 * instance, during the failover and after it (watched past the token cache's 2 s revalidation). Valid sessions
 * work again afterwards.
 */
export async function runLostRevocation(scenario: LostRevocationScenario): Promise<void> {
  const { instances, entry, victim } = scenario;
  for (const instance of instances) expect(await statusOf(instance, victim.accessToken)).toBe(200);
  for (const session of scenario.keepers) expect(await statusOf(entry, session.accessToken)).toBe(200);
  const watch = startWatch([...new Set([...instances, entry])], { revoked: [], valid: scenario.keepers, loginUser: 'bob' });
  let killedAt = Date.now();
  let failover: { description: string; afterKillMs: number } | null = null;
  let logoutMs = 0;
  let resumed = false;
  let lost = false;
  let replayed = false;
  try {
    // The replica must hold the token before it is paused, or there is no revocation for it to miss: right after a
    // (diskless) resync the primary streams nothing to it until its first REPLCONF ACK (seen in CI: never had the token).
    const until = Date.now() + 10_000;
    while (!(await scenario.replicaHasToken())) {
      if (Date.now() > until) throw new Error(`${scenario.label}: the replica never received the victim's token\n${scenario.diagnostics()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    scenario.pauseReplica();
    await scenario.clogReplication();
    const started = Date.now();
    const logout = await fetch(`${entry}/iam/auth/logout`, { method: 'POST', headers: bearer(victim.accessToken) });
    await logout.arrayBuffer();
    logoutMs = Date.now() - started;
    expect(logout.status).toBe(204);
    watch.revoked.add(victim.accessToken);
    for (const instance of instances) expect(await statusOf(instance, victim.accessToken)).toBe(401);
    killedAt = Date.now();
    await scenario.kill();
    scenario.resumeReplica();
    resumed = true;
    // The harness did what it says: the promoted replica will hold the revoked token (checked before the promotion).
    lost = await scenario.replicaHasToken();
    failover = await scenario.waitForFailover();
    const watchedUntil = Date.now() + 8000;
    while (Date.now() < watchedUntil) await new Promise((resolve) => setTimeout(resolve, 250));
    // The instance that revoked it noticed the failover and deleted it again (RedisTokenStore.replayRevocations).
    replayed = !(await scenario.replicaHasToken());
  } finally {
    if (!resumed) scenario.resumeReplica();
    await watch.stop();
  }
  const window = failClosedWindow(watch.observations, killedAt);
  const victimAnswers = watch.observations.filter((observation) => observation.kind === 'revoked');
  process.stdout.write(
    `[scale] ${scenario.label}, a revocation no replica received: logout answered 204 after ${logoutMs} ms; ${failover.description} ${failover.afterKillMs} ms after the SIGKILL; ` +
      `the promoted replica ${lost ? 'still had' : 'did not have'} the token${replayed ? ', deleted again after the failover' : ', STILL THERE 8 s after the failover'}; the revoked token was asked ${victimAnswers.length} times ` +
      `(${victimAnswers.filter((observation) => observation.status === 401).length}× 401, ${victimAnswers.filter((observation) => observation.status === 503).length}× 503, ` +
      `${victimAnswers.filter((observation) => observation.status === 200).length}× 200); 503s ${window ? `from +${window.first} to +${window.last} ms` : 'none'}\n`,
  );
  // The harness's own precondition: when the replica got the revocation after all, its log says how (seen in CI).
  if (!lost) throw new Error(`${scenario.label}: the promoted replica did not hold the revoked token, so nothing was lost and the scenario tested nothing\n${scenario.diagnostics()}`);
  expect(replayed).toBe(true);
  const violations = describeViolations(watch.observations, killedAt);
  if (violations) throw new Error(`${scenario.label}: wrong answers after a revocation no replica received (times from the SIGKILL):\n${violations}\n${scenario.diagnostics()}`);
  // Each instance refuses the revoked token once it answers again: a 503 means it is still reconnecting (fail closed,
  // how long depends on the machine's load, not on a rule), so it is waited out, never taken for the answer.
  for (const instance of instances) {
    const answer = await until(`${instance} to answer after the failover (503: still reconnecting)`, async () => {
      const status = await statusOf(instance, victim.accessToken);
      return status === 503 ? null : status;
    }, { within: 60_000, every: 250 });
    expect(answer).toBe(401);
  }
  for (const session of scenario.keepers) {
    for (const instance of instances) expect(await statusOf(instance, session.accessToken)).toBe(200);
  }
}
