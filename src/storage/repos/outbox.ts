import type { Insertable, Kysely } from 'kysely';
import type { Database, OutboxRow, OutboxTable } from '../schema.js';
import { COLUMNS } from '../columns.js';

export type { OutboxRow };

/** The mail outbox: written in the caller's transaction, drained by the background sender. */

export async function insertOutboxMail(db: Kysely<Database>, row: Insertable<OutboxTable>): Promise<void> {
  await db.insertInto('outbox').values(row).execute();
}

/** Mails due for a delivery attempt, oldest first (candidates only: claim each before sending). */
export async function listDueMail(db: Kysely<Database>, now: number, limit: number): Promise<OutboxRow[]> {
  return db
    .selectFrom('outbox')
    .select(COLUMNS.outbox)
    .where('sent_at', 'is', null)
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', now)]))
    .orderBy('next_attempt_at')
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** Claims a mail for one sender until `lockedUntil`; false when another sender holds or sent it. */
export async function claimMail(db: Kysely<Database>, id: string, now: number, lockedUntil: number): Promise<boolean> {
  const result = await db
    .updateTable('outbox')
    .set({ locked_until: lockedUntil })
    .where('id', '=', id)
    .where('sent_at', 'is', null)
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', now)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function markMailSent(db: Kysely<Database>, id: string, now: number): Promise<void> {
  await db.updateTable('outbox').set((eb) => ({ sent_at: now, locked_until: null, attempts: eb('attempts', '+', 1), last_error: null })).where('id', '=', id).execute();
}

export async function markMailFailed(db: Kysely<Database>, id: string, nextAttemptAt: number, error: string): Promise<void> {
  await db
    .updateTable('outbox')
    .set((eb) => ({ locked_until: null, attempts: eb('attempts', '+', 1), next_attempt_at: nextAttemptAt, last_error: error.slice(0, 500) }))
    .where('id', '=', id)
    .execute();
}

/** Gives up on a mail (kept for the record, never retried). */
export async function markMailAbandoned(db: Kysely<Database>, id: string, error: string): Promise<void> {
  await db.updateTable('outbox').set({ locked_until: null, next_attempt_at: Number.MAX_SAFE_INTEGER, last_error: error.slice(0, 500) }).where('id', '=', id).execute();
}

/** The newest mails, optionally only those to one address (stored as given; compared case-insensitively). */
export async function listRecentMail(db: Kysely<Database>, limit: number, to?: string): Promise<OutboxRow[]> {
  let query = db.selectFrom('outbox').select(COLUMNS.outbox);
  if (to !== undefined) query = query.where((eb) => eb(eb.fn('lower', ['to_address']), '=', to.toLowerCase()));
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}

export async function findMail(db: Kysely<Database>, id: string): Promise<OutboxRow | undefined> {
  return db.selectFrom('outbox').select(COLUMNS.outbox).where('id', '=', id).executeTakeFirst();
}

export async function countPendingMail(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('outbox').select((eb) => eb.fn.countAll<number>().as('n')).where('sent_at', 'is', null).executeTakeFirstOrThrow();
  return Number(row.n);
}
