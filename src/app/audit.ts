import { AuditRetention } from '../audit/audit-retention';
import { AuditSpool } from '../audit/audit-spool';
import { AuditTrail } from '../audit/audit-trail';
import type { IamRepository } from '../domain/iam-repository';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from './config';

/** The audit trail (batched writes, a disk spool while the database is away) and its retention sweep. */
export function startAudit(
  config: GatewayConfig,
  repository: IamRepository,
  logger: Logger,
  metrics: GatewayMetrics,
  cleanups: CleanupStack,
  clock: () => number = Date.now,
): AuditTrail {
  const spool = new AuditSpool(config.iam.audit.spoolDir, config.iam.audit.spoolMaxBytes);
  const audit = new AuditTrail(repository, logger, {
    flushIntervalMs: config.iam.audit.flushIntervalMs,
    spool,
    anonymousDenialsPerMinute: config.iam.audit.anonymousDenialsPerMinute,
    now: clock,
    metrics,
  });
  metrics.observeAuditQueue(() => audit.queueDepth);
  metrics.observeAuditSpool(() => spool.bytes, spool.maxBytes);
  audit.start();
  cleanups.push(() => audit.close());
  const retention = new AuditRetention(repository, logger, config.iam.audit.retentionMs);
  retention.start();
  cleanups.push(() => retention.close());
  return audit;
}
