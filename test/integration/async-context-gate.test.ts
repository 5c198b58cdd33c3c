/**
 * The async-context gate (src/adapters/postgres/async-context-gate.ts): MikroORM's AsyncLocalStorage instances
 * are on while ORM work runs and off once none does, so the proxy path runs without Node's async hooks;
 * ORM work keeps its transaction context throughout, and storages the ORM never used are left alone.
 * Runs against the test database (real PostgreSQL when DATABASE_URL is set, PGlite otherwise).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { TransactionContext } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ormAsyncContextActive, ormWorkInFlight, withOrmContext } from '../../src/adapters/postgres/async-context-gate';
import { createTestDatabase, type TestDatabase } from '../support/database';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db.close();
});

beforeEach(async () => {
  await db.reset();
});

/** MikroORM's own transaction context storage (a static of @mikro-orm/core's TransactionContext; `enabled` is Node 20's flag). */
const transactionStorage = (TransactionContext as unknown as { storage: AsyncLocalStorage<unknown> & { enabled?: boolean } }).storage;

describe('async-context gate', () => {
  it('switches the ORM storages off once a repository write (transaction + flush) has finished', async () => {
    await db.repository.ensurePrincipal({ userId: 'u-gate', identityId: 'id-gate', identityDomain: 'example.com' });
    expect(ormWorkInFlight()).toBe(0);
    expect(ormAsyncContextActive()).toBe(false);
    expect(transactionStorage.enabled).toBe(false);
    // ... and the data is really there: the write was not cut short.
    const found = await db.repository.getUser('u-gate');
    expect(found?.userId).toBe('u-gate');
    expect(ormAsyncContextActive()).toBe(false);
  });

  it('keeps the transaction context while ORM work runs, across awaits', async () => {
    const seen: Array<EntityManager | undefined> = [];
    await withOrmContext(() =>
      (db.orm.em.fork() as EntityManager).transactional(async (tx) => {
        seen.push(TransactionContext.getEntityManager() as EntityManager | undefined);
        expect(ormAsyncContextActive()).toBe(true);
        // The scenario: a timer turn inside the transaction, which an async context lost across awaits would not survive.
        await delay(20);
        await tx.execute('select 1');
        seen.push(TransactionContext.getEntityManager() as EntityManager | undefined);
      }),
    );
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBeDefined();
    expect(seen[1]).toBe(seen[0]);
    expect(ormAsyncContextActive()).toBe(false);
  });

  it('does not switch off while other ORM work is still in flight', async () => {
    let releaseSlow!: () => void;
    const slowMayFinish = new Promise<void>((resolve) => (releaseSlow = resolve));
    const contexts: unknown[] = [];
    const slow = withOrmContext(() =>
      (db.orm.em.fork() as EntityManager).transactional(async (tx) => {
        contexts.push(TransactionContext.getEntityManager());
        await slowMayFinish;
        // The quick unit below has finished by now; this one must still see its own transaction.
        contexts.push(TransactionContext.getEntityManager());
        await tx.execute('select 1');
      }),
    );
    // The scenario: the slow unit has started before the second one (pacing, not a wait for an effect).
    await delay(10);
    // A second unit starts and finishes meanwhile (no query: the embedded database has a pool of one).
    await withOrmContext(() => delay(5));
    expect(ormWorkInFlight()).toBe(1);
    expect(ormAsyncContextActive()).toBe(true);
    releaseSlow();
    await slow;
    expect(contexts[0]).toBeDefined();
    expect(contexts[1]).toBe(contexts[0]);
    expect(ormAsyncContextActive()).toBe(false);
  });

  it('never touches a storage the ORM did not use', async () => {
    const own = new AsyncLocalStorage<string>();
    await own.run('host-context', async () => {
      await db.repository.ensurePrincipal({ userId: 'u-gate2', identityId: 'id-gate2', identityDomain: 'example.com' });
      // The scenario: a timer turn after the ORM's work, where a switched-off gate could have dropped the caller's store.
      await delay(5);
      expect(own.getStore()).toBe('host-context');
    });
  });

  it('turns the storages back on for the next unit of work, which rolls back as a transaction should', async () => {
    await db.repository.ensurePrincipal({ userId: 'u-gate3', identityId: 'id-gate3', identityDomain: 'example.com' });
    expect(ormAsyncContextActive()).toBe(false);
    await expect(
      withOrmContext(() =>
        (db.orm.em.fork() as EntityManager).transactional(async (tx) => {
          await tx.execute("update iam_users set display_name = 'changed' where user_id = 'u-gate3'");
          expect(TransactionContext.getEntityManager()).toBeDefined();
          throw new Error('roll back');
        }),
      ),
    ).rejects.toThrow('roll back');
    const user = await db.repository.getUser('u-gate3');
    expect(user?.displayName ?? null).not.toBe('changed');
    expect(ormAsyncContextActive()).toBe(false);
  });
});
