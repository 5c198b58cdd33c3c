/**
 * #11.25: the change feed's reader and deliverer (src/sessions/change-feed.ts) over a fake repository: rows
 * that commit out of id order are not skipped, and a row whose delivery failed is delivered by a later round.
 */
import type { ChangeRow } from '../../src/domain/changes';
import { ChangeFeed } from '../../src/sessions/change-feed';
import type { StoreEvent } from '../../src/domain/token-record';

const event = (userId: string): StoreEvent => ({ type: 'authorization-changed', userId });

function fakeFeed(visible: ChangeRow[], options: { publish?: (event: StoreEvent) => Promise<void> } = {}) {
  const applied: string[] = [];
  const delivered = new Set<number>();
  const published: string[] = [];
  const feed = new ChangeFeed({
    repository: {
      listChanges: async (afterId, alsoIds, limit) =>
        visible.filter((row) => row.id > afterId || alsoIds.includes(row.id)).sort((x, y) => x.id - y.id).slice(0, limit),
      claimChanges: async () => visible.filter((row) => !delivered.has(row.id)),
      markChangesDelivered: async (ids) => ids.forEach((id) => delivered.add(id)),
    },
    store: {
      deleteToken: async () => true,
      publish: options.publish ?? (async (e) => void published.push((e as { userId: string }).userId)),
    },
    apply: (e) => applied.push((e as { userId: string }).userId),
    logger: { warn: () => undefined, info: () => undefined },
    intervalMs: 1000,
    cursor: 0,
  });
  return { feed, applied, delivered, published };
}

describe('#11.25 change feed', () => {
  it('#11.25: a row whose transaction commits after a later id was read is still applied', async () => {
    const visible: ChangeRow[] = [
      { id: 1, event: event('u1') },
      { id: 3, event: event('u3') },
    ];
    const { feed, applied } = fakeFeed(visible);
    await feed.read();
    expect(applied).toEqual(['u1', 'u3']);
    visible.push({ id: 2, event: event('u2') }); // id 2 was taken first but committed last
    await feed.read();
    expect(applied).toEqual(['u1', 'u3', 'u2']);
    await feed.read();
    expect(applied).toEqual(['u1', 'u3', 'u2']);
  });

  it('#11.25: a row whose publish failed stays undelivered and a later round delivers it', async () => {
    let up = false;
    const published: string[] = [];
    const { feed, delivered } = fakeFeed([{ id: 1, event: event('u1') }], {
      publish: async (e) => {
        if (!up) throw new Error('Redis down');
        published.push((e as { userId: string }).userId);
      },
    });
    await expect(feed.deliver()).resolves.toBeUndefined();
    expect(delivered.has(1)).toBe(false);
    up = true;
    await feed.tick();
    expect(delivered.has(1)).toBe(true);
    expect(published).toEqual(['u1']);
  });
});
