import { describe, expect, it } from 'vitest';
import { findCounter, releaseCounterSlot, reserveCounterSlot, saveCounter } from '../../src/storage/repos/throttle.js';
import { useMigratedTestStorage } from '../helpers/app.js';

// The lockout's slots (docs/reference/rest-api.md#throttling): taken before a password is evaluated, given back only for one
// that never was (docs/adr/0009-password-line.md), and only in the window they were taken in.
describe('counter slots', () => {
  const database = useMigratedTestStorage();
  const WINDOW = 900;
  const MAX = 5;
  const reserve = (key: string, now: number) => reserveCounterSlot(database.storage.db, key, now, WINDOW, MAX);
  const count = async (key: string) => (await findCounter(database.storage.db, key))?.count;

  it('a slot given back in its window frees it for the next attempt', async () => {
    const taken = [];
    for (let i = 0; i < MAX; i++) taken.push(await reserve('slots:a', 1_000 + i));
    expect(taken.map((t) => t?.slot)).toEqual([1, 2, 3, 4, 5]);
    expect(taken.every((t) => t?.windowStart === 1_000)).toBe(true);
    expect(await reserve('slots:a', 1_010)).toBeNull(); // all taken
    await releaseCounterSlot(database.storage.db, 'slots:a', taken[2]!.windowStart);
    expect(await count('slots:a')).toBe(4);
    expect((await reserve('slots:a', 1_011))?.slot).toBe(5);
  });

  it('a slot taken in a window that has since restarted is not given back to the new one', async () => {
    const old = await reserve('slots:b', 2_000);
    const next = await reserve('slots:b', 2_000 + WINDOW); // the window is over: it starts again at 1
    expect(next).toEqual({ slot: 1, windowStart: 2_000 + WINDOW });
    await releaseCounterSlot(database.storage.db, 'slots:b', old!.windowStart);
    expect(await count('slots:b')).toBe(1);
  });

  it('giving back changes nothing once the counter is gone, and never goes below zero', async () => {
    await releaseCounterSlot(database.storage.db, 'slots:none', 3_000);
    expect(await count('slots:none')).toBeUndefined();
    await saveCounter(database.storage.db, { key: 'slots:c', count: 0, windowStart: 3_000, lockedUntil: null, updatedAt: 3_000 });
    await releaseCounterSlot(database.storage.db, 'slots:c', 3_000);
    expect(await count('slots:c')).toBe(0);
  });

  it('a lock in force stays when a slot is given back', async () => {
    await saveCounter(database.storage.db, { key: 'slots:d', count: MAX, windowStart: 4_000, lockedUntil: 4_000 + WINDOW, updatedAt: 4_000 });
    await releaseCounterSlot(database.storage.db, 'slots:d', 4_000);
    const counter = await findCounter(database.storage.db, 'slots:d');
    expect(counter).toMatchObject({ count: MAX - 1, lockedUntil: 4_000 + WINDOW });
    expect(await reserve('slots:d', 4_001)).toBeNull();
  });
});
