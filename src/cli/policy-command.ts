import { readProvisioningFile } from '../auth/provisioning-file';
import { runPolicyCommand as runPolicyTool, type PolicyCommandIo, type PolicyToolServices, type ReplayData } from '../policy-tools/policy-command';
import type { RecordedDecision } from '../policy-tools/policy-replay';
import { openDatabaseForReading } from './reading-database';
import { loadConfig, parseDuration, type GatewayConfig } from '../config';

/**
 * `iam-gateway policy …` wired to the real configuration loader, provisioning file reader and PostgreSQL (the
 * policy tools themselves know none of them: src/policy-tools/policy-command.ts).
 */
export function runPolicyCommand(args: string[], io: PolicyCommandIo): Promise<number> {
  let config: GatewayConfig | null = null;
  const configOf = (from: PolicyCommandIo): GatewayConfig => (config ??= loadConfig({ env: from.env, cwd: from.cwd }));
  const services: PolicyToolServices = {
    loadSettings: (from) => {
      const { iam } = configOf(from);
      return {
        policyDir: iam.policy.dir,
        provisionFile: iam.provision.file,
        allowPathParameters: iam.gateway.allowPathParameters,
        resolverTimeoutMs: iam.authz.resolverTimeoutMs,
      };
    },
    readProvisioningFile,
    databaseTemplates: (from) => databaseTemplates(configOf(from)),
    openReplay: (from, since) => openReplay(configOf(from), since),
  };
  return runPolicyTool(args, io, services);
}

/** Every template of the configured database (read only: no migration is applied). */
async function databaseTemplates(config: GatewayConfig): Promise<Array<{ versionId: string; permissions: string[] }>> {
  const { MikroOrmIamRepository } = await import('../adapters/postgres/mikro-orm-iam-repository');
  try {
    const { orm, close } = await openDatabaseForReading(config);
    try {
      return await new MikroOrmIamRepository(orm).listTemplates();
    } finally {
      await close();
    }
  } catch (error) {
    throw new Error(`--database: cannot read the templates: ${(error as Error).message}`);
  }
}

/**
 * `policy replay`'s data (src/policy-tools/policy-replay.ts): an engine over today's grants in the gateway's database
 * (PostgreSQL, or the embedded one while the gateway is stopped; read only; its resolver is never called) and the
 * audit trail's denials of the last `since`.
 */
async function openReplay(config: GatewayConfig, since: string | null): Promise<ReplayData> {
  const sinceMs = since === null ? null : parseDuration(since, '--since');
  // Loaded here, not at the top: the other policy commands (diff in CI above all) start without them.
  const [{ MikroOrmIamRepository }, { MikroOrmAdminRepository }, { DecisionEngine }, { GrantProvider }, { recordOfAuditEvent, replayResolvers }] = await Promise.all([
    import('../adapters/postgres/mikro-orm-iam-repository'),
    import('../adapters/postgres/admin-repository'),
    import('../authz/decision-engine'),
    import('../authz/grant-provider'),
    import('../policy-tools/policy-replay'),
  ]);
  // Its grants decide, and its audit trail holds the denials.
  const database = await openDatabaseForReading(config);
  const { orm, close } = database;
  // Every grant is read once and kept for the whole replay: the replay is one snapshot of today's grants.
  const grants = new GrantProvider({ repository: new MikroOrmIamRepository(orm), maxEntries: 100_000, trustCache: () => true });
  const admin = new MikroOrmAdminRepository(orm);
  return {
    engine: new DecisionEngine({ grants, resolvers: replayResolvers }),
    async *auditDecisions(): AsyncIterable<RecordedDecision> {
      if (sinceMs === null) return;
      const from = new Date(Date.now() - sinceMs);
      for (const action of ['authz.deny', 'authz.shadow_deny']) {
        let before: string | null = null;
        for (;;) {
          const page = await admin.listAudit({ limit: 500, before, userId: null, action, since: from });
          for (const event of page.slice(0, 500)) {
            const record = recordOfAuditEvent({ id: event.id, action: event.action, targetId: event.targetId, details: event.details as Record<string, unknown> | null });
            if (record !== null) yield record;
          }
          if (page.length <= 500) break;
          before = page[499]!.id;
        }
      }
    },
    close,
  };
}
