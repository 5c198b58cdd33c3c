/**
 * The database thread (src/adapters/postgres/database-thread.ts): the gateway's repositories run on their own
 * worker thread, behind the same interfaces. Calls answer as in-process calls do (values with their Dates,
 * errors with their classes), a thread that dies fails its calls closed and comes back on the next call, and
 * the thread runs at a lower priority than the proxy. Against the test database (PostgreSQL or PGlite).
 */
import { FULL_GRANT } from '../../src/domain/admin-repository';
import { AdminWriteError } from '../../src/domain/admin-repository';
import type { DatabaseSettings } from '../../src/adapters/postgres/database';
import { DATABASE_THREAD_NICE, openDatabaseThread, type DatabaseThread } from '../../src/adapters/postgres/database-thread';
import { DatabaseUnavailableError, ProvisioningError } from '../../src/domain/iam-repository';
import { createTestDatabase } from '../support/database';
import { testDatabaseKind, testDatabaseUrl, notRun } from '../support/env';
import { threadNiceValues } from '../support/threads';

const settings = (url = testDatabaseUrl()): DatabaseSettings => ({
  database: { url, embeddedDir: 'memory://', poolSize: testDatabaseKind() === 'pglite' ? 1 : 4, connectTimeoutMs: 3000, queryTimeoutMs: 5000, idleTimeoutMs: 30_000 },
  iam: { schema: { historyTable: 'iam_mikro_orm_schema_history' } },
});
const audit = { actorUserId: 'u-admin', requestId: 'req-1', clientAddress: '127.0.0.1', holds: FULL_GRANT };

let thread: DatabaseThread;
const unexpectedExits: Array<{ code: number | null }> = [];

beforeAll(async () => {
  // A fresh, migrated schema; the thread then opens it and finds nothing to migrate.
  const db = await createTestDatabase();
  await db.close();
  thread = await openDatabaseThread(settings(), { onUnexpectedExit: (detail) => unexpectedExits.push(detail) });
}, 60_000);

afterAll(async () => {
  await thread?.close();
});

describe('database thread', () => {
  it('answers repository calls like the in-process repository, Dates included', async () => {
    expect(thread.kind).toBe('postgres'); // a URL was given (the test PGlite listens on a socket too)
    const { user, identity } = await thread.repository.ensurePrincipal({ userId: 'u-thread', identityId: 'id-thread', identityDomain: 'example.com', displayName: 'Thread' });
    expect(user).toMatchObject({ userId: 'u-thread', displayName: 'Thread', enabled: true });
    expect(identity).toMatchObject({ identityId: 'id-thread', userId: 'u-thread' });
    // A real Date (Node's own realm: jest's sandbox has another Date constructor, so no instanceof here).
    expect(Object.prototype.toString.call(user.createdAt)).toBe('[object Date]');
    expect(Math.abs(user.createdAt.getTime() - Date.now())).toBeLessThan(60_000);
    expect(await thread.repository.getUser('u-thread')).toEqual(user);
    expect(await thread.repository.getUser('u-nobody')).toBeNull();
    expect(await thread.repository.listProfiles('u-thread')).toEqual([]);
    await expect(thread.repository.ping()).resolves.toBeUndefined();
  });

  it('keeps the class of the errors callers branch on', async () => {
    const adminError = await thread.admin
      .upsertIdentity('id-orphan', { userId: 'u-missing', identityDomain: 'example.com', enabled: true }, audit)
      .catch((error: unknown) => error);
    expect(adminError).toBeInstanceOf(AdminWriteError);
    expect((adminError as AdminWriteError).kind).toBe('not-found');
    expect((adminError as AdminWriteError).problems).toEqual([{ pointer: '/userId', message: 'does not exist' }]);

    const provisioningError = await thread.repository
      .applyProvisioning({ users: [{ userId: 'u-thread', profiles: [{ profileId: 'p-x', profileName: 'X', templateVersionId: 'no-such-template', clientTypes: ['WEB'], enabled: true }] }] })
      .catch((error: unknown) => error);
    expect(provisioningError).toBeInstanceOf(ProvisioningError);
    expect((provisioningError as ProvisioningError).problems.length).toBeGreaterThan(0);

    // An identity mapped to two users: a plain Error, message kept.
    await expect(thread.repository.ensurePrincipal({ userId: 'u-other', identityId: 'id-thread', identityDomain: 'example.com' })).rejects.toThrow(
      'identity "id-thread" belongs to user "u-thread"',
    );
  });

  it('runs on a thread of lower priority than the caller (Linux)', async () => {
    if (process.platform !== 'linux') return notRun('database-thread: priority check (Linux only)');
    const niceValues = threadNiceValues();
    expect(niceValues).toContain(DATABASE_THREAD_NICE);
    expect(niceValues[0]).not.toBe(DATABASE_THREAD_NICE); // this (the main) thread keeps its priority
  });

  it('fails the calls of a thread that dies with DatabaseUnavailableError, then starts a new one', async () => {
    const worker = thread.currentThread();
    expect(worker).not.toBeNull();
    const inFlight = thread.repository.listSessions('u-thread');
    await worker!.terminate();
    await expect(inFlight).rejects.toBeInstanceOf(DatabaseUnavailableError);
    expect(unexpectedExits).toHaveLength(1);
    // The next call starts a new thread and is answered.
    expect(await thread.repository.getUser('u-thread')).toMatchObject({ userId: 'u-thread' });
  }, 60_000);

  it('refuses calls once closed', async () => {
    const other = await openDatabaseThread(settings());
    await other.close();
    await expect(other.repository.getUser('u-thread')).rejects.toBeInstanceOf(DatabaseUnavailableError);
  }, 60_000);

  it('rejects at open when the database cannot be reached, naming the cause', async () => {
    await expect(openDatabaseThread(settings('postgresql://postgres@127.0.0.1:1/none'))).rejects.toThrow(/ECONNREFUSED|connect/i);
  }, 60_000);
});

