import { openDatabaseThread, type DatabaseThread } from '../adapters/postgres/database-thread';
import type { DatabaseProgress, DatabaseProgressListener } from '../adapters/postgres/database';
import { provisioningFileError, type ProvisioningFile } from '../auth/provisioning-file';
import { ProvisioningError } from '../domain/iam-repository';
import type { Logger } from '../observability/logger';
import type { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from '../config';

/**
 * Opens the database on its own thread (the proxy's event loop never waits behind database work), applies
 * the migrations, then the start-time provisioning file (read and checked by preflight.ts): create-missing only, so a restart never reverts an
 * admin API edit (`provision FILE --overwrite` syncs; docs/threat-model.md #11.22).
 */
export async function openGatewayDatabase(
  config: GatewayConfig,
  logger: Logger,
  cleanups: CleanupStack,
  provisioning: ProvisioningFile | null,
  progress: ((line: string) => void) | null = null,
): Promise<DatabaseThread> {
  const database = await openDatabaseThread(config, {
    ...(progress === null ? {} : { onProgress: progressLines(progress) }),
    onUnexpectedExit: ({ code, error }) => logger.error({ code, err: error }, 'database thread stopped unexpectedly; it restarts on the next database call'),
  });
  cleanups.push('database', () => database.close());
  logger.info({ database: database.kind }, 'database ready, migrations applied');
  if (provisioning) {
    const file = provisioning.path;
    const summary = await database.repository.applyProvisioning(provisioning.document, { overwrite: false, audit: { actorUserId: 'provisioning', source: file } }).catch((error: unknown) => {
      if (error instanceof ProvisioningError) throw provisioningFileError(file, error.problems.map((p) => ({ ...p, line: provisioning.lineOf(p.pointer) })));
      throw error;
    });
    logger.info({ file, created: summary.created, updated: summary.updated, unchanged: summary.unchanged }, 'provisioning applied');
  }
  return database;
}

/**
 * The start's progress as lines for a person watching a terminal (serve prints them on stderr): a new embedded
 * database, each migration, then ready. A start with nothing to create or apply prints nothing.
 */
export function progressLines(write: (line: string) => void): DatabaseProgressListener {
  let shown = false;
  return (step: DatabaseProgress) => {
    if (step.step === 'ready' && !shown) return;
    shown = true;
    write(`iam-gateway: ${describeProgress(step)}`);
  };
}

function describeProgress(step: DatabaseProgress): string {
  switch (step.step) {
    case 'initializing':
      return step.place.startsWith('memory://')
        ? 'initializing the embedded database in memory (this takes a few seconds)'
        : `initializing the embedded database in ${step.place} (first start; this may take a while)`;
    case 'migrating':
      return `applying database migration ${step.index} of ${step.total}: ${step.name}`;
    case 'ready':
      return `database ready (${step.applied} migration${step.applied === 1 ? '' : 's'} applied)`;
  }
}
