/**
 * Round 3 (half-done endings), without a database: an ending whose record the database could not take is on
 * disk before it is answered (src/sessions/session-ending.ts), and the spool a start replays
 * (src/sessions/ending-spool.ts over src/audit/disk-spool.ts) records each file once, hands files back when the
 * database is away, sets aside what the database refuses, and leaves a live instance's files alone.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryTokenStore } from '../../src/adapters/memory/memory-token-store';
import { withInProcessEvents } from '../../src/adapters/in-process-events';
import type { EndSessionsRequest, EndSessionsResult } from '../../src/domain/changes';
import { DatabaseUnavailableError } from '../../src/domain/iam-repository';
import { StoreUnavailableError } from '../../src/domain/token-store';
import { EndingSpool, replaySpooledEndings } from '../../src/sessions/ending-spool';
import { RevocationRegistry } from '../../src/sessions/revocation-registry';
import { SessionEnding, type EndTarget } from '../../src/sessions/session-ending';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'iam-ending-spool-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const endingFiles = (): string[] => readdirSync(dir).filter((name) => name.startsWith('endings-')).sort();

function request(sessionId: string): EndSessionsRequest {
  return {
    userId: 'u-1',
    reason: 'logout',
    logout: true,
    sessionIds: [sessionId],
    at: new Date('2030-01-02T03:04:05.000Z'),
    audit: { action: 'session.logout', actorUserId: 'u-1', requestId: 'r-1', clientAddress: '192.0.2.1', details: null },
  };
}

function recordingRepository(fail: (request: EndSessionsRequest) => Error | null = () => null) {
  const recorded: EndSessionsRequest[] = [];
  return {
    recorded,
    endSessions: async (request: EndSessionsRequest): Promise<EndSessionsResult> => {
      const error = fail(request);
      if (error) throw error;
      recorded.push(request);
      return { ended: [], sessionEpoch: null, sessionsRevokedAt: null };
    },
  };
}

describe('R3 endings: the endings spool', () => {
  it('replays each spooled ending once (dates revived), removes its file, and a second start finds nothing', async () => {
    const spool = new EndingSpool(dir);
    await spool.write([request('s-1')]);
    await spool.write([request('s-2')], { claimed: true }); // left claimed by an instance of this process that stopped
    const repository = recordingRepository();
    expect(await replaySpooledEndings(new EndingSpool(dir), repository, quiet)).toBe(2);
    expect(repository.recorded.map((r) => r.sessionIds)).toEqual([['s-1'], ['s-2']]);
    expect(repository.recorded[0]!.at).toEqual(new Date('2030-01-02T03:04:05.000Z'));
    expect(repository.recorded[0]!.audit).toEqual(request('s-1').audit);
    expect(endingFiles()).toEqual([]);
    expect(await replaySpooledEndings(new EndingSpool(dir), repository, quiet)).toBe(0);
  });

  it('with the database away the start fails and every file not yet recorded is handed back for the next start', async () => {
    const spool = new EndingSpool(dir);
    for (const id of ['s-1', 's-2', 's-3']) await spool.write([request(id)]);
    const down = recordingRepository((r) => (r.sessionIds![0] === 's-2' ? new DatabaseUnavailableError('down') : null));
    await expect(replaySpooledEndings(new EndingSpool(dir), down, quiet)).rejects.toBeInstanceOf(DatabaseUnavailableError);
    expect(down.recorded.map((r) => r.sessionIds![0])).toEqual(['s-1']);
    expect(endingFiles().map((name) => name.replace(/^endings-[0-9]+-[0-9]+-[0-9a-f]+/, ''))).toEqual(['.jsonl', '.jsonl']);
    const up = recordingRepository();
    expect(await replaySpooledEndings(new EndingSpool(dir), up, quiet)).toBe(2);
    expect(up.recorded.map((r) => r.sessionIds![0])).toEqual(['s-2', 's-3']);
  });

  it('an ending the database refuses for its content is set aside, and does not stop the start', async () => {
    const spool = new EndingSpool(dir);
    await spool.write([request('bad')]);
    await spool.write([request('good')]);
    const repository = recordingRepository((r) => (r.sessionIds![0] === 'bad' ? new Error('violates a constraint') : null));
    expect(await replaySpooledEndings(new EndingSpool(dir), repository, quiet)).toBe(1);
    expect(endingFiles().map((name) => name.replace(/^endings-[0-9]+-[0-9]+-[0-9a-f]+/, ''))).toEqual(['.refused']);
  });

  it("leaves a file claimed by a live process alone, and takes over one whose process is gone; the audit spool's files are not its own", async () => {
    const line = JSON.stringify(request('s-1')) + '\n';
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(join(dir, `endings-1-1-aaaaaaaa.claimed-${process.ppid}-0badc0de`), line);
    writeFileSync(join(dir, `endings-2-1-bbbbbbbb.claimed-${dead}-0badc0de`), line);
    writeFileSync(join(dir, 'audit-3-1-cccccccc.jsonl'), '{"action":"x"}\n');
    const repository = recordingRepository();
    expect(await replaySpooledEndings(new EndingSpool(dir), repository, quiet)).toBe(1);
    expect(readdirSync(dir).sort()).toEqual(['audit-3-1-cccccccc.jsonl', `endings-1-1-aaaaaaaa.claimed-${process.ppid}-0badc0de`]);
  });
});

describe('R3 endings: SessionEnding', () => {
  const target: EndTarget = {
    userId: 'u-1',
    reason: 'logout',
    logout: true,
    sessions: [{ sessionId: 's-1', tokenHash: 'h-1' }],
    durable: { sessionIds: ['s-1'] },
    audit: { action: 'session.logout', actorUserId: 'u-1', requestId: 'r-1', clientAddress: null, details: null },
  };

  function ending(repository: { endSessions: (request: EndSessionsRequest) => Promise<EndSessionsResult> }, store = withInProcessEvents(new MemoryTokenStore({ prefix: 't' }))) {
    return new SessionEnding({ store, repository, cache: null, revocations: new RevocationRegistry(60_000), changes: null, logger: quiet, spool: new EndingSpool(dir) });
  }

  it('answers an ending the database cannot record only once it is on disk, with its audit row; close() hands it to the next start', async () => {
    const sessions = ending(recordingRepository(() => new DatabaseUnavailableError('down')));
    expect(await sessions.end(target)).toEqual({ recorded: null });
    const files = endingFiles();
    expect(files).toHaveLength(1);
    const spooled = JSON.parse(readFileSync(join(dir, files[0]!), 'utf8')) as EndSessionsRequest;
    expect(spooled).toMatchObject({ userId: 'u-1', logout: true, sessionIds: ['s-1'], audit: target.audit });
    expect(await sessions.close()).toBe(1);
    expect(endingFiles()[0]).toMatch(/\.jsonl$/);
    const up = recordingRepository();
    expect(await replaySpooledEndings(new EndingSpool(dir), up, quiet)).toBe(1);
  });

  it('removes the file once the database records the ending', async () => {
    let down = true;
    const repository = recordingRepository(() => (down ? new DatabaseUnavailableError('down') : null));
    const sessions = ending(repository);
    await sessions.end(target);
    expect(endingFiles()).toHaveLength(1);
    down = false;
    expect(await sessions.close()).toBe(0);
    expect(repository.recorded).toHaveLength(1);
    expect(endingFiles()).toEqual([]);
  });

  it('spools nothing and answers the store error when neither store took the ending (a retry does both again)', async () => {
    const store = withInProcessEvents(new MemoryTokenStore({ prefix: 't' }));
    store.deleteToken = async () => {
      throw new StoreUnavailableError('down');
    };
    const sessions = ending(recordingRepository(() => new DatabaseUnavailableError('down')), store);
    await expect(sessions.end(target)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(endingFiles()).toEqual([]);
    expect(await sessions.close()).toBe(0);
  });
});
