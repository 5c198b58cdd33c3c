/**
 * docs/threat-model.md #11.39: an outage is logged as state changes with counts, not one error line with a stack per
 * 503; and `iam_session_cache_entries` reports the real size of the session cache.
 */
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/observability/logger';
import { startGateway, type RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { describeWithRedis, testDatabaseUrl, testRedisUrl } from '../support/env';
import { bearer, login, ROOT, testConfig } from '../support/gateway';
import { until } from '../support/wait';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf, type TcpRelay } from '../support/tcp-relay';
import { timed } from '../support/timed-fetch';

interface LogLine {
  level: number;
  msg: string;
  err?: { stack?: string };
  failures?: number;
  dependency?: string;
}

let upstream: RecordingUpstream;
let relay: TcpRelay;
let gateway: RunningGateway;
let db: TestDatabase;
const lines: LogLine[] = [];
let onLine: (() => void) | null = null;

beforeAll(async () => {
  db = await createTestDatabase();
  const url = testDatabaseUrl();
  const target = targetOf(url);
  relay = await startTcpRelay(target.host, target.port);
  upstream = await startRecordingUpstream();
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString('utf8').split('\n')) if (text.trim()) lines.push(JSON.parse(text) as LogLine);
      onLine?.();
      done();
    },
  });
  const config = testConfig(upstream.url, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), DATABASE_URL: relayedUrl(url, relay) });
  gateway = await startGateway(config, { logger: createLogger('info', sink) });
}, 30_000);

afterAll(async () => {
  await gateway?.close();
  await relay?.close();
  await upstream?.close();
  await db?.close();
});

/** Resolves once a captured line matches (or rejects after `ms`). */
function lineMatching(predicate: (line: LogLine) => boolean, ms: number): Promise<LogLine> {
  return new Promise((resolve, reject) => {
    const check = (): boolean => {
      const found = lines.find(predicate);
      if (!found) return false;
      onLine = null;
      clearTimeout(timer);
      resolve(found);
      return true;
    };
    const timer = setTimeout(() => {
      onLine = null;
      reject(new Error(`no log line within ${ms} ms`));
    }, ms);
    if (!check()) onLine = () => void check();
  });
}

async function cacheEntries(): Promise<number> {
  const text = (await timed(`${gateway.managementUrl}/metrics`)).body;
  const match = /^iam_session_cache_entries (\d+)$/m.exec(text);
  expect(match).not.toBeNull();
  return Number(match![1]);
}

describe('#11.39 outages and the session cache in logs and metrics', () => {
  it('#11.39: iam_session_cache_entries follows the real size of the session cache', async () => {
    expect(await cacheEntries()).toBe(0);
    const alice = await login(gateway.url, 'alice');
    const bob = await login(gateway.url, 'bob');
    for (const session of [alice, bob]) expect((await timed(`${gateway.url}/api/projects`, { headers: bearer(session.accessToken) })).status).toBe(200);
    expect(await cacheEntries()).toBe(2);
    expect((await timed(`${gateway.url}/iam/auth/logout`, { method: 'POST', headers: bearer(bob.accessToken) })).status).toBe(204);
    expect(await cacheEntries()).toBe(1);
  });

  it('#11.39: a database outage logs one "unavailable" line and one "recovered" line with the count, no error stacks', async () => {
    const alice = await login(gateway.url, 'alice');
    const from = lines.length;
    await relay.cut();
    try {
      for (let i = 0; i < 20; i++) {
        const answer = await timed(`${gateway.url}/iam/sessions`, { headers: bearer(alice.accessToken) });
        expect(answer.status).toBe(503);
      }
    } finally {
      await relay.restore();
    }
    const recovered = await lineMatching((line) => line.dependency === 'database' && /recovered/.test(line.msg), 10_000);
    expect(recovered.failures).toBe(20);
    const during = lines.slice(from);
    // Nothing at error level, and no line per /iam answer (the audit writer's retries are its own matter).
    expect(during.filter((line) => line.level >= 50)).toEqual([]);
    expect(during.filter((line) => line.msg.startsWith('iam:'))).toEqual([]);
    expect(during.filter((line) => line.dependency === 'database' && /became unavailable/.test(line.msg))).toHaveLength(1);
    expect((await timed(`${gateway.url}/iam/sessions`, { headers: bearer(alice.accessToken) })).status).toBe(200);
  }, 30_000);
});

