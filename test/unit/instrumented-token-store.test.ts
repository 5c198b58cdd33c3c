/**
 * The token store as the gateway uses it (src/observability/instrumented-token-store.ts): every round trip counted by
 * operation and result, every published event stamped with `sentAt` and counted as sent, every event heard on
 * the channel counted as received and timed; the adapter's promise is handed back untouched.
 */
import { MemoryTokenStore } from '../../src/adapters/memory/memory-token-store';
import { withInProcessEvents } from '../../src/adapters/in-process-events';
import { InstrumentedTokenStore, STORE_OPERATIONS } from '../../src/observability/instrumented-token-store';
import type { StoreEvent, TokenRecord } from '../../src/domain/token-record';
import { StoreUnavailableError, type TokenStore } from '../../src/domain/token-store';
import { createMetrics, type GatewayMetrics } from '../../src/observability/metrics';

let metrics: GatewayMetrics;
let inner: TokenStore;
let store: InstrumentedTokenStore;

beforeEach(() => {
  metrics = createMetrics({ collectDefaults: false });
  inner = withInProcessEvents(new MemoryTokenStore({ prefix: 'unit' }));
  store = new InstrumentedTokenStore(inner, metrics);
});
afterEach(async () => {
  await inner.close();
});

async function value(metric: keyof GatewayMetrics, labels: Record<string, string> = {}): Promise<number> {
  const data = await (metrics[metric] as { get(): Promise<{ values: Array<{ labels: Record<string, unknown>; value: number; metricName?: string }> }> }).get();
  const match = data.values.find((entry) => Object.entries(labels).every(([key, wanted]) => entry.labels[key] === wanted) && (entry.metricName === undefined || !/_bucket$|_sum$/.test(entry.metricName)));
  return match?.value ?? 0;
}

