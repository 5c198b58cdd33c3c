/**
 * The audit writer against the run's real database (PostgreSQL with DATABASE_URL, else PGlite):
 * #11.3 an event the database refuses (NUL, lone surrogate) is isolated — dropped and reported once, without
 * SQL or values — and every other event is stored, then and later; #11.15 stored sizes are capped,
 * anonymous undeclared-route denials are rate-limited into a summary row, and retention purges old events
 * (`iam-gateway audit purge`); #16 the audit metrics (queue depth, written, spooled, dropped by reason) move
 * with what they name.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { AuditRetention } from '../../src/audit/audit-retention';
import { AuditSpool } from '../../src/audit/audit-spool';
import { AuditTrail } from '../../src/audit/audit-trail';
import { createLogger } from '../../src/observability/logger';
import { createMetrics, type GatewayMetrics } from '../../src/observability/metrics';
import { DatabaseUnavailableError } from '../../src/domain/iam-repository';
import type { AuditEventRecord } from '../../src/domain/records';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { runCli } from '../support/cli';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
beforeEach(() => db.reset());
afterAll(() => db?.close());

/** A logger whose JSON lines are kept. */
function capturingLogger(): { logger: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>>; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = createLogger('info', stream);
  return { logger, text: () => text, lines: () => text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>) };
}

async function storedRows(): Promise<Array<{ action: string; target_id: string | null; details: Record<string, unknown> | null }>> {
  return db.orm.em.fork().execute('select action, target_id, details from iam_audit_events order by id');
}

const event = (action: string, details: Record<string, unknown> | null = null, targetId: string | null = null) => ({
  action,
  actorUserId: null,
  outcome: 'failure' as const,
  targetType: 'user',
  targetId,
  details,
});

describe('#11.3 the audit writer isolates an event the database refuses', () => {
  it('#11.3: a NUL or a lone surrogate drops that event alone, reported once without SQL or values; the rest are stored, now and later', async () => {
    const log = capturingLogger();
    const audit = new AuditTrail(db.repository, log.logger, { flushIntervalMs: 60_000 });
    audit.record(event('test.before'));
    audit.record(event('test.nul', { username: 'SECRET-NUL-\u0000-marker' }));
    audit.record(event('test.surrogate', { username: 'SECRET-SURROGATE-\ud800-marker' }));
    audit.record(event('test.nul-target', null, 'SECRET-TARGET-\u0000'));
    audit.record(event('test.after'));
    await audit.flush();
    expect((await storedRows()).map((row) => row.action)).toEqual(['test.before', 'test.after']);

    const refused = log.lines().filter((line) => String(line.msg).includes('refused'));
    expect(refused.map((line) => line.action).sort()).toEqual(['test.nul', 'test.nul-target', 'test.surrogate']);
    expect(log.text()).not.toMatch(/SECRET|insert into|values/i);
    for (const line of log.text().split('\n')) expect(line.length).toBeLessThan(1000);

    // Not stuck: later events are written, and the refused ones are not retried (reported once).
    audit.record(event('test.later'));
    await audit.flush();
    await audit.flush();
    expect((await storedRows()).map((row) => row.action)).toEqual(['test.before', 'test.after', 'test.later']);
    expect(log.lines().filter((line) => String(line.msg).includes('refused'))).toHaveLength(3);
    await audit.close();
  });

  it('#11.3: while the database is unavailable the batch is kept and retried, logged once per outage without SQL', async () => {
    const log = capturingLogger();
    let failures = 3;
    const flaky = {
      insertAudit: async (events: AuditEventRecord[]) => {
        if (failures-- > 0) throw new DatabaseUnavailableError('down', { cause: new Error('insert into "iam_audit_events" values (SECRET)') });
        await db.repository.insertAudit(events);
      },
    };
    const audit = new AuditTrail(flaky, log.logger, { flushIntervalMs: 60_000 });
    audit.record(event('test.kept'));
    await audit.flush();
    await audit.flush();
    await audit.flush();
    expect(await storedRows()).toHaveLength(0);
    await audit.flush();
    expect((await storedRows()).map((row) => row.action)).toEqual(['test.kept']);
    expect(log.lines().filter((line) => line.level === 40)).toHaveLength(1);
    expect(log.text()).not.toMatch(/SECRET|insert into/i);
    await audit.close();
  });
});