const redisUrl = testRedisUrl();

describeWithRedis('#11.39 token store outages', () => {
  let redisRelay: TcpRelay;
  let storeGateway: RunningGateway;
  const storeLines: LogLine[] = [];

  beforeAll(async () => {
    const target = targetOf(redisUrl!);
    redisRelay = await startTcpRelay(target.host, target.port);
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const text of chunk.toString('utf8').split('\n')) if (text.trim()) storeLines.push(JSON.parse(text) as LogLine);
        done();
      },
    });
    const config = testConfig(upstream.url, { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'), REDIS_URL: relayedUrl(redisUrl!, redisRelay) });
    storeGateway = await startGateway(config, { logger: createLogger('info', sink) });
  }, 30_000);

  afterAll(async () => {
    await storeGateway?.close();
    await redisRelay?.close();
  });

  it('#11.39: a token store outage logs one "unavailable" line and one "recovered" line with the count', async () => {
    const alice = await login(storeGateway.url, 'alice');
    const from = storeLines.length;
    await redisRelay.cut();
    try {
      for (let i = 0; i < 10; i++) expect((await timed(`${storeGateway.url}/iam/sessions`, { headers: bearer(alice.accessToken) })).status).toBe(503);
    } finally {
      await redisRelay.restore();
    }
    const recovered = await until('the token store logged as recovered', () => storeLines.find((line) => line.dependency === 'tokenStore' && /recovered/.test(line.msg)), { every: 100 });
    expect(recovered.failures).toBe(10);
    const during = storeLines.slice(from);
    expect(during.filter((line) => line.level >= 50)).toEqual([]);
    expect(during.filter((line) => line.msg.startsWith('iam:'))).toEqual([]);
    expect(during.filter((line) => line.dependency === 'tokenStore' && /became unavailable/.test(line.msg))).toHaveLength(1);
  }, 30_000);

  it('#11.39: forward-auth fails closed during a token store outage (503 with Retry-After, even for a cached session) and its 503s are counted, not logged', async () => {
    const alice = await login(storeGateway.url, 'alice');
    const check = (): Promise<Response> =>
      fetch(`${storeGateway.url}/iam/authorization/forward-auth`, { headers: { ...bearer(alice.accessToken), 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/api/projects' } });
    // Warm: the session is in the local cache.
    expect((await check()).status).toBe(200);
    const from = storeLines.length;
    let unavailable = 0;
    await redisRelay.cut();
    try {
      // The cache stops being trusted once the events channel is noticed down; a 200 before that is the cache's.
      let answer = await until('the cache to stop being trusted', async () => {
        const next = await check();
        return next.status === 200 ? null : next;
      });
      for (let i = 0; i < 10; i++) {
        if (i > 0) answer = await check();
        expect(answer.status).toBe(503);
        expect(answer.headers.get('retry-after')).toBe('5');
        expect(answer.headers.get('x-iam-user-id')).toBeNull();
        expect(((await answer.json()) as { code: string }).code).toBe('IAM_STORE_UNAVAILABLE');
        unavailable++;
      }
    } finally {
      await redisRelay.restore();
    }
    const recovered = await until('the token store logged as recovered', () => storeLines.slice(from).find((line) => line.dependency === 'tokenStore' && /recovered/.test(line.msg)), { every: 100 });
    expect(recovered.failures).toBe(unavailable);
    const during = storeLines.slice(from);
    expect(during.filter((line) => line.level >= 50)).toEqual([]);
    expect(during.filter((line) => line.msg.startsWith('iam:'))).toEqual([]);
    expect(during.filter((line) => line.dependency === 'tokenStore' && /became unavailable/.test(line.msg))).toHaveLength(1);
    const after = Date.now() + 5000;
    let status = 503;
    while (status !== 200 && Date.now() < after) status = (await check()).status;
    expect(status).toBe(200);
  }, 30_000);
});
