import { readFileSync } from 'node:fs';
import { ProvisioningFileError, readProvisioningFile } from '../api/provisioning-file';
import { hashPassword } from '../auth/password-hash';
import { runPolicyCommand } from './policy-command';
import { ConfigError, DURATION_EXAMPLES, loadConfig, tryParseDuration, type GatewayConfig } from './config';
import { createOrm } from '../adapters/postgres/orm';
import { startEmbeddedDatabaseProcess } from '../adapters/pglite/embedded-database-process';
import { migrateDown, migrateUp, migrationStatus } from '../adapters/postgres/migrator';
import { openDatabase, type OpenDatabase } from '../adapters/postgres/database';
import { ProvisioningError } from '../domain/iam-repository';
import { startGateway } from './start-gateway';
import { ChangeFeed } from '../sessions/change-feed';
import { MemoryTokenStore } from '../adapters/memory/memory-token-store';
import { RedisTokenStore } from '../adapters/redis/redis-token-store';

const USAGE = `usage: iam-gateway <command>

  serve                       start the gateway (proxy on PORT, management on MANAGEMENT_PORT)
  migrate up|down|status      apply, roll back (one step) or list database migrations
  policy check [DIR]          validate and lint the policy files (--provision FILE: unknown permission codes)
  policy test [DIR]           run the policy test cases of DIR/tests/*.yaml; exit 1 on a failure
  policy explain METHOD PATH  show the route a request selects and what it asks for (--dir DIR)
  policy coverage --openapi FILE  list host operations no route covers (--dir DIR, --fail-on-uncovered)
  provision FILE [--overwrite]  create what a provisioning file describes and the database lacks;
                              --overwrite also updates existing objects to match (audited, actor provisioning)
  tokens purge                delete every token-store key under iam.token.store-prefix
  audit purge [--older-than DURATION]  delete audit events older than DURATION (default iam.audit.retention)
  hash-password [PASSWORD]    print an argon2id hash for a users file (reads stdin when no argument)

Configuration: IAM_CONFIG (default config/default.yaml) plus environment overrides; see README.`;

