import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/**
 * Keys seen once until they expire (the DPoP `jti` replay cache when Redis is not configured): every
 * process shares the table, and one statement decides the first sighting.
 */

/** Records `key` until `expiresAt`; true only when it was not recorded (or its record had expired). */
export async function recordFirstSighting(db: Kysely<Database>, key: string, now: number, expiresAt: number): Promise<boolean> {
  const result = await db
    .insertInto('seen_once')
    .values({ key, expires_at: expiresAt })
    .onConflict((oc) => oc.column('key').doUpdateSet({ expires_at: expiresAt }).where('seen_once.expires_at', '<=', now))
    .executeTakeFirst();
  return result.numInsertedOrUpdatedRows === 1n;
}
