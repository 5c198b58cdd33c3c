import { AuditRetention } from '../audit/audit-retention';
import { AuditSpool } from '../audit/audit-spool';
import { AuditTrail } from '../audit/audit-trail';
import type { AuditRepository } from '../domain/iam-repository';
import { SHUTDOWN_STEP_GRACE_MS } from '../http/server-lifecycle';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from '../config';

/** The audit trail (batched writes, a disk spool while the database is away) and its retention sweep. */
export async function startAudit(
  config: GatewayConfig,
  repository: AuditRepository,
  logger: Logger,
  metrics: GatewayMetrics,
  cleanups: CleanupStack,
  clock: () => number = Date.now,
): Promise<AuditTrail> {
  const spool = new AuditSpool(config.iam.audit.spoolDir, config.iam.audit.spoolMaxBytes);
  const audit = new AuditTrail(repository, logger, {
    flushIntervalMs: config.iam.audit.flushIntervalMs,
    spool,
    anonymousDenialsPerMinute: config.iam.audit.anonymousDenialsPerMinute,
    // Half the stop's bound of this step tries the database; the other half is the spool's, so what was answered
    // is on disk before the step's bound runs out.
    closeWriteMs: SHUTDOWN_STEP_GRACE_MS / 2,
    now: clock,
    metrics,
  });
  metrics.observeAuditQueue(() => audit.queueDepth);
  metrics.observeAuditSpool(() => spool.bytes, spool.maxBytes);
  // First at a stop, before any step that waits for the database or the token store (a last-seen flush to a silent
  // database would otherwise use up the time this one needs): the events were answered, they must not be lost.
  cleanups.push('audit trail', () => audit.close(), { keepsAnswered: true, boundMs: SHUTDOWN_STEP_GRACE_MS });
  // A spool directory that cannot be read fails the start: its events would otherwise wait there unseen.
  await audit.start();
  const retention = new AuditRetention(repository, logger, config.iam.audit.retentionMs);
  retention.start();
  cleanups.push('audit retention', () => retention.close());
  return audit;
}
