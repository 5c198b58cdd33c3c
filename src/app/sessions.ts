import { openTokenStore } from '../adapters/registry';
import { GrantProvider } from '../authz/grant-provider';
import type { IamRepository } from '../domain/iam-repository';
import type { StoreEvent } from '../domain/token-record';
import type { EventSubscription, TokenStore } from '../domain/token-store';
import { TunnelRegistry } from '../gateway/tunnel-registry';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import { ChangeFeed } from '../sessions/change-feed';
import { LastSeenTracker } from '../sessions/last-seen-tracker';
import { RevocationRegistry } from '../sessions/revocation-registry';
import { SessionCache } from '../sessions/session-cache';
import { SessionService } from '../sessions/session-service';
import { EndingSpool, replaySpooledEndings } from '../sessions/ending-spool';
import type { CleanupStack } from './cleanup-stack';
import type { GatewayConfig } from '../config';
import { InstrumentedTokenStore } from '../observability/instrumented-token-store';

/** The session state of one instance and what keeps it true across instances. */
export interface SessionState {
  /** The token store every component uses: the adapter counted at its boundary (instrumented-token-store.ts). */
  store: TokenStore;
  /** The adapter itself (RunningGateway.services.store: tests and the CLI reach Redis details through it). */
  backingStore: TokenStore;
  /** The backend serving it (adapters/registry.ts) and what it adds to readiness's `tokenStore` detail. */
  storeKind: string;
  storeDetail: () => Record<string, unknown>;
  sessions: SessionService;
  grants: GrantProvider;
  /** Open WebSocket tunnels, closed when their session ends or fails a recheck. */
  tunnels: TunnelRegistry;
  subscription: EventSubscription;
  /** True while the store's events channel is subscribed: only then are local caches trusted. */
  channelUp: () => boolean;
  /** Delivers committed changes now (the change feed), for writers that must see them applied. */
  changes: { deliver(): Promise<void> };
  /** Ended sessions and raised user epochs, kept current by the events channel and the change feed. */
  revocations: RevocationRegistry;
}

/**
 * The token store (the backend `redis.url` chooses: adapters/registry.ts), the local caches (sessions, grants) and the
 * two ways a change reaches every instance (docs/threat-model.md, "How revocation and changes reach every
 * instance"): the store's events channel, and the change feed read from PostgreSQL on an interval. The
 * durable revocation record is loaded first (after the endings an earlier stop spooled are recorded), so
 * verification refuses what PostgreSQL says ended.
 */
export async function startSessions(
  config: GatewayConfig,
  deps: { repository: IamRepository; logger: Logger; metrics: GatewayMetrics; cleanups: CleanupStack },
): Promise<SessionState> {
  const { repository, logger, metrics, cleanups } = deps;
  // Endings answered while the database was down and not recorded before a stop: recorded before the
  // revocation record is loaded, so this instance (and, through the feed, every other) refuses them before
  // it serves — even if the token store was restored from a snapshot that still holds their tokens.
  const spool = new EndingSpool(config.iam.audit.spoolDir);
  await replaySpooledEndings(spool, repository, logger);
  const revocationState = await repository.loadRevocationState();
  const revocations = new RevocationRegistry(config.iam.token.ttlMs, config.iam.oidc.revocationMarginMs);
  revocations.load(revocationState);

  const opened = await openTokenStore(
    {
      url: config.redis.url,
      prefix: config.iam.token.storePrefix,
      logger,
      slidingExpiry: config.iam.token.idleTimeoutMs > 0,
      refuseEvictingPolicy: true,
      waitReplicas: config.redis.waitReplicas,
      waitTimeoutMs: config.redis.waitTimeoutMs,
    },
  );
  const backingStore = opened.store;
  cleanups.push('token store', () => backingStore.close());
  if (opened.evictions) {
    const { policy, evictedKeys } = opened.evictions;
    metrics.tokenStoreEvictionPolicy.set({ policy: policy ?? 'unknown' }, 1);
    metrics.observeTokenStoreEvictions(evictedKeys);
  }
  // Round trips, errors and channel events counted for every store kind (iam_store_operations_total, iam_revocation_*).
  const store = new InstrumentedTokenStore(backingStore, metrics);

  let subscription: EventSubscription | null = null;
  const channelUp = (): boolean => subscription?.connected === true;
  const tunnels = new TunnelRegistry({ recheckIntervalMs: config.upstream.websocketRecheckIntervalMs, channelUp, logger });
  const cache = config.iam.token.cache.enabled ? new SessionCache(config.iam.token.cache.maxEntries, channelUp, config.iam.token.cache.revalidateMs) : null;
  if (cache) metrics.observeSessionCache(() => cache.size);
  const grants = new GrantProvider({ repository, maxEntries: config.iam.authz.abilityCacheSize, maxBytes: config.iam.authz.abilityCacheBytes, trustCache: channelUp });
  const lastSeen = new LastSeenTracker(repository, logger);
  lastSeen.start();
  cleanups.push('last-seen times', () => lastSeen.close());
  let feed: ChangeFeed | null = null;
  const changes = { deliver: () => feed?.deliver() ?? Promise.resolve() };
  const sessions = new SessionService({
    store,
    repository,
    cache,
    lastSeen,
    logger,
    ttlMs: config.iam.token.ttlMs,
    idleTimeoutMs: config.iam.token.idleTimeoutMs,
    maxSessionsPerUser: config.iam.token.maxSessionsPerUser,
    revocations,
    changes,
    spool,
  });
  // An ending the database has not recorded was spooled before it was answered: a stop cut short here loses nothing.
  cleanups.push('ended sessions', async () => void (await sessions.close()));
  const applyChange = (event: StoreEvent): void => {
    sessions.handleEvent(event);
    grants.handleEvent(event);
    // After the caches: a tunnel rechecked on this event must not be vouched for by a stale entry.
    tunnels.handleEvent(event);
  };
  subscription = await store.subscribe(applyChange, (connected) => {
    metrics.storeChannelConnected.set(connected ? 1 : 0);
    // While the channel was down, events may have been missed: nothing cached before stays trusted.
    if (connected) {
      cache?.clear();
      grants.clear();
      // What was recorded while the channel was down (an ending whose token-store step failed) is read and delivered
      // now, not at the next interval.
      void feed?.tick();
    }
    tunnels.channelChanged(connected);
    logger[connected ? 'info' : 'warn']({}, connected ? 'store events channel connected' : 'store events channel lost: local caches bypassed');
  });
  metrics.storeChannelConnected.set(subscription.connected ? 1 : 0);
  const subscribed = subscription;
  cleanups.push('store events channel', () => subscribed.close());
  // The change feed: committed changes delivered until done, and read by every instance on an interval (#11.25).
  const started = new ChangeFeed({ repository, store, apply: applyChange, logger, intervalMs: config.iam.changes.pollIntervalMs, cursor: revocationState.cursor });
  feed = started;
  started.start();
  cleanups.push('change feed', () => started.close());
  // Start-time provisioning's changes (and any left undelivered by a stopped instance) go out now (#11.26).
  void started.tick();
  const storeDetail = opened.readinessDetail ?? (() => ({}));
  return { store, backingStore, storeKind: opened.kind, storeDetail, sessions, grants, tunnels, subscription, channelUp, changes, revocations };
}
