import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { CompiledPolicy } from '../policy/compiled-policy';
import { loadPolicyDirectory } from '../policy/load-policy-directory';
import { PolicyHolder } from '../policy/policy-holder';
import { PolicyReloader } from '../policy/policy-watcher';
import type { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from './config';

/**
 * Loads `iam.policy.dir` (a start with policy errors fails, after logging each with file:line) and starts the
 * hot reload: file events, the periodic checksum and SIGHUP (docs/policy-format.md).
 */
export async function startPolicy(config: GatewayConfig, logger: Logger, metrics: GatewayMetrics, cleanups: CleanupStack): Promise<{ holder: PolicyHolder; reloader: PolicyReloader }> {
  const policy = await loadPolicyOrFail(config, logger);
  metrics.policyReloads.inc({ result: 'success' });
  metrics.policyRoutes.set(policy.routes.length);
  metrics.policyLoadedTimestamp.set(Date.now() / 1000);
  const holder = new PolicyHolder(policy);
  // The alert's signal is the holder's own state, so it says exactly what readiness and /iam/admin/policy say.
  metrics.observePolicyReloadFailing(() => holder.lastError !== null);
  const reloader = new PolicyReloader({
    dir: config.iam.policy.dir,
    holder,
    debounceMs: config.iam.policy.debounceMs,
    pollIntervalMs: config.iam.policy.pollIntervalMs,
    defaultResolverTimeoutMs: config.iam.authz.resolverTimeoutMs,
    upstreamUrl: config.upstream.url,
    logger,
    metrics,
  });
  reloader.start();
  cleanups.push(() => reloader.close());
  // SIGHUP reloads the policies now (e.g. where file events are unreliable).
  const onSighup = (): void => void reloader.reload('SIGHUP');
  process.on('SIGHUP', onSighup);
  cleanups.push(async () => {
    process.off('SIGHUP', onSighup);
  });
  return { holder, reloader };
}

/**
 * Loads `iam.policy.dir`; each issue is logged with file:line (warnings only when `warnings`: the primary of
 * `serve --workers N` checks the directory before forking and leaves the warnings to its workers), and errors fail.
 */
export async function loadPolicyOrFail(config: GatewayConfig, logger: Logger, options: { warnings: boolean } = { warnings: true }): Promise<CompiledPolicy> {
  const loaded = await loadPolicyDirectory(config.iam.policy.dir, { defaultResolverTimeoutMs: config.iam.authz.resolverTimeoutMs, upstreamUrl: config.upstream.url });
  for (const issue of loaded.issues) {
    const where = issue.source ? `${issue.source.file}:${issue.source.line}: ` : '';
    if (issue.severity === 'error') logger.error({ kind: issue.kind }, `policy: ${where}${issue.message}`);
    else if (options.warnings) logger.warn({ kind: issue.kind }, `policy: ${where}${issue.message}`);
  }
  if (!loaded.policy) throw new Error(`policy: ${config.iam.policy.dir} has errors; see the log above`);
  return loaded.policy;
}
