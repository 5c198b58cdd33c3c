import type { IamRepository } from '../domain/iam-repository';
import type { TokenStore } from '../domain/token-store';
import type { PolicyHolder } from '../policy/policy-holder';
import type { ReadinessCheck } from './management-server';

/**
 * `/health/ready` on the management port: database, token store, events channel and policy. Unsubscribed,
 * revocations from other instances are not heard: caches are bypassed, and readiness says so.
 */
export function readinessChecks(deps: {
  repository: IamRepository;
  databaseKind: string;
  store: TokenStore;
  /** The token store's backend and what it adds to the detail (Redis: topology, eviction policy). */
  storeKind: string;
  storeDetail: () => Record<string, unknown>;
  channelUp: () => boolean;
  policy: PolicyHolder;
}): ReadinessCheck[] {
  const { repository, store, storeKind, storeDetail, channelUp, policy } = deps;
  return [
    { name: 'database', check: async () => (await repository.ping(), { ok: true, detail: { kind: deps.databaseKind } }) },
    {
      name: 'tokenStore',
      check: async () => (await store.ping(), { ok: true, detail: { kind: storeKind, eventsConnected: channelUp(), ...storeDetail() } }),
    },
    { name: 'eventsChannel', check: async () => ({ ok: channelUp(), detail: { connected: channelUp() } }) },
    { name: 'policy', check: async () => ({ ok: true, detail: policy.describe() }) },
  ];
}
