import { AuditRetention } from '../audit/audit-retention';
import { AuditSpool } from '../audit/audit-spool';
import { AuditTrail } from '../audit/audit-trail';
import type { IamRepository } from '../domain/iam-repository';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from './config';

/** The audit trail (batched writes, a disk spool while the database is away) and its retention sweep. */
export function startAudit(config: GatewayConfig, repository: IamRepository, logger: Logger, metrics: GatewayMetrics, cleanups: CleanupStack): AuditTrail {
  const audit = new AuditTrail(repository, logger, {
    flushIntervalMs: config.iam.audit.flushIntervalMs,
    spool: new AuditSpool(config.iam.audit.spoolDir),
    anonymousDenialsPerMinute: config.iam.audit.anonymousDenialsPerMinute,
    metrics,
  });
  metrics.observeAuditQueue(() => audit.queueDepth);
  audit.start();
  cleanups.push(() => audit.close());
  const retention = new AuditRetention(repository, logger, config.iam.audit.retentionMs);
  retention.start();
  cleanups.push(() => retention.close());
  return audit;
}
