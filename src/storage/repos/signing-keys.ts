import type { Kysely } from 'kysely';
import type { Database, SigningKeyRow } from '../schema.js';
import { COLUMNS } from '../columns.js';

export async function listSigningKeys(db: Kysely<Database>): Promise<SigningKeyRow[]> {
  return db.selectFrom('signing_keys').select(COLUMNS.signing_keys).orderBy('created_at', 'asc').orderBy('kid', 'asc').execute();
}

/**
 * Inserts first keys for algorithms that have no active key, as one statement: the unique index on
 * the active key per algorithm makes concurrent starts single-winner (a loser's rows are skipped, and
 * it loads the winner's keys).
 */
export async function insertFirstSigningKeys(db: Kysely<Database>, rows: SigningKeyRow[]): Promise<void> {
  if (rows.length) await db.insertInto('signing_keys').values(rows).onConflict((oc) => oc.doNothing()).execute();
}

export async function insertSigningKeys(db: Kysely<Database>, rows: SigningKeyRow[]): Promise<void> {
  if (rows.length) await db.insertInto('signing_keys').values(rows).execute();
}

/** Retires every active key of the given algorithms (their public halves stay published for a while). */
export async function retireSigningKeys(db: Kysely<Database>, algs: string[], at: number, exceptKids: string[]): Promise<void> {
  let q = db.updateTable('signing_keys').set({ retired_at: at }).where('retired_at', 'is', null).where('alg', 'in', algs as SigningKeyRow['alg'][]);
  if (exceptKids.length) q = q.where('kid', 'not in', exceptKids);
  await q.execute();
}
