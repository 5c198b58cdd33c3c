/**
 * Coalesces key reads into one multi-key read per event-loop turn.
 *
 * Every proxied request whose session is not in the local cache needs its token record from the store. Under
 * load many requests arrive in the same turn (one socket callback each); sending one `GET` per request costs
 * a socket write and a reply read per request, which on a small machine costs more than everything else the
 * gateway does. Reads asked for during one turn are sent together as one `MGET` from `setImmediate`, i.e.
 * after the turn's socket callbacks and before the loop waits again: no timer, no added wait beyond the
 * current turn, and still one store round trip per request.
 *
 * Fail closed: when the batch read fails, every read in it rejects with that error; a multi-key read may
 * also answer an `Error` for some keys (a Cluster shard that is failing over), and only their reads reject.
 */
export class CoalescedReads {
  private keys: string[] = [];
  private waiters: Array<{ resolve: (value: string | null) => void; reject: (error: unknown) => void }> = [];
  private scheduled = false;

  /**
   * @param readMany one multi-key read; answers one value (or null) per key, in order.
   * @param maxBatch a batch is sent as soon as it holds this many keys.
   */
  constructor(
    private readonly readMany: (keys: string[]) => Promise<Array<string | null | Error>>,
    private readonly maxBatch = 256,
  ) {}

  /** The value of `key`, read with whatever else is read in this turn. */
  read(key: string): Promise<string | null> {
    return new Promise((resolve, reject) => {
      this.keys.push(key);
      this.waiters.push({ resolve, reject });
      if (this.keys.length >= this.maxBatch) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flushScheduled);
      }
    });
  }

  private readonly flushScheduled = (): void => {
    this.scheduled = false;
    this.flush();
  };

  private flush(): void {
    if (this.keys.length === 0) return;
    const keys = this.keys;
    const waiters = this.waiters;
    this.keys = [];
    this.waiters = [];
    let pending: Promise<Array<string | null | Error>>;
    try {
      pending = this.readMany(keys);
    } catch (error) {
      for (const waiter of waiters) waiter.reject(error);
      return;
    }
    pending.then(
      (values) => {
        if (!Array.isArray(values) || values.length !== keys.length) {
          const error = new Error(`multi-key read answered ${Array.isArray(values) ? values.length : typeof values} values for ${keys.length} keys`);
          for (const waiter of waiters) waiter.reject(error);
          return;
        }
        for (let i = 0; i < waiters.length; i++) {
          const value = values[i];
          if (value instanceof Error) waiters[i]!.reject(value);
          else waiters[i]!.resolve(value ?? null);
        }
      },
      (error: unknown) => {
        for (const waiter of waiters) waiter.reject(error);
      },
    );
  }
}
