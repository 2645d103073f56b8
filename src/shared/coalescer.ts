/** The calls of one batch: who waits for each key. */
interface Batch<K, V> {
  waiting: Map<K, Array<{ resolve(value: V | undefined): void; reject(error: unknown): void }>>;
  sent: boolean;
}

/**
 * Calls made in the same turn of the event loop, answered by one run over all their keys (a read of many
 * rows, or a write of many, in one statement): the calls made before the loop's check phase
 * (setImmediate) form a batch, run then or as soon as it holds `maxBatch` keys. A key given twice in a
 * batch is run once (keys are compared as Map keys: objects by identity). Every batch runs after each of
 * its calls was made, so what it answers is never older than what a call of its own would have.
 * If a batch of several keys fails, each key is run again alone, so one call's failure is its own: a
 * value the database refuses (a NUL byte in a client id) must not fail the other requests it was
 * batched with. So `run` must change nothing when it fails (one statement, or one transaction).
 */
export class Coalescer<K, V> {
  private pending: Batch<K, V> | undefined;

  constructor(
    /** Runs every key of a batch; a key absent from the answer is answered undefined. */
    private readonly run: (keys: K[]) => Promise<Map<K, V>>,
    private readonly options: { maxBatch: number },
  ) {
    if (!(options.maxBatch >= 1)) throw new Error('maxBatch must be at least 1');
  }

  submit(key: K): Promise<V | undefined> {
    let batch = this.pending;
    if (!batch) {
      const created: Batch<K, V> = { waiting: new Map(), sent: false };
      this.pending = batch = created;
      setImmediate(() => this.send(created));
    }
    const answer = new Promise<V | undefined>((resolve, reject) => {
      const waiters = batch.waiting.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else batch.waiting.set(key, [{ resolve, reject }]);
    });
    if (batch.waiting.size >= this.options.maxBatch) this.send(batch);
    return answer;
  }

  private send(batch: Batch<K, V>): void {
    if (batch.sent) return;
    batch.sent = true;
    if (this.pending === batch) this.pending = undefined;
    const keys = [...batch.waiting.keys()];
    this.runSafely(keys).then(
      (found) => {
        for (const [key, waiters] of batch.waiting) for (const waiter of waiters) waiter.resolve(found.get(key));
      },
      (error: unknown) => {
        if (keys.length > 1) {
          for (const [key, waiters] of batch.waiting) this.send({ waiting: new Map([[key, waiters]]), sent: false });
          return;
        }
        for (const waiters of batch.waiting.values()) for (const waiter of waiters) waiter.reject(error);
      },
    );
  }

  private runSafely(keys: K[]): Promise<Map<K, V>> {
    try {
      return this.run(keys);
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
