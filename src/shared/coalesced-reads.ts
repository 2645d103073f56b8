/** The reads of one batch: who waits for each key. */
interface Batch<K, V> {
  waiting: Map<K, Array<{ resolve(value: V | undefined): void; reject(error: unknown): void }>>;
  sent: boolean;
}

/**
 * Point reads made in the same turn of the event loop, answered by one read of all their keys: the
 * reads that arrive before the loop's check phase (setImmediate) form a batch, sent then or as soon as
 * it holds `maxBatch` keys. A key asked twice in a batch is read once. Every read is sent after it
 * was asked, so what it answers is never older than the read it replaces. If the batched read fails,
 * every read of the batch fails with its error.
 */
export class CoalescedReads<K, V> {
  private pending: Batch<K, V> | undefined;

  constructor(
    /** Reads every key of a batch; a key absent from the answer reads as undefined. */
    private readonly readMany: (keys: K[]) => Promise<Map<K, V>>,
    private readonly maxBatch: number,
  ) {
    if (!(maxBatch >= 1)) throw new Error('maxBatch must be at least 1');
  }

  read(key: K): Promise<V | undefined> {
    let batch = this.pending;
    if (!batch) {
      const created: Batch<K, V> = { waiting: new Map(), sent: false };
      this.pending = batch = created;
      setImmediate(() => this.send(created));
    }
    const result = new Promise<V | undefined>((resolve, reject) => {
      const waiters = batch.waiting.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else batch.waiting.set(key, [{ resolve, reject }]);
    });
    if (batch.waiting.size >= this.maxBatch) this.send(batch);
    return result;
  }

  private send(batch: Batch<K, V>): void {
    if (batch.sent) return;
    batch.sent = true;
    if (this.pending === batch) this.pending = undefined;
    let answer: Promise<Map<K, V>>;
    try {
      answer = this.readMany([...batch.waiting.keys()]);
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.then(
      (found) => {
        for (const [key, waiters] of batch.waiting) for (const waiter of waiters) waiter.resolve(found.get(key));
      },
      (error: unknown) => {
        for (const waiters of batch.waiting.values()) for (const waiter of waiters) waiter.reject(error);
      },
    );
  }
}
