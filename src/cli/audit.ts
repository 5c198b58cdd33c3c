import { openDatabase } from '../adapters/postgres/database';
import { DURATION_EXAMPLES, loadConfig, tryParseDuration } from '../config';
import { parseCommandLine, UsageError, type CliCommand } from './command-line';

const USAGE = `usage: iam-gateway audit purge [--older-than DURATION]

  purge  delete audit events older than DURATION

  --older-than DURATION  e.g. 90d or 12h; default iam.audit.retention (0 = keep forever: then required)`;

/** `iam-gateway audit purge [--older-than DURATION]`. */
export const auditCommand: CliCommand = {
  usage: USAGE,
  async run(args, { stdout }) {
    const { positionals, values } = parseCommandLine(args, USAGE, { 'older-than': { type: 'string' } }, 1);
    const action = positionals[0];
    if (action !== 'purge') throw new UsageError(action === undefined ? 'missing the action (purge)' : `unknown audit action "${action}"`, USAGE);
    const flag = values['older-than'];
    const config = loadConfig();
    const olderThanMs = flag === undefined ? config.iam.audit.retentionMs : tryParseDuration(flag);
    if (olderThanMs === undefined || olderThanMs <= 0) {
      throw new UsageError(flag === undefined ? 'iam.audit.retention is 0 (keep forever); pass --older-than DURATION' : `--older-than must be a duration above zero (${DURATION_EXAMPLES})`, USAGE);
    }
    const before = new Date(Date.now() - olderThanMs);
    const database = await openDatabase(config);
    try {
      const deleted = await database.repository.purgeAudit(before);
      stdout.write(`audit: deleted ${deleted} events that occurred before ${before.toISOString()}\n`);
      return 0;
    } finally {
      await database.close();
    }
  },
};
