import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/**
 * Counters that protect accounts and mailboxes (CONTRACT §5.3, §14.3, §14.19): kept in the database so
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
  const row = await db.selectFrom('throttle_counters').selectAll().where('key', '=', key).executeTakeFirst();
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

/**
 * Adds one to a fixed-window counter atomically and returns the new state. A window older than
 * `windowSeconds` restarts at 1 (its lock is kept until it runs out).
 */
export async function incrementCounter(db: Kysely<Database>, key: string, now: number, windowSeconds: number): Promise<ThrottleCounter> {
  await db
    .insertInto('throttle_counters')
    .values({ key, count: 1, window_start: now, locked_until: null, updated_at: now })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet((eb) => ({
        count: eb
          .case()
          .when('throttle_counters.window_start', '<=', now - windowSeconds)
          .then(1)
          .else(eb('throttle_counters.count', '+', 1))
          .end(),
        window_start: eb
          .case()
          .when('throttle_counters.window_start', '<=', now - windowSeconds)
          .then(now)
          .else(eb.ref('throttle_counters.window_start'))
          .end(),
        updated_at: now,
      })),
    )
    .execute();
  return (await findCounter(db, key))!;
}

export async function lockCounter(db: Kysely<Database>, key: string, lockedUntil: number): Promise<void> {
  await db.updateTable('throttle_counters').set({ locked_until: lockedUntil }).where('key', '=', key).execute();
}

export async function deleteCounter(db: Kysely<Database>, key: string): Promise<void> {
  await db.deleteFrom('throttle_counters').where('key', '=', key).execute();
}
