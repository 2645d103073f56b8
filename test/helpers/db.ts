import type { Kysely } from 'kysely';
import type { Database } from '../../src/storage/schema.js';

/** Row count of a table, optionally filtered by column equality (test assertions on stored state). */
export async function countAll<T extends keyof Database>(
  db: Kysely<Database>,
  table: T,
  where: Partial<Record<string, string | number>> = {},
): Promise<number> {
  let q = db.selectFrom(table as keyof Database).select((eb) => eb.fn.countAll<number>().as('n'));
  for (const [column, value] of Object.entries(where)) q = q.where(column as never, '=', value as never);
  const row = await q.executeTakeFirstOrThrow();
  return Number(row.n);
}
