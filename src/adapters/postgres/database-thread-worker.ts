import { parentPort, workerData } from 'node:worker_threads';
import { MikroOrmAdminRepository } from './admin-repository';
import { openDatabase, type DatabaseSettings, type OpenDatabase } from './database';
import { DATABASE_METHODS, encodeError, type DatabaseTarget, type FromDatabaseThread, type ToDatabaseThread } from './database-thread-protocol';

type Callable = Record<string, (...args: unknown[]) => Promise<unknown>>;

/**
 * The database thread's program (started by database-thread.ts): opens the database, migrations included,
 * then serves repository calls until asked to close. Only the listed repository methods can be called.
 */
export async function runDatabaseThread(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('runDatabaseThread runs in a worker thread');
  const send = (message: FromDatabaseThread): void => port.postMessage(message);
  let database: OpenDatabase;
  try {
    const { settings, progress } = workerData as { settings: DatabaseSettings; progress?: boolean };
    database = await openDatabase(settings, progress ? (step) => send({ type: 'progress', progress: step }) : undefined);
  } catch (error) {
    send({ type: 'open-failed', error: encodeError(error) });
    return;
  }
  const targets: Record<DatabaseTarget, Callable> = {
    iam: database.repository as unknown as Callable,
    admin: new MikroOrmAdminRepository(database.orm) as unknown as Callable,
  };
  const allowed: Record<DatabaseTarget, ReadonlySet<string>> = { iam: new Set(DATABASE_METHODS.iam), admin: new Set(DATABASE_METHODS.admin) };

  const answer = (id: number, work: Promise<unknown>): void => {
    work.then(
      (value) => {
        try {
          send({ type: 'result', id, value });
        } catch (error) {
          // A value that cannot be cloned is a bug on this side; the caller still gets an answer.
          send({ type: 'error', id, error: encodeError(error) });
        }
      },
      (error: unknown) => send({ type: 'error', id, error: encodeError(error) }),
    );
  };

  port.on('message', (message: ToDatabaseThread) => {
    if (message.type === 'close') {
      void database.close().finally(() => {
        send({ type: 'closed' });
        port.close();
      });
      return;
    }
    const target = targets[message.target];
    if (!target || !allowed[message.target].has(message.method)) {
      answer(message.id, Promise.reject(new Error(`no database method ${message.target}.${message.method}`)));
      return;
    }
    answer(message.id, Promise.resolve().then(() => target[message.method]!.apply(target, message.args)));
  });
  send({ type: 'ready', kind: database.kind });
}
