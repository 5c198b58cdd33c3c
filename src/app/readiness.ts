import { RedisTokenStore } from '../adapters/redis/redis-token-store';
import type { IamRepository } from '../domain/iam-repository';
import type { TokenStore } from '../domain/token-store';
import type { PolicyHolder } from '../policy/policy-holder';
import { InstrumentedTokenStore } from '../observability/instrumented-token-store';
import type { ReadinessCheck } from './management-server';

/**
 * `/health/ready` on the management port: database, token store, events channel and policy. Unsubscribed,
 * revocations from other instances are not heard: caches are bypassed, and readiness says so.
 */
export function readinessChecks(deps: { repository: IamRepository; databaseKind: string; store: TokenStore; channelUp: () => boolean; policy: PolicyHolder }): ReadinessCheck[] {
  const { repository, store, channelUp, policy } = deps;
  const backing = store instanceof InstrumentedTokenStore ? store.inner : store;
  return [
    { name: 'database', check: async () => (await repository.ping(), { ok: true, detail: { kind: deps.databaseKind } }) },
    {
      name: 'tokenStore',
      check: async () => (await store.ping(), { ok: true, detail: { kind: store.kind, eventsConnected: channelUp(), ...(backing instanceof RedisTokenStore ? { topology: backing.topology, evictionPolicy: backing.evictionPolicy } : {}) } }),
    },
    { name: 'eventsChannel', check: async () => ({ ok: channelUp(), detail: { connected: channelUp() } }) },
    { name: 'policy', check: async () => ({ ok: true, detail: policy.describe() }) },
  ];
}
