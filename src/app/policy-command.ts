import { readProvisioningFile } from '../api/provisioning-file';
import { runPolicyCommand as runPolicyTool, type PolicyCommandIo, type PolicyToolServices } from '../policy-tools/policy-command';
import { loadConfig, type GatewayConfig } from './config';

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
  };
  return runPolicyTool(args, io, services);
}

/** Every template of the configured database (read only: no migration is applied). */
async function databaseTemplates(config: GatewayConfig): Promise<Array<{ versionId: string; permissions: string[] }>> {
  if (config.database.url === null) throw new Error('--database needs a PostgreSQL database (DATABASE_URL or database.url)');
  const [{ createOrm }, { MikroOrmIamRepository }] = await Promise.all([import('../adapters/postgres/orm'), import('../adapters/postgres/mikro-orm-iam-repository')]);
  try {
    const orm = await createOrm({ url: config.database.url, poolSize: 1, historyTable: config.iam.schema.historyTable, embedded: false, connectTimeoutMs: 5000 });
    try {
      return await new MikroOrmIamRepository(orm).listTemplates();
    } finally {
      await orm.close(true);
    }
  } catch (error) {
    throw new Error(`--database: cannot read the templates: ${(error as Error).message}`);
  }
}
