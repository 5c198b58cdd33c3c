import { migrateDown, migrateUp, migrationStatus } from '../adapters/postgres/migrator';
import { loadConfig } from '../config';
import { parseCommandLine, UsageError, type CliCommand } from './command-line';
import { withOrm } from './with-orm';

const USAGE = `usage: iam-gateway migrate up|down|status

  up      apply every pending migration (in one transaction)
  down    roll back the most recent migration (one step)
  status  list executed and pending migrations and the history table (iam.schema.history-table)

The database is DATABASE_URL (database.url), else the embedded one in database.embedded-dir.
\`serve\` applies pending migrations itself; this command is for doing it ahead or rolling back.`;

/** `iam-gateway migrate up|down|status`. */
export const migrateCommand: CliCommand = {
  usage: USAGE,
  async run(args, { stdout }) {
    const { positionals } = parseCommandLine(args, USAGE, {}, 1);
    const action = positionals[0];
    if (action !== 'up' && action !== 'down' && action !== 'status') {
      throw new UsageError(action === undefined ? 'missing the action (up, down or status)' : `unknown migrate action "${action}"`, USAGE);
    }
    const config = loadConfig();
    return withOrm(config, async (orm) => {
      if (action === 'up') {
        const applied = await migrateUp(orm);
        stdout.write(applied.length === 0 ? 'migrate: nothing to apply, the schema is up to date\n' : applied.map((name) => `migrate: applied ${name}\n`).join(''));
      } else if (action === 'down') {
        const reverted = await migrateDown(orm, { step: 1 });
        stdout.write(reverted.length === 0 ? 'migrate: nothing to roll back\n' : reverted.map((name) => `migrate: rolled back ${name}\n`).join(''));
      } else {
        const status = await migrationStatus(orm);
        stdout.write(`history table: ${config.iam.schema.historyTable}\n`);
        for (const name of status.executed) stdout.write(`  executed  ${name}\n`);
        for (const name of status.pending) stdout.write(`  pending   ${name}\n`);
      }
      return 0;
    });
  },
};
