/**
 * The audit trail under a database outage (docs/threat-model.md, round 3), against the run's real database
 * (PostgreSQL with DATABASE_URL, else PGlite):
 * - a full memory buffer moves its oldest events to the disk spool instead of dropping them, so evidence recorded
 *   before a flood survives the flood; the spool is written when the database returns (no restart), and only
 *   beyond `iam.audit.spool-max-bytes` are events dropped, counted (spool_full);
 * - a backlog is written in bounded chunks; a chunk that times out is retried smaller, not taken as an outage, and
 *   event ids make a chunk that had committed before its timeout harmless (stored once);
 * - with a real `database.query-timeout` of 1 s, a 20,000-event backlog is stored once each and logins answer 200
 *   while it is written.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { AuditSpool } from '../../src/audit/audit-spool';
import { AuditTrail, type AuditInput } from '../../src/audit/audit-trail';
import { DatabaseUnavailableError, type AuditRepository, type IamRepository } from '../../src/domain/iam-repository';
import type { AuditEventRecord } from '../../src/domain/records';
import { createLogger } from '../../src/observability/logger';
import { createMetrics, type GatewayMetrics } from '../../src/observability/metrics';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testDatabaseUrl } from '../support/env';
import { ROOT, startTestGateway } from '../support/gateway';
import { startRecordingUpstream } from '../support/recording-upstream';
import { relayedUrl, startTcpRelay, targetOf } from '../support/tcp-relay';
import { until } from '../support/wait';

let db: TestDatabase;
let dirs: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
beforeEach(() => db.reset());
afterEach(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs = [];
});
afterAll(() => db?.close());

function spoolDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'iam-audit-outage-'));
  dirs.push(dir);
  return dir;
}

/** A logger whose JSON lines are kept. */
function capturingLogger(): { logger: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { logger: createLogger('info', stream), lines: () => text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>) };
}

/** The real repository behind a switch: while `down`, every write fails as an outage does. */
function switchable(repository: IamRepository): Pick<AuditRepository, 'insertAudit'> & { down: boolean; sizes: number[] } {
  const wrapper = {
    down: false,
    sizes: [] as number[],
    insertAudit: async (events: AuditEventRecord[]) => {
      wrapper.sizes.push(events.length);
      if (wrapper.down) throw new DatabaseUnavailableError('The database cannot be reached.');
      await repository.insertAudit(events);
    },
  };
  return wrapper;
}

const event = (action: string, i = 0): AuditInput => ({ action, actorUserId: null, outcome: 'denied', targetType: 'route', targetId: `GET /flood/${i}`, details: null });

async function count(sql: string): Promise<number> {
  const rows = await db.orm.em.fork().execute<Array<{ n: number }>>(sql);
  return Number(rows[0]!.n);
}

