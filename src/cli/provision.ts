import { loadProvisioningFile, provisioningFileError } from '../auth/provisioning-file';
import { ProvisioningError } from '../domain/iam-repository';
import { openDatabase, type OpenDatabase } from '../adapters/postgres/database';
import { openTokenStore, tokenStoreBackendFor } from '../adapters/registry';
import { ChangeFeed } from '../sessions/change-feed';
import { loadConfig, type GatewayConfig } from '../config';
import { parseCommandLine, UsageError, type CliCommand, type CliOutput } from './command-line';

const USAGE = `usage: iam-gateway provision FILE [--overwrite]

Creates the users, identities, templates and profiles FILE describes and the database lacks
(config/provision.example.yaml shows the format). Objects that exist are left as they are.

  --overwrite  also update existing objects to match FILE (audited, actor "provisioning")

Running gateway instances receive the changes through the change feed (and Redis when REDIS_URL is set).`;

/** `iam-gateway provision FILE [--overwrite]`. */
export const provisionCommand: CliCommand = {
  usage: USAGE,
  async run(args, { stdout, stderr }) {
    const { positionals, values } = parseCommandLine(args, USAGE, { overwrite: { type: 'boolean' } }, 1);
    const file = positionals[0];
    if (file === undefined) throw new UsageError('missing the provisioning FILE', USAGE);
    const overwrite = values.overwrite === true;
    const config = loadConfig();
    const provisioning = loadProvisioningFile(file, { clientTypes: config.iam.clientTypes });
    const database = await openDatabase(config);
    try {
      const summary = await database.repository
        .applyProvisioning(provisioning.document, { overwrite, audit: { actorUserId: 'provisioning', source: file } })
        .catch((error: unknown) => {
          // What only the database can tell (unknown templates, ids of another user): every problem, with its line.
          if (error instanceof ProvisioningError) throw provisioningFileError(file, error.problems.map((p) => ({ ...p, line: provisioning.lineOf(p.pointer) })));
          throw error;
        });
      if (summary.created + summary.updated === 0) {
        stdout.write(overwrite ? `provision: nothing changed (${summary.unchanged} objects already as described)\n` : 'provision: nothing changed (everything in the file exists; --overwrite updates existing objects)\n');
      } else stdout.write(summary.changes.map((line: string) => `provision: ${line}\n`).join('') + `provision: ${summary.created} created, ${summary.updated} updated, ${summary.unchanged} unchanged\n`);
      // The changes are in the change feed (same transaction): publish them now; running instances also read
      // the feed and retry what is undelivered, so a store that cannot be reached here delays, never loses them.
      // A store without a shared events channel has no running instance to tell from here.
      if (tokenStoreBackendFor(config.redis.url).capabilities.events) await deliverChanges(config, database.repository, stderr);
      return 0;
    } finally {
      await database.close();
    }
  },
};

async function deliverChanges(config: GatewayConfig, repository: OpenDatabase['repository'], stderr: CliOutput['stderr']): Promise<void> {
  const quiet = { warn: () => undefined, info: () => undefined };
  try {
    const { store } = await openTokenStore({ url: config.redis.url, prefix: config.iam.token.storePrefix });
    try {
      await new ChangeFeed({ repository, store, apply: () => undefined, logger: quiet, intervalMs: 1000, cursor: 0 }).deliver();
    } finally {
      await store.close();
    }
  } catch {
    stderr.write('provision: Redis cannot be reached; the running gateway instances deliver the changes\n');
  }
}
