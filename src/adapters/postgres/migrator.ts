import type { MikroORM } from '@mikro-orm/postgresql';
import { withOrmContext } from './async-context-gate';
import { whileMigrating } from './migration-progress';

/** Applied and not-yet-applied migrations, by name, oldest first. */
export interface MigrationStatus {
  executed: string[];
  pending: string[];
}

/**
 * Applies every pending migration and returns the names applied (empty when the schema is current, so
 * the CLI can say "nothing to apply"). All pending migrations run in one transaction; `onMigrating` is told each one
 * as it starts (1 of N).
 */
export async function migrateUp(orm: MikroORM, onMigrating?: (step: { index: number; total: number; name: string }) => void): Promise<string[]> {
  const migrator = orm.getMigrator();
  if (!onMigrating) return (await withOrmContext(() => migrator.up())).map((migration) => migration.name);
  const total = (await withOrmContext(() => migrator.getPendingMigrations())).length;
  let index = 0;
  const applied = await whileMigrating(orm.config, (name) => onMigrating({ index: ++index, total, name }), () => withOrmContext(() => migrator.up()));
  return applied.map((migration) => migration.name);
}

/**
 * Reverts migrations and returns the names reverted, newest first. Without options it reverts the
 * latest one; `step` reverts that many; `to` reverts down to (excluding) the named migration, and
 * `to: '0'` reverts everything.
 */
export async function migrateDown(orm: MikroORM, options: { to?: string; step?: number } = {}): Promise<string[]> {
  const migrator = orm.getMigrator();
  const reverted = await withOrmContext(() => {
    if (options.to !== undefined) return migrator.down({ to: options.to === '0' ? 0 : options.to });
    // umzug's `step` option; MikroORM passes unknown options through.
    if (options.step !== undefined) return migrator.down({ step: options.step } as Parameters<typeof migrator.down>[0]);
    return migrator.down();
  });
  return reverted.map((migration) => migration.name);
}

/** What the history table says was applied, and what the migration list still holds. */
export async function migrationStatus(orm: MikroORM): Promise<MigrationStatus> {
  const migrator = orm.getMigrator();
  const [executed, pending] = await withOrmContext(async () => [await migrator.getExecutedMigrations(), await migrator.getPendingMigrations()] as const);
  return { executed: executed.map((row) => row.name), pending: pending.map((migration) => migration.name) };
}
