import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Coalescer } from '../../src/shared/coalescer.js';

/** A Coalescer over a table, recording each batch's keys (a batch may be held until released). */
function reader(table: Record<string, number>, maxBatch = 64, hold = false) {
  const batches: string[][] = [];
  const releases: Array<() => void> = [];
  const reads = new Coalescer<string, number>(async (keys) => {
    batches.push(keys);
    if (hold) await new Promise<void>((resolve) => releases.push(resolve));
    return new Map(keys.filter((k) => k in table).map((k) => [k, table[k]!]));
  }, { maxBatch });
  return { reads, batches, releases };
}

describe('Coalescer', () => {
  it('reads asked in one turn are one batched read, a key asked twice read once; each answered with its own value', async () => {
    const { reads, batches } = reader({ a: 1, b: 2 });
    const answers = await Promise.all(['a', 'b', 'a', 'missing'].map((k) => reads.submit(k)));
    expect(answers).toEqual([1, 2, 1, undefined]);
    expect(batches).toEqual([['a', 'b', 'missing']]);
  });

  it('reads of different turns are different batches', async () => {
    const { reads, batches } = reader({ a: 1, b: 2 });
    const first = reads.submit('a');
    await nextTurn();
    const second = reads.submit('b');
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    expect(batches).toEqual([['a'], ['b']]);
  });

  it('a batch is sent once it holds maxBatch keys', async () => {
    const { reads, batches } = reader({ a: 1, b: 2, c: 3, d: 4, e: 5 }, 2);
    const answers = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((k) => reads.submit(k)));
    expect(answers).toEqual([1, 2, 3, 4, 5]);
    expect(batches).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
  });

  it('a read asked while a batch is in flight waits for a batch sent after it', async () => {
    const { reads, batches, releases } = reader({ a: 1 }, 64, true);
    const first = reads.submit('a');
    await nextTurn();
    expect(batches).toEqual([['a']]);
    const second = reads.submit('a');
    await nextTurn();
    expect(batches).toEqual([['a'], ['a']]);
    for (const release of releases) release();
    expect(await Promise.all([first, second])).toEqual([1, 1]);
  });

  it('a failed run fails its calls (each run again alone first), and only those', async () => {
    let fail: 'reject' | 'throw' | undefined = 'reject';
    const reads = new Coalescer<string, number>((keys) => {
      if (fail === 'throw') throw new Error('thrown');
      if (fail === 'reject') return Promise.reject(new Error('rejected'));
      return Promise.resolve(new Map(keys.map((k) => [k, 1])));
    }, { maxBatch: 64 });
    const rejected = await Promise.allSettled([reads.submit('a'), reads.submit('b')]);
    expect(rejected.map((r) => r.status === 'rejected' && (r.reason as Error).message)).toEqual(['rejected', 'rejected']);
    fail = 'throw';
    const thrown = await Promise.allSettled([reads.submit('a')]);
    expect(thrown.map((r) => r.status === 'rejected' && (r.reason as Error).message)).toEqual(['thrown']);
    fail = undefined;
    expect(await reads.submit('a')).toBe(1);
  });

  it('a failed batch runs each of its keys alone, so only the failing key fails', async () => {
    const batches: string[][] = [];
    const reads = new Coalescer<string, number>(
      async (keys) => {
        batches.push(keys);
        if (keys.includes('bad')) throw new Error('bad key');
        return new Map(keys.map((k) => [k, k.length]));
      },
      { maxBatch: 64 },
    );
    const settled = await Promise.allSettled(['a', 'bad', 'bb', 'a'].map((k) => reads.submit(k)));
    expect(settled.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([1, 'bad key', 2, 1]);
    expect(batches).toEqual([['a', 'bad', 'bb'], ['a'], ['bad'], ['bb']]);
  });

  it('refuses a batch size under 1', () => {
    for (const size of [0, -1, Number.NaN]) expect(() => new Coalescer(async () => new Map(), { maxBatch: size })).toThrow();
  });
});
