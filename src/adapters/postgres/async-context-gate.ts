import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Keeps Node's process-wide async hooks off while no database work runs.
 *
 * Why: under Node 20 an enabled `AsyncLocalStorage` installs an async hook, so every promise, `nextTick`,
 * timer and socket of the whole process then calls into JavaScript. MikroORM enables three instances (its
 * transaction context, its flush guard and its raw-query stack) on the first flush or transaction and never
 * disables them, so from the first login on, every proxied request paid for database code it never runs
 * (about 8 µs of a ~60 µs request, `npm run bench -- --work` shows whether the hooks are on).
 *
 * How: every unit of ORM work runs inside {@link withOrmContext}. The gate counts the units in flight and
 * records each storage whose `run()` happens while one is in flight. When the count drops to zero it
 * disables those storages; MikroORM's next `run()` enables its storage again (that is how
 * `AsyncLocalStorage.run` works), so ORM code always has its context while it runs. Storages used only
 * outside ORM work (a Node host's own request tracing, when the package is embedded) are never touched.
 *
 * On runtimes whose `AsyncLocalStorage` needs no hook (it then has no `_enable`), the gate does nothing.
 */

type TrackedStorage = AsyncLocalStorage<unknown> & { _enable?: () => void; enabled?: boolean };

let inFlight = 0;
const ormStorages = new Set<TrackedStorage>();
let installed = false;

/** Wraps `AsyncLocalStorage.prototype._enable` (Node 20: called by every `run()`/`enterWith()`) once. */
function install(): void {
  if (installed) return;
  installed = true;
  const prototype = AsyncLocalStorage.prototype as TrackedStorage;
  const enable = prototype._enable;
  if (typeof enable !== 'function') return;
  prototype._enable = function recordOrmStorage(this: TrackedStorage): void {
    if (inFlight > 0) ormStorages.add(this);
    enable.call(this);
  };
}

/** Runs one unit of ORM work; when it was the last one in flight, the ORM's storages are switched off. */
export async function withOrmContext<T>(work: () => Promise<T>): Promise<T> {
  install();
  inFlight++;
  try {
    return await work();
  } finally {
    inFlight--;
    if (inFlight === 0) {
      for (const storage of ormStorages) storage.disable();
    }
  }
}

/**
 * Whether a storage the ORM used is enabled right now (its async hook is on). For tests and diagnostics;
 * false on runtimes that need no hook.
 */
export function ormAsyncContextActive(): boolean {
  for (const storage of ormStorages) if (storage.enabled === true) return true;
  return false;
}

/** ORM units of work in flight (for tests). */
export function ormWorkInFlight(): number {
  return inFlight;
}