const ops = (operation: string, result: 'ok' | 'error'): Promise<number> => value('storeOperations', { operation, result });
/** Lets the counting reactions (registered beside the caller's) run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function record(sessionId: string): TokenRecord {
  return {
    sessionId,
    principal: { userId: 'u-1', identityId: 'i-1', identityDomain: 'local', activeProfileId: null, authorizationVersion: 1 },
    clientType: 'WEB',
    createdAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 60_000).toISOString(),
    idleTimeoutMs: 0,
  };
}

describe('iam_store_operations_total', () => {
  it('has an ok and an error series at 0 for every operation from the start (increase() sees the first error)', async () => {
    for (const operation of STORE_OPERATIONS) {
      const series = (await metrics.storeOperations.get()).values.filter((entry) => entry.labels.operation === operation);
      expect(series.map((entry) => [entry.labels.result, entry.value]).sort()).toEqual([
        ['error', 0],
        ['ok', 0],
      ]);
    }
  });

  it('counts each operation once per call, as ok', async () => {
    await store.putToken('h1', record('s1'));
    expect(await store.getToken('h1')).not.toBeNull();
    expect(await store.getToken('absent')).toBeNull();
    await store.listUserTokens('u-1');
    await store.deleteToken('h1', 'u-1', 's1');
    await store.hit('k', 1000);
    await store.peek('k');
    await store.takeCounters(['k2'], [5], 1000);
    await store.releaseCounter('k2');
    await store.resetCounter('k');
    await store.ping();
    await store.purge();
    await settle();
    expect(await ops('put', 'ok')).toBe(1);
    expect(await ops('get', 'ok')).toBe(2); // a miss is an answer, not an error
    expect(await ops('list', 'ok')).toBe(1);
    expect(await ops('delete', 'ok')).toBe(1);
    expect(await ops('rate_limit', 'ok')).toBe(5);
    expect(await ops('ping', 'ok')).toBe(1);
    expect(await ops('purge', 'ok')).toBe(1);
    for (const operation of STORE_OPERATIONS) expect(await ops(operation, 'error')).toBe(0);
  });

  it('counts a rejected call as error, and the caller still gets the rejection (once, handled)', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await inner.close(); // every call now rejects with StoreUnavailableError
      await expect(store.getToken('h1')).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.putToken('h1', record('s1'))).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.publish({ type: 'template-changed', versionId: 'v1' })).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.takeCounters(['k'], [1], 1000)).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await settle();
      expect(await ops('get', 'error')).toBe(1);
      expect(await ops('put', 'error')).toBe(1);
      expect(await ops('publish', 'error')).toBe(1);
      expect(await ops('rate_limit', 'error')).toBe(1);
      expect(await ops('ping', 'error')).toBe(1);
      expect(await ops('get', 'ok')).toBe(0);
      // A failed publish was not sent.
      expect(await value('revocationEvents', { direction: 'sent', type: 'template-changed' })).toBe(0);
      await settle();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('hands back the adapter’s own getToken promise (nothing chained in between on the hot path)', () => {
    const answer = Promise.resolve(null);
    const fake = { prefix: 'fake', getToken: () => answer } as unknown as TokenStore;
    const counted = new InstrumentedTokenStore(fake, createMetrics({ collectDefaults: false }));
    expect(counted.getToken('h')).toBe(answer);
  });
});

describe('iam_revocation_events_total and iam_revocation_propagation_seconds', () => {
  it('stamps sentAt on what it publishes, counts it sent, and counts and times it when heard', async () => {
    const heard: StoreEvent[] = [];
    await store.subscribe((event) => heard.push(event));
    const before = Date.now();
    await store.publish({ type: 'session-ended', sessionId: 's1', tokenHash: 'h1', userId: 'u-1', reason: 'logout' });
    await settle();
    expect(await value('revocationEvents', { direction: 'sent', type: 'session-ended' })).toBe(1);
    expect(heard).toHaveLength(1);
    expect(heard[0]).toMatchObject({ type: 'session-ended', sessionId: 's1' });
    expect(heard[0]!.sentAt).toBeGreaterThanOrEqual(before);
    expect(heard[0]!.sentAt).toBeLessThanOrEqual(Date.now());
    expect(await value('revocationEvents', { direction: 'received', type: 'session-ended' })).toBe(1);
    const histogram = await metrics.revocationPropagation.get();
    expect(histogram.values.find((entry) => entry.metricName === 'iam_revocation_propagation_seconds_count')?.value).toBe(1);
  });

  it('times an event from the publisher’s clock (now − sentAt), never below 0; an event without sentAt is counted, not timed', async () => {
    await store.subscribe(() => undefined);
    // Published by another (older) instance straight on the channel: no sentAt.
    await inner.publish({ type: 'authorization-changed', userId: 'u-1' });
    // Published 2 s ago by an instance whose clock agrees, and by one whose clock is ahead.
    await inner.publish({ type: 'authorization-changed', userId: 'u-1', sentAt: Date.now() - 2000 });
    await inner.publish({ type: 'authorization-changed', userId: 'u-1', sentAt: Date.now() + 60_000 });
    await settle();
    expect(await value('revocationEvents', { direction: 'received', type: 'authorization-changed' })).toBe(3);
    const values = (await metrics.revocationPropagation.get()).values;
    expect(values.find((entry) => entry.metricName === 'iam_revocation_propagation_seconds_count')?.value).toBe(2);
    const sum = values.find((entry) => entry.metricName === 'iam_revocation_propagation_seconds_sum')!.value;
    expect(sum).toBeGreaterThanOrEqual(2);
    expect(sum).toBeLessThan(3);
  });

  it('labels an event type it does not know as other (bounded labels)', async () => {
    await store.subscribe(() => undefined);
    await inner.publish({ type: 'from-a-newer-version' } as unknown as StoreEvent);
    await settle();
    expect(await value('revocationEvents', { direction: 'received', type: 'other' })).toBe(1);
  });

  it('counts the subscription itself as a subscribe round trip', async () => {
    await store.subscribe(() => undefined);
    await settle();
    expect(await ops('subscribe', 'ok')).toBe(1);
  });
});
