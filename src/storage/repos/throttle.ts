import type { Kysely } from 'kysely';
import { precompiled } from '../precompiled.js';
import type { Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

/**
 * Counters that protect accounts and mailboxes: kept in the database so
 * every process shares them. Keys are strings such as `login:<normalised email>` or
 * `mail:<kind>:<normalised email>`, whether or not an account exists.
 */
export interface ThrottleCounter {
  key: string;
  count: number;
  windowStart: number;
  lockedUntil: number | null;
  updatedAt: number;
}

export async function findCounter(db: Kysely<Database>, key: string): Promise<ThrottleCounter | undefined> {
  const row = await db.selectFrom('throttle_counters').select(COLUMNS.throttle_counters).where('key', '=', key).executeTakeFirst();
  return row && { key: row.key, count: row.count, windowStart: row.window_start, lockedUntil: row.locked_until, updatedAt: row.updated_at };
}

export async function saveCounter(db: Kysely<Database>, counter: ThrottleCounter): Promise<void> {
  const values = { count: counter.count, window_start: counter.windowStart, locked_until: counter.lockedUntil, updated_at: counter.updatedAt };
  await db
    .insertInto('throttle_counters')
    .values({ key: counter.key, ...values })
    .onConflict((oc) => oc.column('key').doUpdateSet(values))
    .execute();
}

const deleteCounterRow = precompiled((db, key: string) => db.deleteFrom('throttle_counters').where('key', '=', key));

export async function deleteCounter(db: Kysely<Database>, key: string): Promise<void> {
  await deleteCounterRow(db, key);
}

/**
 * Takes one slot of a budget of `max` per window, atomically (one statement: the insert, or the
 * update under the row lock, on both dialects): a window older than `windowSeconds`, or one whose lock
 * has run out, starts again at 1; otherwise the count goes up by one only while it is below `max` and
 * no lock is in force. Returns the slot's number (1…max), or null when the budget is spent or the key
 * is locked (nothing is changed then). This is what makes "at most `max` per window" hold for
 * concurrent requests and across processes: the slot is taken before the guarded work runs. The
 * window's start comes with the slot, to give it back in that window only (`releaseCounterSlot`).
 */
export async function reserveCounterSlot(
  db: Kysely<Database>,
  key: string,
  now: number,
  windowSeconds: number,
  max: number,
): Promise<{ slot: number; windowStart: number } | null> {
  const row = (await upsertCounterSlot(db, key, now, now - windowSeconds, max)).rows[0];
  return row ? { slot: row.count, windowStart: row.window_start } : null;
}

const releaseSlot = precompiled((db, key: string, windowStart: number) =>
  db
    .updateTable('throttle_counters')
    .set((eb) => ({ count: eb('count', '-', 1) }))
    .where('key', '=', key)
    .where('window_start', '=', windowStart)
    .where('count', '>', 0),
);

/**
 * Gives back one slot taken by `reserveCounterSlot` in the window that began at `windowStart`, for work
 * that never ran. A window restarted meanwhile (or a counter cleared) is left as it is: the slot went
 * with it. A lock in force stays. Windows are told apart by their start in seconds, so a counter cleared
 * (a correct password) and started again within the same second takes the slot back from the new one:
 * one attempt more, at most, in a window that a correct password had just opened anyway.
 */
export async function releaseCounterSlot(db: Kysely<Database>, key: string, windowStart: number): Promise<void> {
  await releaseSlot(db, key, windowStart);
}

// Precompiled: every password sign-in takes a slot. `staleBefore`: a window that started then or earlier is over.
const upsertCounterSlot = precompiled((db, key: string, now: number, staleBefore: number, max: number) =>
  db
    .insertInto('throttle_counters')
    .values({ key, count: 1, window_start: now, locked_until: null, updated_at: now })
    .onConflict((oc) =>
      oc
        .column('key')
        .doUpdateSet((eb) => {
          const stale = eb.or([
            eb('throttle_counters.window_start', '<=', staleBefore),
            eb.and([eb('throttle_counters.locked_until', 'is not', null), eb('throttle_counters.locked_until', '<=', now)]),
          ]);
          return {
            count: eb.case().when(stale).then(1).else(eb('throttle_counters.count', '+', 1)).end(),
            window_start: eb.case().when(stale).then(now).else(eb.ref('throttle_counters.window_start')).end(),
            locked_until: eb.case().when(stale).then(eb.val<number | null>(null)).else(eb.ref('throttle_counters.locked_until')).end(),
            updated_at: now,
          };
        })
        .where((eb) =>
          // A lock in force refuses, whatever the window; a lock run out restarts the window.
          eb.or([
            eb('throttle_counters.locked_until', '<=', now),
            eb.and([
              eb('throttle_counters.locked_until', 'is', null),
              eb.or([eb('throttle_counters.count', '<', max), eb('throttle_counters.window_start', '<=', staleBefore)]),
            ]),
          ]),
        ),
    )
    .returning(['count', 'window_start']),
);

/** Sets `locked_until` only while the key still holds at least `minCount` (a counter cleared or restarted meanwhile stays unlocked). True when it locked. */
export async function lockCounterAtCount(db: Kysely<Database>, key: string, minCount: number, lockedUntil: number): Promise<boolean> {
  const result = await db
    .updateTable('throttle_counters')
    .set({ locked_until: lockedUntil })
    .where('key', '=', key)
    .where('count', '>=', minCount)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Adds `delta` (may be negative; the count never drops below 0) to a plain counter, creating it at
 * `max(delta, 0)`. One statement, atomic on both dialects. For counters whose key names its own
 * window (e.g. one key per hour), so no window logic is applied here.
 */
export async function addToCounter(db: Kysely<Database>, key: string, now: number, delta: number): Promise<void> {
  await db
    .insertInto('throttle_counters')
    .values({ key, count: Math.max(delta, 0), window_start: now, locked_until: null, updated_at: now })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet((eb) => ({
        count: eb.case().when(eb(eb('throttle_counters.count', '+', delta), '<', 0)).then(0).else(eb('throttle_counters.count', '+', delta)).end(),
        updated_at: now,
      })),
    )
    .execute();
}

/** The counters among `keys` that exist (any order). */
export async function findCounters(db: Kysely<Database>, keys: string[]): Promise<ThrottleCounter[]> {
  if (keys.length === 0) return [];
  const rows = await db.selectFrom('throttle_counters').select(COLUMNS.throttle_counters).where('key', 'in', keys).execute();
  return rows.map((row) => ({ key: row.key, count: row.count, windowStart: row.window_start, lockedUntil: row.locked_until, updatedAt: row.updated_at }));
}
