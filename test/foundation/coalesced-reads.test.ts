import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { CoalescedReads } from '../../src/shared/coalesced-reads.js';

/** A CoalescedReads over a table, recording each batched read's keys (a read may be held until released). */
function reader(table: Record<string, number>, maxBatch = 64, hold = false) {
  const batches: string[][] = [];
  const releases: Array<() => void> = [];
  const reads = new CoalescedReads<string, number>(async (keys) => {
    batches.push(keys);
    if (hold) await new Promise<void>((resolve) => releases.push(resolve));
    return new Map(keys.filter((k) => k in table).map((k) => [k, table[k]!]));
  }, maxBatch);
  return { reads, batches, releases };
}

describe('CoalescedReads', () => {
  it('reads asked in one turn are one batched read, a key asked twice read once; each answered with its own value', async () => {
    const { reads, batches } = reader({ a: 1, b: 2 });
    const answers = await Promise.all(['a', 'b', 'a', 'missing'].map((k) => reads.read(k)));
    expect(answers).toEqual([1, 2, 1, undefined]);
    expect(batches).toEqual([['a', 'b', 'missing']]);
  });

  it('reads of different turns are different batches', async () => {
    const { reads, batches } = reader({ a: 1, b: 2 });
    const first = reads.read('a');
    await nextTurn();
    const second = reads.read('b');
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    expect(batches).toEqual([['a'], ['b']]);
  });

  it('a batch is sent once it holds maxBatch keys', async () => {
    const { reads, batches } = reader({ a: 1, b: 2, c: 3, d: 4, e: 5 }, 2);
    const answers = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((k) => reads.read(k)));
    expect(answers).toEqual([1, 2, 3, 4, 5]);
    expect(batches).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
  });

  it('a read asked while a batch is in flight waits for a batch sent after it', async () => {
    const { reads, batches, releases } = reader({ a: 1 }, 64, true);
    const first = reads.read('a');
    await nextTurn();
    expect(batches).toEqual([['a']]);
    const second = reads.read('a');
    await nextTurn();
    expect(batches).toEqual([['a'], ['a']]);
    for (const release of releases) release();
    expect(await Promise.all([first, second])).toEqual([1, 1]);
  });

  it('a failed batched read fails every read of its batch, and only those', async () => {
    let fail: 'reject' | 'throw' | undefined = 'reject';
    const reads = new CoalescedReads<string, number>((keys) => {
      if (fail === 'throw') throw new Error('thrown');
      if (fail === 'reject') return Promise.reject(new Error('rejected'));
      return Promise.resolve(new Map(keys.map((k) => [k, 1])));
    }, 64);
    const rejected = await Promise.allSettled([reads.read('a'), reads.read('b')]);
    expect(rejected.map((r) => r.status === 'rejected' && (r.reason as Error).message)).toEqual(['rejected', 'rejected']);
    fail = 'throw';
    const thrown = await Promise.allSettled([reads.read('a')]);
    expect(thrown.map((r) => r.status === 'rejected' && (r.reason as Error).message)).toEqual(['thrown']);
    fail = undefined;
    expect(await reads.read('a')).toBe(1);
  });

  it('refuses a batch size under 1', () => {
    for (const size of [0, -1, Number.NaN]) expect(() => new CoalescedReads(async () => new Map(), size)).toThrow();
  });
});