const counter = async (metrics: GatewayMetrics, name: 'auditDropped' | 'auditSpooled', reason: string): Promise<number> =>
  (await metrics[name].get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

describe('a full buffer spools instead of dropping', () => {
  it('3 evidence events, then a flood of 51,000 with the database down: after it returns all are stored, the evidence included, without a restart', async () => {
    const repository = switchable(db.repository);
    const metrics = createMetrics({ collectDefaults: false });
    const dir = spoolDir();
    const spool = new AuditSpool(dir, 1024 ** 3);
    const audit = new AuditTrail(repository, capturingLogger().logger, { flushIntervalMs: 60_000, maxBuffered: 100, spool, metrics });
    metrics.observeAuditSpool(() => spool.bytes, spool.maxBytes);
    const spoolBytes = async (): Promise<number> => (await metrics.auditSpoolBytes.get()).values[0]?.value ?? 0;
    await audit.start();
    repository.down = true;
    for (let i = 0; i < 3; i++) audit.record({ ...event('test.evidence', i), actorUserId: 'u-victim' });
    await audit.flush();
    for (let i = 0; i < 51_000; i++) {
      audit.record(event('test.flood', i));
      // A flood arrives over turns: record() leaves the spool's writes to them, and the disk keeps up.
      if (i % 50 === 49) await audit.spilled();
    }
    await audit.flush(); // still down: kept
    expect(await count('select count(*) as n from iam_audit_events')).toBe(0);
    expect(audit.queueDepth).toBeLessThanOrEqual(100);
    const spooledBytes = await spoolBytes();

    repository.down = false;
    await audit.flush();
    expect(await count("select count(*) as n from iam_audit_events where action = 'test.evidence' and actor_user_id = 'u-victim'")).toBe(3);
    expect(await count("select count(*) as n from iam_audit_events where action = 'test.flood'")).toBe(51_000);
    expect(await count('select count(distinct event_id) as n from iam_audit_events')).toBe(51_003);
    expect(await counter(metrics, 'auditSpooled', 'buffer_full')).toBeGreaterThan(50_000);
    expect(await counter(metrics, 'auditDropped', 'buffer_full')).toBe(0);
    expect(await counter(metrics, 'auditDropped', 'spool_full')).toBe(0);
    // Written, so no longer on disk (iam_audit_spool_bytes followed).
    expect(spooledBytes).toBeGreaterThan(51_000 * 100);
    expect(await spoolBytes()).toBe(0);
    expect(readdirSync(dir)).toEqual([]);
    await audit.close();
  }, 120_000);

  it('beyond iam.audit.spool-max-bytes the buffer drops (spool_full, counted): the evidence spooled first survives, nothing goes uncounted', async () => {
    const repository = switchable(db.repository);
    const metrics = createMetrics({ collectDefaults: false });
    const spool = new AuditSpool(spoolDir(), 20_000);
    const audit = new AuditTrail(repository, capturingLogger().logger, { flushIntervalMs: 60_000, maxBuffered: 100, spool, metrics });
    await audit.start();
    repository.down = true;
    for (let i = 0; i < 3; i++) audit.record({ ...event('test.evidence', i), actorUserId: 'u-victim' });
    for (let i = 0; i < 5_000; i++) audit.record(event('test.flood', i));
    const held = spool.bytes;

    repository.down = false;
    await audit.flush();
    expect(await count("select count(*) as n from iam_audit_events where action = 'test.evidence'")).toBe(3);
    expect(held).toBeLessThanOrEqual(20_000);
    const dropped = await counter(metrics, 'auditDropped', 'spool_full');
    expect(dropped).toBeGreaterThan(0);
    expect(await count('select count(*) as n from iam_audit_events')).toBe(5_003 - dropped);
    expect(spool.bytes).toBe(0);
    await audit.close();
  });
});

describe('a backlog is written in bounded chunks, idempotently', () => {
  it('no INSERT carries more than 500 events, however large the backlog', async () => {
    const repository = switchable(db.repository);
    const audit = new AuditTrail(repository, capturingLogger().logger, { flushIntervalMs: 60_000, spool: new AuditSpool(spoolDir()) });
    repository.down = true;
    for (let i = 0; i < 2_000; i++) audit.record(event('test.backlog', i));
    await audit.flush();
    repository.down = false;
    repository.sizes = [];
    await audit.flush();
    expect(await count("select count(*) as n from iam_audit_events where action = 'test.backlog'")).toBe(2_000);
    expect(Math.max(...repository.sizes)).toBeLessThanOrEqual(500);
    await audit.close();
  });

  it('a chunk that committed but whose reply timed out is retried smaller, stored once, and not reported as an outage', async () => {
    const log = capturingLogger();
    let lostReplies = 2;
    const repository = {
      insertAudit: async (events: AuditEventRecord[]) => {
        await db.repository.insertAudit(events);
        // The statement committed; the reply did not come back within database.query-timeout.
        if (events.length > 100 && lostReplies-- > 0) throw new DatabaseUnavailableError('The database cannot be reached.', { cause: new Error('Query read timeout'), timedOut: true });
      },
    };
    const audit = new AuditTrail(repository, log.logger, { flushIntervalMs: 60_000 });
    for (let i = 0; i < 1_200; i++) audit.record(event('test.timeout', i));
    await audit.flush();
    await audit.flush();
    expect(await count("select count(*) as n from iam_audit_events where action = 'test.timeout'")).toBe(1_200);
    expect(await count("select count(distinct target_id) as n from iam_audit_events where action = 'test.timeout'")).toBe(1_200);
    expect(audit.queueDepth).toBe(0);
    expect(log.lines().filter((line) => String(line.msg).includes('database unavailable'))).toEqual([]);
    await audit.close();
  });

  it('the same event id is stored once, whether written twice in one call or in two; rows without one get their own', async () => {
    const stored: AuditEventRecord = { ...event('test.once'), eventId: '6f1c2a52-4d0e-4a8e-9a43-0c7d2b1f5e01', occurredAt: new Date(), decisionId: null, clientAddress: null, requestId: null, targetType: 'route', targetId: 'x', details: null };
    await db.repository.insertAudit([stored]);
    await db.repository.insertAudit([stored, { ...stored, eventId: undefined, action: 'test.no-id' }]);
    expect(await count("select count(*) as n from iam_audit_events where action = 'test.once'")).toBe(1);
    expect(await count("select count(*) as n from iam_audit_events where action = 'test.no-id' and event_id is not null")).toBe(1);
  });
});

describe('a large backlog against a real database.query-timeout', () => {
  it('20,000 events buffered during an outage are stored once each after it, and logins answer 200 while they are written', async () => {
    const url = testDatabaseUrl();
    const target = targetOf(url);
    const relay = await startTcpRelay(target.host, target.port);
    const upstream = await startRecordingUpstream();
    const gateway = await startTestGateway(upstream.url, {
      IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
      DATABASE_URL: relayedUrl(url, relay),
      DATABASE_QUERY_TIMEOUT: '1s',
      IAM_AUDIT_FLUSH_INTERVAL: '200ms',
    });
    const loginAnswer = async (): Promise<number> =>
      (
        await fetch(`${gateway.url}/iam/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' }),
        })
      ).status;
    const stored = (): Promise<number> => count("select count(*) as n from iam_audit_events where action = 'test.backlog'");
    try {
      const audit = gateway.services!.audit;
      await relay.cut();
      // Events the size of a denial with its decision (about 2 KB each): 40 MB as one statement.
      const padding = 'x'.repeat(1900);
      for (let i = 0; i < 20_000; i++) audit.record({ ...event('test.backlog', i), details: { i, padding } });
      await audit.flush(); // the database is away: kept
      await relay.restore();
      // While the backlog is being written, a login is served.
      await until('the backlog write to start', async () => (await stored()) > 0, { within: 60_000 });
      expect(await loginAnswer()).toBe(200);
      await until('the whole backlog stored', async () => (await stored()) >= 20_000, { within: 90_000, every: 250 });
      expect(await loginAnswer()).toBe(200);
      await audit.flush();
      expect(await stored()).toBe(20_000);
      expect(await count("select count(distinct event_id) as n from iam_audit_events where action = 'test.backlog'")).toBe(20_000);
      expect(await count("select count(distinct target_id) as n from iam_audit_events where action = 'test.backlog'")).toBe(20_000);
    } finally {
      await gateway.close().catch(() => undefined);
      await relay.close();
      await upstream.close();
    }
  }, 180_000);
});