describe('#11.15 audit rows are bounded', () => {
  it('#11.15: a long target and long detail strings are cut before they are stored', async () => {
    const audit = new AuditTrail(db.repository, capturingLogger().logger, { flushIntervalMs: 60_000 });
    const path = `/${'a'.repeat(8000)}`;
    audit.record({ ...event('authz.deny', { decision: { steps: [{ reason: `no policy route declares GET ${path}` }] } }, `GET ${path}`), outcome: 'denied' });
    await audit.close();
    const [row] = await storedRows();
    expect(row!.target_id!.length).toBeLessThanOrEqual(512);
    expect(JSON.stringify(row!.details).length).toBeLessThan(1200);
  });

  it('#11.15: anonymous undeclared-route denials beyond the per-minute limit are counted in one summary row', async () => {
    const audit = new AuditTrail(db.repository, capturingLogger().logger, { flushIntervalMs: 60_000, anonymousDenialsPerMinute: 10 });
    for (let i = 0; i < 250; i++) audit.recordUnauthenticated({ ...event('authz.deny', { decision: { failedStep: 'ROUTE_NOT_DECLARED' } }, `GET /scan/${i}`), outcome: 'denied' });
    await audit.close();
    const rows = await storedRows();
    expect(rows.filter((row) => row.action === 'authz.deny')).toHaveLength(10);
    const summaries = rows.filter((row) => row.action === 'authz.deny.suppressed');
    expect(summaries).toHaveLength(1);
    expect(summaries[0]!.details).toMatchObject({ suppressed: 240, failedStep: 'ROUTE_NOT_DECLARED' });
  });
});

describe('#11.15 audit retention', () => {
  async function seed(): Promise<void> {
    const now = Date.now();
    const at = (daysAgo: number): AuditEventRecord => ({ ...event(`test.${daysAgo}d`), occurredAt: new Date(now - daysAgo * 86_400_000), requestId: null, decisionId: null, clientAddress: null });
    await db.repository.insertAudit([at(400), at(100), at(40), at(1)]);
  }

  it('#11.15: purgeAudit deletes the events older than the cut-off and says how many', async () => {
    await seed();
    expect(await db.repository.purgeAudit(new Date(Date.now() - 30 * 86_400_000))).toBe(3);
    expect((await storedRows()).map((row) => row.action)).toEqual(['test.1d']);
  });

  it('#11.15: the gateway\'s retention job (iam.audit.retention) deletes the events past the retention; 0 keeps everything', async () => {
    await seed();
    const log = capturingLogger();
    const keepAll = new AuditRetention(db.repository, log.logger, 0);
    keepAll.start(); // retention 0: no job at all
    await keepAll.close();
    expect(await storedRows()).toHaveLength(4);
    const retention = new AuditRetention(db.repository, log.logger, 90 * 86_400_000);
    expect(await retention.purgeNow()).toBe(2);
    await retention.close();
    expect((await storedRows()).map((row) => row.action)).toEqual(['test.40d', 'test.1d']);
  });

  it('#11.15: `iam-gateway audit purge --older-than 90d` deletes older events; a bad duration is a usage error', async () => {
    await seed();
    const run = runCli;
    const purged = await run(['audit', 'purge', '--older-than', '90d']);
    expect(purged).toMatchObject({ code: 0, err: '' });
    expect(purged.out).toMatch(/deleted 2 events/);
    expect((await storedRows()).map((row) => row.action)).toEqual(['test.40d', 'test.1d']);
    expect((await run(['audit', 'purge', '--older-than', 'soon'])).code).toBe(2);
    // iam.audit.retention defaults to 0 (keep forever): without --older-than there is nothing to do.
    expect((await run(['audit', 'purge'])).code).toBe(2);
    expect((await storedRows())).toHaveLength(2);
  });
});