/** The CLI; resolves the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve':
        return await serve();
      case 'migrate':
        return await migrate(rest[0]);
      case 'policy':
        return await runPolicyCommand(rest, { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() });
      case 'provision':
        return await provision(rest);
      case 'tokens':
        return await tokens(rest[0]);
      case 'audit':
        return await auditCommand(rest);
      case 'hash-password':
        process.stdout.write(`${await hashPassword(rest[0] ?? readFileSync(0, 'utf8').replace(/\r?\n$/, ''))}\n`);
        return 0;
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(`${USAGE}\n`);
        return command === undefined ? 2 : 0;
      default:
        process.stderr.write(`iam-gateway: unknown command "${command}"\n\n${USAGE}\n`);
        return 2;
    }
  } catch (error) {
    if (error instanceof ProvisioningError) {
      process.stderr.write(`iam-gateway: ${error.message}\n${error.problems.map((p) => `  ${p.pointer}: ${p.message}\n`).join('')}`);
      return 1;
    }
    if (error instanceof ConfigError || error instanceof ProvisioningFileError) {
      process.stderr.write(`iam-gateway: ${error.message}\n`);
      return 1;
    }
    process.stderr.write(`iam-gateway: ${(error as Error).message}\n`);
    return 1;
  }
}

async function serve(): Promise<number> {
  const config = loadConfig();
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  try {
    gateway = await startGateway(config);
  } catch (error) {
    // A failed start ends the process with 1 (main prints why): startGateway closed what it opened, and a
    // handle that still lingers (a pool socket, a worker thread) must not keep a half-started gateway alive.
    setTimeout(() => process.exit(1), 500).unref();
    throw error;
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      gateway.logger.info({ signal }, 'stopping');
      void gateway.close().then(resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  // close() gives up on a database or token store that does not answer, but its hung socket would keep the
  // process alive: exit anyway once everything that can finish has (the timer itself holds nothing open).
  setTimeout(() => process.exit(), 500).unref();
  return 0;
}

async function migrate(action: string | undefined): Promise<number> {
  if (action !== 'up' && action !== 'down' && action !== 'status') {
    process.stderr.write('usage: iam-gateway migrate up|down|status\n');
    return 2;
  }
  const config = loadConfig();
  return withOrm(config, async (orm) => {
    if (action === 'up') {
      const applied = await migrateUp(orm);
      process.stdout.write(applied.length === 0 ? 'migrate: nothing to apply, the schema is up to date\n' : applied.map((name) => `migrate: applied ${name}\n`).join(''));
    } else if (action === 'down') {
      const reverted = await migrateDown(orm, { step: 1 });
      process.stdout.write(reverted.length === 0 ? 'migrate: nothing to roll back\n' : reverted.map((name) => `migrate: rolled back ${name}\n`).join(''));
    } else {
      const status = await migrationStatus(orm);
      process.stdout.write(`history table: ${config.iam.schema.historyTable}\n`);
      for (const name of status.executed) process.stdout.write(`  executed  ${name}\n`);
      for (const name of status.pending) process.stdout.write(`  pending   ${name}\n`);
    }
    return 0;
  });
}

async function provision(args: string[]): Promise<number> {
  const overwrite = args.includes('--overwrite');
  const files = args.filter((arg) => arg !== '--overwrite');
  const file = files[0];
  if (!file || files.length > 1 || file.startsWith('-')) {
    process.stderr.write('usage: iam-gateway provision FILE [--overwrite]\n');
    return 2;
  }
  const document = readProvisioningFile(file);
  const config = loadConfig();
  const database = await openDatabase(config);
  try {
    const summary = await database.repository.applyProvisioning(document, { overwrite, audit: { actorUserId: 'provisioning', source: file } });
    if (summary.created + summary.updated === 0) {
      process.stdout.write(overwrite ? `provision: nothing changed (${summary.unchanged} objects already as described)\n` : 'provision: nothing changed (everything in the file exists; --overwrite updates existing objects)\n');
    } else process.stdout.write(summary.changes.map((line: string) => `provision: ${line}\n`).join('') + `provision: ${summary.created} created, ${summary.updated} updated, ${summary.unchanged} unchanged\n`);
    // The changes are in the change feed (same transaction): publish them now; running instances also read
    // the feed and retry what is undelivered, so a Redis that cannot be reached here delays, never loses them.
    if (config.redis.url) await deliverChanges(config, config.redis.url, database.repository);
    return 0;
  } finally {
    await database.close();
  }
}

async function deliverChanges(config: GatewayConfig, url: string, repository: OpenDatabase['repository']): Promise<void> {
  const quiet = { warn: () => undefined, info: () => undefined };
  try {
    const store = await RedisTokenStore.connect({ url, prefix: config.iam.token.storePrefix });
    try {
      await new ChangeFeed({ repository, store, apply: () => undefined, logger: quiet, intervalMs: 1000, cursor: 0 }).deliver();
    } finally {
      await store.close();
    }
  } catch {
    process.stderr.write('provision: Redis cannot be reached; the running gateway instances deliver the changes\n');
  }
}

async function tokens(action: string | undefined): Promise<number> {
  if (action !== 'purge') {
    process.stderr.write('usage: iam-gateway tokens purge\n');
    return 2;
  }
  const config = loadConfig();
  const store = config.redis.url
    ? await RedisTokenStore.connect({ url: config.redis.url, prefix: config.iam.token.storePrefix })
    : new MemoryTokenStore({ prefix: config.iam.token.storePrefix });
  try {
    const deleted = await store.purge();
    // Every instance drops its cached sessions now instead of at its next revalidation.
    if (store.kind === 'redis') await store.publish({ type: 'tokens-flushed', reason: 'tokens purge' });
    process.stdout.write(`tokens: deleted ${deleted} keys under "${config.iam.token.storePrefix}:"${store.kind === 'memory' ? ' (in-process store: nothing persists between runs)' : ''}\n`);
    return 0;
  } finally {
    await store.close();
  }
}

async function auditCommand(args: string[]): Promise<number> {
  const usage = 'usage: iam-gateway audit purge [--older-than DURATION]   (e.g. 90d; default iam.audit.retention)\n';
  const [action, ...options] = args;
  const flag = options[0]?.startsWith('--older-than=') ? options[0].slice('--older-than='.length) : options[0] === '--older-than' ? options[1] : undefined;
  const expected = options[0] === undefined ? 0 : options[0] === '--older-than' ? 2 : 1;
  if (action !== 'purge' || options.length !== expected || (options.length > 0 && flag === undefined)) {
    process.stderr.write(usage);
    return 2;
  }
  const config = loadConfig();
  const olderThanMs = flag === undefined ? config.iam.audit.retentionMs : tryParseDuration(flag);
  if (olderThanMs === undefined || olderThanMs <= 0) {
    process.stderr.write(flag === undefined ? 'audit purge: iam.audit.retention is 0 (keep forever); pass --older-than DURATION\n' : `audit purge: --older-than must be a duration above zero (${DURATION_EXAMPLES})\n`);
    return 2;
  }
  const before = new Date(Date.now() - olderThanMs);
  const database = await openDatabase(config);
  try {
    const deleted = await database.repository.purgeAudit(before);
    process.stdout.write(`audit: deleted ${deleted} events that occurred before ${before.toISOString()}\n`);
    return 0;
  } finally {
    await database.close();
  }
}

async function withOrm(config: GatewayConfig, work: (orm: Awaited<ReturnType<typeof createOrm>>) => Promise<number>): Promise<number> {
  const embedded = config.database.url ? null : await startEmbeddedDatabaseProcess(config.database.embeddedDir);
  const orm = await createOrm({
    url: config.database.url ?? embedded!.url,
    poolSize: config.database.url ? config.database.poolSize : 1,
    historyTable: config.iam.schema.historyTable,
    embedded: embedded !== null,
  });
  try {
    return await work(orm);
  } finally {
    await orm.close(true);
    await embedded?.stop();
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
