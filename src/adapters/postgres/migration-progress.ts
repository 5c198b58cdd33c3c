import type { Configuration, MigrationObject } from '@mikro-orm/core';
import type { Migration } from '@mikro-orm/migrations';

/**
 * Who is told that a migration starts, per ORM (keyed by its configuration, which MikroORM hands every migration it
 * instantiates). MikroORM's own `migrator.on('migrating')` cannot serve: its migrator builds a new umzug at every run
 * (MikroORM 6.6), dropping the listeners registered before.
 */
const listeners = new WeakMap<Configuration, (name: string) => void>();

type MigrationClass = new (...args: ConstructorParameters<typeof Migration>) => { up(): Promise<void> | void };

/** The migration list, each migration telling {@link whileMigrating}'s listener when it starts. */
export function reportingMigrations(list: readonly MigrationObject[]): MigrationObject[] {
  return list.map(({ name, class: Base }) => {
    const Reporting = class extends (Base as unknown as MigrationClass) {
      readonly #config: Configuration;
      constructor(...args: ConstructorParameters<typeof Migration>) {
        super(...args);
        this.#config = args[1];
      }
      override up(): Promise<void> | void {
        listeners.get(this.#config)?.(name);
        return super.up();
      }
    };
    return { name, class: Reporting as unknown as MigrationObject['class'] };
  });
}

/** Runs `work` with `listener` told the name of each migration of `config`'s ORM as it starts. */
export async function whileMigrating<T>(config: Configuration, listener: (name: string) => void, work: () => Promise<T>): Promise<T> {
  listeners.set(config, listener);
  try {
    return await work();
  } finally {
    listeners.delete(config);
  }
}
