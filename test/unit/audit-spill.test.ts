/**
 * The request path never waits for a disk spill (docs/threat-model.md), without a database: while the database is
 * away or slow, `record()` moves the oldest part of a full buffer out of memory's way but does no disk I/O in its
 * own turn — no synchronous fs call, no file yet when it returns; the spool files appear on later turns, in order.
 * Whatever was recorded ends up in the database or in the spool (a stop included). The buffer's bound weighs an
 * event by its decisions, so a check call's row holding 100 of them counts 100.
 */
import fs from 'node:fs';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditSpool } from '../../src/audit/audit-spool';
import { AuditTrail, type AuditInput } from '../../src/audit/audit-trail';
import { DatabaseUnavailableError, type AuditRepository } from '../../src/domain/iam-repository';
import type { AuditEventRecord } from '../../src/domain/records';
import { createLogger } from '../../src/observability/logger';
import { createMetrics } from '../../src/observability/metrics';
import { until } from '../support/wait';

const quiet = createLogger('silent');
const SYNC_IO = ['openSync', 'writeSync', 'writeFileSync', 'fsyncSync', 'fdatasyncSync', 'renameSync', 'mkdirSync', 'closeSync'] as const;

let dir: string;
let spies: jest.SpyInstance[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'iam-audit-spill-'));
});
afterEach(() => {
  for (const spy of spies) spy.mockRestore();
  spies = [];
  rmSync(dir, { recursive: true, force: true });
});

/** Counts every synchronous fs call that writes, from now on. */
function watchSyncIo(): () => number {
  spies = SYNC_IO.map((name) => jest.spyOn(fs, name));
  return () => spies.reduce((calls, spy) => calls + spy.mock.calls.length, 0);
}

/**
 * A database that is away (`down`: every write fails as an outage does) or slow (`hold`: every write waits until
 * released); what it stores is kept in order.
 */
function database() {
  let release: () => void = () => undefined;
  const db = {
    down: false,
    held: null as Promise<void> | null,
    stored: [] as AuditEventRecord[],
    hold() {
      db.held = new Promise<void>((resolve) => (release = resolve));
    },
    release() {
      db.held = null;
      release();
    },
    insertAudit: async (events: AuditEventRecord[]): Promise<void> => {
      if (db.held) await db.held;
      if (db.down) throw new DatabaseUnavailableError('The database cannot be reached.');
      const ids = new Set(db.stored.map((event) => event.eventId));
      for (const event of events) if (!ids.has(event.eventId)) db.stored.push(event);
    },
  };
  return db satisfies Pick<AuditRepository, 'insertAudit'>;
}

const event = (i: number, details: Record<string, unknown> | null = null): AuditInput => ({ action: 'test.flood', actorUserId: 'u-1', outcome: 'denied', targetType: 'route', targetId: `GET /flood/${i}`, details });
const spoolFiles = (): string[] => readdirSync(dir).filter((name) => name.startsWith('audit-'));

/** The events of every spool file on disk, file by file in name order (the order a start replays them). */
async function spooled(spool: AuditSpool): Promise<AuditEventRecord[]> {
  const events: AuditEventRecord[] = [];
  for (const name of spoolFiles().sort()) events.push(...(await spool.read(join(dir, name))).items);
  return events;
}

