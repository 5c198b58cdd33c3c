/** CoalescedReads (src/adapters/redis/coalesced-reads.ts): one multi-key read per event-loop turn, failing closed. */
import { CoalescedReads } from '../../src/adapters/redis/coalesced-reads';

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function recordingStore(values: Record<string, string>) {
  const batches: string[][] = [];
  const readMany = async (keys: string[]): Promise<Array<string | null>> => {
    batches.push([...keys]);
    return keys.map((key) => values[key] ?? null);
  };
  return { batches, readMany };
}

describe('CoalescedReads', () => {
  it('sends the reads of one turn as one batch, in order, and answers each caller its own value', async () => {
    const store = recordingStore({ a: '1', b: '2', c: '3' });
    const reads = new CoalescedReads(store.readMany);
    const answers = await Promise.all(['a', 'x', 'c', 'b', 'a'].map((key) => reads.read(key)));
    expect(answers).toEqual(['1', null, '3', '2', '1']);
    expect(store.batches).toEqual([['a', 'x', 'c', 'b', 'a']]);
  });

  it('starts a new batch for reads of a later turn', async () => {
    const store = recordingStore({ a: '1', b: '2' });
    const reads = new CoalescedReads(store.readMany);
    const first = reads.read('a');
    await nextTurn();
    const second = reads.read('b');
    expect(await Promise.all([first, second])).toEqual(['1', '2']);
    expect(store.batches).toEqual([['a'], ['b']]);
  });

  it('sends a full batch at once instead of growing it without bound', async () => {
    const store = recordingStore({});
    const reads = new CoalescedReads(store.readMany, 3);
    const pending = ['a', 'b', 'c', 'd', 'e'].map((key) => reads.read(key));
    expect(store.batches).toEqual([['a', 'b', 'c']]);
    await Promise.all(pending);
    expect(store.batches).toEqual([['a', 'b', 'c'], ['d', 'e']]);
  });

  it('rejects every read of a batch whose read fails (fail closed)', async () => {
    const failure = new Error('store down');
    const reads = new CoalescedReads(() => Promise.reject(failure));
    const outcomes = await Promise.allSettled(['a', 'b', 'c'].map((key) => reads.read(key)));
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const outcome of outcomes) expect((outcome as PromiseRejectedResult).reason).toBe(failure);
  });

  it('rejects every read when the batch read throws synchronously', async () => {
    const reads = new CoalescedReads(() => {
      throw new Error('not connected');
    });
    await expect(Promise.all([reads.read('a'), reads.read('b')])).rejects.toThrow('not connected');
  });

  it('never hands a value to the wrong caller when the answer has the wrong length', async () => {
    const reads = new CoalescedReads(async () => ['only-one']);
    const outcomes = await Promise.allSettled([reads.read('a'), reads.read('b')]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
  });

  it('keeps serving after a failed batch', async () => {
    let fail = true;
    const reads = new CoalescedReads(async (keys) => {
      if (fail) throw new Error('blip');
      return keys.map((key) => `v-${key}`);
    });
    await expect(reads.read('a')).rejects.toThrow('blip');
    fail = false;
    expect(await reads.read('a')).toBe('v-a');
  });

  it('rejects only the reads a multi-key read answered with an error (one shard failing over), the rest get their values', async () => {
    const reads = new CoalescedReads(async (keys) => keys.map((key) => (key.startsWith('down') ? new Error('shard failing over') : `v-${key}`)));
    const outcomes = await Promise.allSettled(['a', 'down-1', 'b', 'down-2'].map((key) => reads.read(key)));
    expect(outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : (outcome.reason as Error).message))).toEqual([
      'v-a',
      'shard failing over',
      'v-b',
      'shard failing over',
    ]);
  });
});
