import type { GatewayConfig } from '../config';
import { openDatabase } from '../adapters/postgres/database';
import { loadPolicyDirectory } from '../policy/load-policy-directory';
import type { CompiledPolicy } from '../policy/compiled-policy';
import { openTokenStore, tokenStoreBackendFor } from '../adapters/registry';
import type { EventSubscription, TokenStore } from '../domain/token-store';
import { DecisionEngine } from '../authz/decision-engine';
import { GrantProvider } from '../authz/grant-provider';
import { ResourceResolverClient } from '../authz/resource-resolver';

/** The gateway's decision engine running inside a Node host. */
export interface EmbeddedAuthorizationEngine {
  engine: DecisionEngine;
  /** The policy of `iam.policy.dir`, for `engine.decideRequest` (loaded once). */
  policy: CompiledPolicy;
  close(): Promise<void>;
}

/**
 * Opens the same engine the gateway enforces with, for hosts written in Node that want `decide()` /
 * `require()` in-process for logic a route policy cannot express. It reads the gateway's database; with a token
 * store whose events channel reaches other processes (Redis) it follows the gateway's events so cached permissions
 * stay current, otherwise it caches nothing and reads permissions on every decision.
 */
export async function openAuthorizationEngine(config: GatewayConfig): Promise<EmbeddedAuthorizationEngine> {
  const loaded = await loadPolicyDirectory(config.iam.policy.dir, { defaultResolverTimeoutMs: config.iam.authz.resolverTimeoutMs, upstreamUrl: config.upstream.url });
  if (!loaded.policy) {
    const errors = loaded.issues.filter((i) => i.severity === 'error').map((i) => `${i.source ? `${i.source.file}:${i.source.line}: ` : ''}${i.message}`);
    throw new Error(`policy: ${errors.join('; ')}`);
  }
  const database = await openDatabase(config);
  let subscription: EventSubscription | null = null;
  let store: TokenStore | null = null;
  const grants = new GrantProvider({
    repository: database.repository,
    maxEntries: config.iam.authz.abilityCacheSize,
    trustCache: () => subscription?.connected === true,
  });
  try {
    if (tokenStoreBackendFor(config.redis.url).capabilities.events) {
      const opened = await openTokenStore({ url: config.redis.url, prefix: config.iam.token.storePrefix });
      store = opened.store;
      subscription = await opened.store.subscribe((event) => grants.handleEvent(event), (connected) => connected && grants.clear());
    }
  } catch (error) {
    await store?.close();
    await database.close();
    throw error;
  }
  const resolvers = new ResourceResolverClient();
  return {
    engine: new DecisionEngine({ grants, resolvers }),
    policy: loaded.policy,
    async close() {
      await subscription?.close();
      await store?.close();
      await resolvers.close();
      await database.close();
    },
  };
}