describe('record() never writes to the disk in its own turn', () => {
  it('a flood with the database away: no synchronous fs call and no file when record() returns; on later turns the spool holds the oldest, and after the database returns every event is stored, in order', async () => {
    const db = database();
    const spool = new AuditSpool(dir, 1024 ** 3);
    const audit = new AuditTrail(db, quiet, { flushIntervalMs: 60_000, maxBuffered: 100, spool });
    await audit.start();
    db.down = true;
    await audit.flush();

    const syncCalls = watchSyncIo();
    for (let i = 0; i < 150; i++) audit.record(event(i));
    expect(syncCalls()).toBe(0);
    expect(spoolFiles()).toEqual([]);
    // Memory lets go of the oldest at once: they wait for the disk, not in the buffer.
    expect(audit.queueDepth).toBe(150);

    await until('the oldest part in a spool file', () => spoolFiles().length > 0 && audit.queueDepth <= 100);
    expect(syncCalls()).toBe(0);
    expect((await spooled(spool)).map((stored) => stored.targetId)).toEqual(Array.from({ length: 50 }, (_, i) => `GET /flood/${i}`));

    db.down = false;
    await audit.flush();
    expect(db.stored.map((stored) => stored.targetId)).toEqual(Array.from({ length: 150 }, (_, i) => `GET /flood/${i}`));
    expect(spoolFiles()).toEqual([]);
    await audit.close();
  });

  it('a slow database: what is spilled while a write hangs, and what a stop cannot wait for, ends up in the database or the spool — every event, none lost', async () => {
    const db = database();
    const spool = new AuditSpool(dir, 1024 ** 3);
    const audit = new AuditTrail(db, quiet, { flushIntervalMs: 60_000, maxBuffered: 100, spool, closeWriteMs: 50 });
    await audit.start();
    db.hold();
    for (let i = 0; i < 80; i++) audit.record(event(i));
    const hanging = audit.flush(); // 80 in flight, held by the database
    const syncCalls = watchSyncIo();
    for (let i = 80; i < 400; i++) {
      audit.record(event(i));
      // Requests arrive over turns and the disk keeps up with them.
      if (i % 50 === 0) await audit.spilled();
    }
    expect(syncCalls()).toBe(0);
    await audit.close(); // the database still hangs: the stop spools what it holds
    const onDisk = new Set((await spooled(spool)).map((stored) => stored.targetId));
    db.release();
    await hanging;
    const everywhere = new Set([...onDisk, ...db.stored.map((stored) => stored.targetId)]);
    expect(Array.from({ length: 400 }, (_, i) => `GET /flood/${i}`).filter((target) => !everywhere.has(target))).toEqual([]);
    // The hanging write's 80 were spooled too (at least once): a stop never waits on the database.
    for (let i = 0; i < 80; i++) expect(onDisk.has(`GET /flood/${i}`)).toBe(true);
  });

  it('a spool that cannot keep up: beyond a whole buffer waiting for the disk the oldest are dropped, counted, never held without bound', async () => {
    const db = database();
    const spool = new AuditSpool(dir, 1024 ** 3);
    const metrics = createMetrics({ collectDefaults: false });
    const audit = new AuditTrail(db, quiet, { flushIntervalMs: 60_000, maxBuffered: 100, spool, metrics });
    db.down = true;
    // One turn, no time for the disk: 100 buffered, 100 waiting for the spool, the rest dropped.
    for (let i = 0; i < 1000; i++) audit.record(event(i));
    expect(audit.queueDepth).toBeLessThanOrEqual(200);
    await until('the spill', () => spoolFiles().length > 0 && audit.queueDepth <= 100);
    db.down = false;
    await audit.flush();
    const targets = db.stored.map((stored) => stored.targetId);
    // The oldest waiting for the disk, then the newest the buffer held: in order, the gap counted as dropped.
    expect(targets).toHaveLength(200);
    expect(targets.slice(0, 100)).toEqual(Array.from({ length: 100 }, (_, i) => `GET /flood/${i}`));
    expect(targets.slice(-100)).toEqual(Array.from({ length: 100 }, (_, i) => `GET /flood/${900 + i}`));
    expect((await metrics.auditDropped.get()).values.find((value) => value.labels.reason === 'spool_full')?.value).toBe(800);
    await audit.close();
  });
});

describe('the buffer weighs an event by its decisions', () => {
  it('rows holding 100 decisions each: a buffer of 1,000 keeps 10 of them in memory, the oldest go to the spool', async () => {
    const db = database();
    const spool = new AuditSpool(dir, 1024 ** 3);
    const audit = new AuditTrail(db, quiet, { flushIntervalMs: 60_000, maxBuffered: 1000, spool });
    db.down = true;
    const decisions = (i: number) => ({ decisions: Array.from({ length: 100 }, (_, j) => ({ decisionId: `d-${i}-${j}`, allowed: false })) });
    for (let i = 0; i < 15; i++) audit.record(event(i, decisions(i)));
    await until('the spill', () => spoolFiles().length > 0 && audit.queueDepth <= 10);
    expect((await spooled(spool)).map((stored) => stored.targetId)).toEqual(Array.from({ length: 5 }, (_, i) => `GET /flood/${i}`));
    db.down = false;
    await audit.flush();
    expect(db.stored.map((stored) => stored.targetId)).toEqual(Array.from({ length: 15 }, (_, i) => `GET /flood/${i}`));
    await audit.close();
  });
});
