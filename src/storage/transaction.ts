import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** Runs `work` in a transaction: the caller's, when `db` already is one, else a new one. */
export const inTransaction = <T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> =>
  db.isTransaction ? work(db) : db.transaction().execute(work);