describe('#16 audit metrics', () => {
  let metrics: GatewayMetrics;
  beforeEach(() => {
    metrics = createMetrics({ collectDefaults: false });
  });
  const dropped = async (reason: string): Promise<number> => (await metrics.auditDropped.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  const written = async (): Promise<number> => (await metrics.auditWritten.get()).values[0]?.value ?? 0;
  const spooled = async (reason = 'stop'): Promise<number> => (await metrics.auditSpooled.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  const depth = async (): Promise<number> => (await metrics.auditQueueDepth.get()).values[0]?.value ?? 0;
  const down = { insertAudit: async () => Promise.reject(new DatabaseUnavailableError('down')) };

  it('#16: iam_audit_events_written_total counts the stored events; a refused event is dropped with reason refused; every reason starts at 0', async () => {
    const audit = new AuditTrail(db.repository, capturingLogger().logger, { flushIntervalMs: 60_000, metrics });
    expect((await metrics.auditDropped.get()).values.map((v) => [v.labels.reason, v.value]).sort()).toEqual([
      ['buffer_full', 0],
      ['lost', 0],
      ['rate_limited', 0],
      ['refused', 0],
      ['spool_full', 0],
      ['unreadable', 0],
    ]);
    audit.record(event('test.one'));
    audit.record(event('test.nul', { username: 'x\u0000y' }));
    audit.record(event('test.two'));
    await audit.flush();
    expect(await written()).toBe(2);
    expect(await dropped('refused')).toBe(1);
    await audit.close();
  });

  it('#16: anonymous denials beyond the per-minute budget count as dropped (rate_limited); the summary row is written', async () => {
    const audit = new AuditTrail(db.repository, capturingLogger().logger, { flushIntervalMs: 60_000, anonymousDenialsPerMinute: 2, metrics });
    for (let i = 0; i < 5; i++) audit.recordUnauthenticated({ ...event('authz.deny', null, `GET /scan/${i}`), outcome: 'denied' });
    expect(await dropped('rate_limited')).toBe(3);
    await audit.close();
    expect(await written()).toBe(3); // 2 denials and the summary
  });

  it('#16: iam_audit_queue_depth is what is buffered or being written, read at scrape', async () => {
    let release: () => void = () => undefined;
    const slow = { insertAudit: (events: AuditEventRecord[]) => new Promise<void>((resolve) => (release = resolve)).then(() => db.repository.insertAudit(events)) };
    const audit = new AuditTrail(slow, capturingLogger().logger, { flushIntervalMs: 60_000, metrics });
    metrics.observeAuditQueue(() => audit.queueDepth);
    expect(await depth()).toBe(0);
    audit.record(event('test.a'));
    audit.record(event('test.b'));
    expect(await depth()).toBe(2);
    const flushing = audit.flush();
    await new Promise((resolve) => setImmediate(resolve));
    audit.record(event('test.c'));
    expect(await depth()).toBe(3); // two in flight, one buffered
    release();
    await flushing;
    expect(await depth()).toBe(1);
    const next = audit.flush();
    await new Promise((resolve) => setImmediate(resolve));
    release();
    await next;
    expect(await depth()).toBe(0);
    expect(await written()).toBe(3);
    await audit.close();
  });

  it('#16: a full buffer drops its oldest events (buffer_full), also when a failed batch is put back', async () => {
    let fail: () => void = () => undefined;
    const failing = { insertAudit: () => new Promise<void>((_resolve, reject) => (fail = () => reject(new DatabaseUnavailableError('down')))) };
    const audit = new AuditTrail(failing, capturingLogger().logger, { flushIntervalMs: 60_000, maxBuffered: 2, metrics });
    metrics.observeAuditQueue(() => audit.queueDepth);
    for (let i = 0; i < 3; i++) audit.record(event(`test.${i}`));
    expect(await dropped('buffer_full')).toBe(1);
    expect(await depth()).toBe(2);
    // The 2 go out and fail; meanwhile 2 more arrive: only 2 of the 4 fit back.
    const flushing = audit.flush();
    await new Promise((resolve) => setImmediate(resolve));
    audit.record(event('test.3'));
    audit.record(event('test.4'));
    fail();
    await flushing;
    expect(await dropped('buffer_full')).toBe(3);
    expect(await depth()).toBe(2);
    expect(await written()).toBe(0);
  });

  it('#16: at stop, unwritten events are spooled (iam_audit_events_spooled_total) or, without a spool, lost; unreadable spooled lines are dropped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'iam-audit-metrics-'));
    try {
      const audit = new AuditTrail(down, capturingLogger().logger, { flushIntervalMs: 60_000, spool: new AuditSpool(dir), closeWriteMs: 100, metrics });
      audit.record(event('test.spooled-1'));
      audit.record(event('test.spooled-2'));
      await audit.close();
      expect(await spooled()).toBe(2);
      expect(readdirSync(dir)).toHaveLength(1);

      const nowhere = new AuditTrail(down, capturingLogger().logger, { flushIntervalMs: 60_000, closeWriteMs: 100, metrics });
      nowhere.record(event('test.lost'));
      await expect(nowhere.close()).rejects.toThrow();
      expect(await dropped('lost')).toBe(1);

      // The next start replays the spool; a line that does not parse is dropped (unreadable).
      writeFileSync(join(dir, 'audit-1-1-abcdef01.jsonl'), '{not json\n');
      const replay = new AuditTrail(db.repository, capturingLogger().logger, { flushIntervalMs: 60_000, spool: new AuditSpool(dir), metrics });
      await replay.start();
      await replay.flush();
      expect(await dropped('unreadable')).toBe(1);
      expect(await written()).toBe(2);
      await replay.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
