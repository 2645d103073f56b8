import type { Insertable, Kysely } from 'kysely';
import { precompiled } from '../precompiled.js';
import type { Database, OneTimeTokenRow, OneTimeTokensTable } from '../schema.js';
import { COLUMNS } from '../columns.js';

export type { OneTimeTokenRow };

/**
 * Single-use secrets (magic links with their code, password resets, email verification codes, and
 * other features' tickets), stored hashed. Consumption is a conditional UPDATE: exactly one caller wins.
 */

export async function insertOneTimeToken(db: Kysely<Database>, row: Insertable<OneTimeTokensTable>): Promise<void> {
  await db.insertInto('one_time_tokens').values(row).execute();
}

export async function findOneTimeTokenByHash(db: Kysely<Database>, kind: string, tokenHash: string): Promise<OneTimeTokenRow | undefined> {
  return db.selectFrom('one_time_tokens').select(COLUMNS.one_time_tokens).where('kind', '=', kind).where('token_hash', '=', tokenHash).executeTakeFirst();
}

/** A live (unconsumed, unexpired) token of a kind by the hash of its secret. */
export async function findLiveOneTimeTokenByHash(db: Kysely<Database>, kind: string, tokenHash: string, now: number): Promise<OneTimeTokenRow | undefined> {
  return db
    .selectFrom('one_time_tokens')
    .select(COLUMNS.one_time_tokens)
    .where('kind', '=', kind)
    .where('token_hash', '=', tokenHash)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
}

/** Finds and consumes a live token by hash atomically: exactly one caller gets the row, everyone else undefined. */
export async function takeOneTimeTokenByHash(db: Kysely<Database>, kind: string, tokenHash: string, now: number): Promise<OneTimeTokenRow | undefined> {
  const row = await findLiveOneTimeTokenByHash(db, kind, tokenHash, now);
  if (!row) return undefined;
  return (await consumeOneTimeToken(db, row.id, now)) ? { ...row, consumed_at: now } : undefined;
}

export async function findOneTimeTokenById(db: Kysely<Database>, id: string): Promise<OneTimeTokenRow | undefined> {
  return db.selectFrom('one_time_tokens').select(COLUMNS.one_time_tokens).where('id', '=', id).executeTakeFirst();
}

/** The newest live (unconsumed, unexpired) token of a kind for an email address. */
export async function findLiveOneTimeTokenByEmail(db: Kysely<Database>, kind: string, email: string, now: number): Promise<OneTimeTokenRow | undefined> {
  return db
    .selectFrom('one_time_tokens')
    .select(COLUMNS.one_time_tokens)
    .where('kind', '=', kind)
    .where('email', '=', email)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .executeTakeFirst();
}

/** The live tokens of a kind for a user, newest first. */
const liveOfUser = (db: Kysely<Database>, kind: string, userId: string, now: number) =>
  db
    .selectFrom('one_time_tokens')
    .select(COLUMNS.one_time_tokens)
    .where('kind', '=', kind)
    .where('user_id', '=', userId)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc');

/** The newest live token of a kind for a user. */
export async function findLiveOneTimeTokenByUser(db: Kysely<Database>, kind: string, userId: string, now: number): Promise<OneTimeTokenRow | undefined> {
  return liveOfUser(db, kind, userId, now).executeTakeFirst();
}

/** Every live token of a kind for a user, newest first (a user has few: enrolments in progress). */
export async function listLiveOneTimeTokensOfUser(db: Kysely<Database>, kind: string, userId: string, now: number): Promise<OneTimeTokenRow[]> {
  return liveOfUser(db, kind, userId, now).execute();
}

/** Consumes a live token. Returns whether this caller won (false: used, expired, exhausted or unknown). */
export async function consumeOneTimeToken(db: Kysely<Database>, id: string, now: number, maxAttempts?: number): Promise<boolean> {
  let q = db.updateTable('one_time_tokens').set({ consumed_at: now }).where('id', '=', id).where('consumed_at', 'is', null).where('expires_at', '>', now);
  if (maxAttempts !== undefined) q = q.where('attempts', '<', maxAttempts);
  const result = await q.executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Counts one wrong answer against a live token (atomically) and returns the attempts used so far, or
 * null when the token was no longer live. A token that reaches `maxAttempts` is consumed (voided).
 */
export async function recordOneTimeTokenFailure(db: Kysely<Database>, id: string, now: number, maxAttempts: number): Promise<number | null> {
  const result = await db
    .updateTable('one_time_tokens')
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('id', '=', id)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .where('attempts', '<', maxAttempts)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return null;
  const row = await findOneTimeTokenById(db, id);
  const attempts = row?.attempts ?? maxAttempts;
  if (attempts >= maxAttempts) await db.updateTable('one_time_tokens').set({ consumed_at: now }).where('id', '=', id).where('consumed_at', 'is', null).execute();
  return attempts;
}

/** Voids every live token of a kind for an email address (a newer one replaces them). */
export async function voidOneTimeTokensByEmail(db: Kysely<Database>, kind: string, email: string, now: number): Promise<void> {
  await db.updateTable('one_time_tokens').set({ consumed_at: now }).where('kind', '=', kind).where('email', '=', email).where('consumed_at', 'is', null).execute();
}

/** Voids every live token of a kind for a user (e.g. reset tokens at a password change or sign-in). */
// Precompiled: every password sign-in voids the user's reset tokens (a reset link must not outlive a sign-in).
const updateVoidOfUser = precompiled((db, kind: string, userId: string, now: number) =>
  db.updateTable('one_time_tokens').set({ consumed_at: now }).where('kind', '=', kind).where('user_id', '=', userId).where('consumed_at', 'is', null),
);

export async function voidOneTimeTokensOfUser(db: Kysely<Database>, kind: string, userId: string, now: number): Promise<void> {
  await updateVoidOfUser(db, kind, userId, now);
}

/** Voids every live token of the given kinds for a user (an account claimed by its mailbox owner). */
export async function voidOneTimeTokensOfUserOfKinds(db: Kysely<Database>, kinds: string[], userId: string, now: number): Promise<void> {
  if (kinds.length === 0) return;
  await db.updateTable('one_time_tokens').set({ consumed_at: now }).where('kind', 'in', kinds).where('user_id', '=', userId).where('consumed_at', 'is', null).execute();
}
