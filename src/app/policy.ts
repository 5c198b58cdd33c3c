import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { CompiledPolicy, PolicyIssue } from '../policy/compiled-policy';
import { loadPolicyDirectory } from '../policy/load-policy-directory';
import { CandidatePolicyHolder } from '../policy/candidate-holder';
import { PolicyHolder } from '../policy/policy-holder';
import { PolicyReloader } from '../policy/policy-watcher';
import type { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from '../config';

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
  const reloader = new PolicyReloader({ ...reloadSettings(config, logger), dir: config.iam.policy.dir, holder, metrics });
  startReloading(reloader, cleanups);
  return { holder, reloader };
}

/** What every policy load compiles with: the resolvers' default timeout, and the host a resolver path is on. */
function compileSettings(config: GatewayConfig): { defaultResolverTimeoutMs: number; upstreamUrl: string } {
  return { defaultResolverTimeoutMs: config.iam.authz.resolverTimeoutMs, upstreamUrl: config.upstream.url };
}

/** What the live and the candidate reloaders share. */
function reloadSettings(config: GatewayConfig, logger: Logger) {
  return { ...compileSettings(config), debounceMs: config.iam.policy.debounceMs, pollIntervalMs: config.iam.policy.pollIntervalMs, logger };
}

/** Starts a reloader (file events, the periodic check) and its SIGHUP trigger; both stop with the gateway. */
function startReloading(reloader: PolicyReloader, cleanups: CleanupStack): void {
  reloader.start();
  cleanups.push('policy reloader', () => reloader.close());
  // SIGHUP reloads the policies now (e.g. where file events are unreliable).
  const onSighup = (): void => void reloader.reload('SIGHUP');
  process.on('SIGHUP', onSighup);
  cleanups.push('SIGHUP handler', async () => {
    process.off('SIGHUP', onSighup);
  });
}

/**
 * Loads `iam.policy.candidate-dir` when one is configured and hot-reloads it like the live policy (file events, the
 * periodic check, SIGHUP), with metrics of its own. A candidate that is missing or broken is logged and kept as an
 * error (shown on the console's Policy page), never a reason not to start: it is never enforced and readiness does
 * not depend on it.
 */
export async function startCandidatePolicy(
  config: GatewayConfig,
  logger: Logger,
  metrics: GatewayMetrics,
  cleanups: CleanupStack,
): Promise<{ holder: CandidatePolicyHolder; reloader: PolicyReloader } | null> {
  const dir = config.iam.policy.candidateDir;
  if (dir === null) return null;
  const holder = new CandidatePolicyHolder(dir);
  const candidateMetrics = { policyReloads: metrics.policyCandidateReloads, policyRoutes: metrics.policyCandidateRoutes, policyLoadedTimestamp: metrics.policyCandidateLoadedTimestamp };
  const reloader = new PolicyReloader({ ...reloadSettings(config, logger), dir, holder, role: 'candidate', metrics: candidateMetrics });
  // Loaded directly, as the live policy is (a reload waits on unref'd timers, which would let a starting process exit).
  const loaded = await loadPolicyDirectory(dir, compileSettings(config));
  logPolicyIssues(logger, 'candidate policy', loaded.issues, true);
  if (loaded.policy) {
    holder.swap(loaded.policy);
    metrics.policyCandidateReloads.inc({ result: 'success' });
    metrics.policyCandidateRoutes.set(loaded.policy.routes.length);
    metrics.policyCandidateLoadedTimestamp.set(Date.now() / 1000);
    logger.info({ dir, hash: loaded.policy.hash, routes: loaded.policy.routes.length }, 'candidate policy: deciding beside the live policy (never enforced)');
  } else {
    holder.reject(loaded.issues);
    metrics.policyCandidateReloads.inc({ result: 'failure' });
    logger.error({ dir, errors: loaded.issues.filter((issue) => issue.severity === 'error').length }, 'candidate policy: not loaded (the gateway serves the live policy alone until the candidate directory is fixed)');
  }
  startReloading(reloader, cleanups);
  return { holder, reloader };
}

/**
 * Loads `iam.policy.dir`; each issue is logged with file:line (warnings only when `warnings`: the primary of
 * `serve --workers N` checks the directory before forking and leaves the warnings to its workers), and errors fail.
 */
export async function loadPolicyOrFail(config: GatewayConfig, logger: Logger, options: { warnings: boolean } = { warnings: true }): Promise<CompiledPolicy> {
  const loaded = await loadPolicyDirectory(config.iam.policy.dir, compileSettings(config));
  logPolicyIssues(logger, 'policy', loaded.issues, options.warnings);
  if (!loaded.policy) throw new Error(`policy: ${config.iam.policy.dir} has errors; see the log above`);
  return loaded.policy;
}

/** One log line per issue with file:line, prefixed `policy:` or `candidate policy:`; warnings only when `warnings`. */
function logPolicyIssues(logger: Logger, name: string, issues: readonly PolicyIssue[], warnings: boolean): void {
  for (const issue of issues) {
    const where = issue.source ? `${issue.source.file}:${issue.source.line}: ` : '';
    if (issue.severity === 'error') logger.error({ kind: issue.kind }, `${name}: ${where}${issue.message}`);
    else if (warnings) logger.warn({ kind: issue.kind }, `${name}: ${where}${issue.message}`);
  }
}
