import type { Kysely } from 'kysely';
import { newId } from '../../shared/ids.js';
import type { Database } from '../schema.js';

/**
 * A person's previous password hashes (docs/guides/password-policy.md, "Reuse"): written when a
 * password is replaced, at most `keep` kept per person, removed with the account.
 */

/** The `limit` most recent previous hashes, newest first. */
export async function listPreviousPasswordHashes(db: Kysely<Database>, userId: string, limit: number): Promise<string[]> {
  if (limit <= 0) return [];
  const rows = await db.selectFrom('password_history').select('password_hash').where('user_id', '=', userId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
  return rows.map((row) => row.password_hash);
}

/** Records a replaced hash, then drops all but the newest `keep`. */
export async function recordPreviousPasswordHash(db: Kysely<Database>, userId: string, passwordHash: string, now: number, keep: number): Promise<void> {
  await db.insertInto('password_history').values({ id: newId('pwh'), user_id: userId, password_hash: passwordHash, created_at: now }).execute();
  const kept = db.selectFrom('password_history').select('id').where('user_id', '=', userId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(keep);
  await db.deleteFrom('password_history').where('user_id', '=', userId).where('id', 'not in', kept).execute();
}

export async function deletePasswordHistoryOfUser(db: Kysely<Database>, userId: string): Promise<void> {
  await db.deleteFrom('password_history').where('user_id', '=', userId).execute();
}
