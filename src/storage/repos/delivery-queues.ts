import type { Kysely, Selectable } from 'kysely';
import { COLUMNS } from '../columns.js';
import type { Database } from '../schema.js';

/**
 * The two outbox tables of HTTP deliveries (webhooks, back-channel logout) are leased the same way
 * (src/shared/outbox-deliverer.ts): pending rows due now and not leased, claimed one at a time.
 */
export type DeliveryQueue = 'webhook_deliveries' | 'logout_deliveries';

/** Rows of `queue` due for an attempt, oldest first (candidates only: claim each before sending). */
export async function listDueDeliveries<Q extends DeliveryQueue>(db: Kysely<Database>, queue: Q, now: number, limit: number): Promise<Selectable<Database[Q]>[]> {
  // The two tables share these columns; Kysely cannot type a query over a union of tables.
  const q = db as unknown as Kysely<Pick<Database, 'logout_deliveries'>>;
  const rows = await q
    .selectFrom(queue as 'logout_deliveries')
    .select(COLUMNS[queue] as (typeof COLUMNS)['logout_deliveries'])
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', now)]))
    .orderBy('next_attempt_at')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows as unknown as Selectable<Database[Q]>[];
}

/** Claims a row of `queue` for one deliverer until `lockedUntil`; false when another holds it or it is settled. */
export async function claimDelivery(db: Kysely<Database>, queue: DeliveryQueue, id: string, now: number, lockedUntil: number): Promise<boolean> {
  const q = db as unknown as Kysely<Pick<Database, 'logout_deliveries'>>;
  const result = await q
    .updateTable(queue as 'logout_deliveries')
    .set({ locked_until: lockedUntil })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', now)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
