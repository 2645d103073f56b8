import type { ExpressionBuilder, Kysely } from 'kysely';
import { precompiled } from '../precompiled.js';
import type { Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

/** Second factors: the authenticator app (TOTP) and one-time recovery codes of a user. */

export interface TotpFactor {
  userId: string;
  secretSealed: string;
  confirmedAt: number | null;
  lastStep: number | null;
}

export async function findTotpFactor(db: Kysely<Database>, userId: string): Promise<TotpFactor | undefined> {
  const row = await db.selectFrom('totp_factors').select(COLUMNS.totp_factors).where('user_id', '=', userId).executeTakeFirst();
  return row && { userId: row.user_id, secretSealed: row.secret_sealed, confirmedAt: row.confirmed_at, lastStep: row.last_step };
}

/**
 * The authenticator app confirmed by its first code (time step `step`). An unconfirmed row a version
 * before enrolments moved to `one_time_tokens` left behind is replaced; a confirmed factor never is:
 * false when the user has one.
 */
export async function insertConfirmedTotp(db: Kysely<Database>, userId: string, secretSealed: string, step: number, now: number): Promise<boolean> {
  await db.deleteFrom('totp_factors').where('user_id', '=', userId).where('confirmed_at', 'is', null).execute();
  const result = await db
    .insertInto('totp_factors')
    .values({ user_id: userId, secret_sealed: secretSealed, confirmed_at: now, last_step: step, created_at: now })
    .onConflict((oc) => oc.column('user_id').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

/**
 * Accepts a code of the confirmed authenticator app at time step `step` once: the step must be later
 * than the last accepted one. Exactly one concurrent caller wins.
 */
export async function acceptTotpStep(db: Kysely<Database>, userId: string, step: number): Promise<boolean> {
  const result = await db
    .updateTable('totp_factors')
    .set({ last_step: step })
    .where('user_id', '=', userId)
    .where('confirmed_at', 'is not', null)
    .where((eb) => eb.or([eb('last_step', 'is', null), eb('last_step', '<', step)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function deleteTotpFactor(db: Kysely<Database>, userId: string): Promise<boolean> {
  const result = await db.deleteFrom('totp_factors').where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

// Recovery codes -------------------------------------------------------------------------------------

/** Replaces all of a user's recovery codes. */
export async function replaceRecoveryCodes(db: Kysely<Database>, userId: string, codeHashes: string[], now: number): Promise<void> {
  await db.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
  if (codeHashes.length === 0) return;
  await db
    .insertInto('recovery_codes')
    .values(codeHashes.map((codeHash) => ({ code_hash: codeHash, user_id: userId, created_at: now, used_at: null })))
    .execute();
}

/** Uses a recovery code once; exactly one concurrent caller wins. */
export async function useRecoveryCode(db: Kysely<Database>, userId: string, codeHash: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('recovery_codes')
    .set({ used_at: now })
    .where('code_hash', '=', codeHash)
    .where('user_id', '=', userId)
    .where('used_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function countUnusedRecoveryCodes(db: Kysely<Database>, userId: string): Promise<number> {
  const row = await db
    .selectFrom('recovery_codes')
    .select((eb) => eb.fn.countAll<string | number>().as('n'))
    .where('user_id', '=', userId)
    .where('used_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function deleteRecoveryCodes(db: Kysely<Database>, userId: string): Promise<void> {
  await db.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
}

/**
 * Deletes every credential a user added beside the password: the authenticator app (confirmed or not),
 * the recovery codes and every passkey (account-wide or an app's). For an operator's reset of lost
 * factors, and for the claim of an account by its mailbox owner. Returns what was removed.
 */
export async function deleteFactorsOfUser(db: Kysely<Database>, userId: string): Promise<{ totp: boolean; passkeys: number; recoveryCodes: number }> {
  const totp = await db.deleteFrom('totp_factors').where('user_id', '=', userId).where('confirmed_at', 'is not', null).executeTakeFirst();
  await db.deleteFrom('totp_factors').where('user_id', '=', userId).execute();
  const codes = await db.deleteFrom('recovery_codes').where('user_id', '=', userId).where('used_at', 'is', null).executeTakeFirst();
  await db.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
  const passkeys = await db.deleteFrom('passkeys').where('user_id', '=', userId).executeTakeFirst();
  return { totp: Number(totp.numDeletedRows) > 0, passkeys: Number(passkeys.numDeletedRows), recoveryCodes: Number(codes.numDeletedRows) };
}

/** What a user has set up as second factors: a confirmed authenticator app, account-wide passkeys, unused recovery codes. */
export interface FactorSummary {
  totp: boolean;
  passkeys: number;
  recoveryCodes: number;
}

/** The columns `f_totp`, `f_passkeys`, `f_recovery_codes` of a FactorSummary: one statement reads them, alone or with more. */
export function factorSummaryColumns(eb: ExpressionBuilder<Database, never>, userId: string) {
  return [
    eb.exists(eb.selectFrom('totp_factors').select('user_id').where('user_id', '=', userId).where('confirmed_at', 'is not', null)).as('f_totp'),
    eb
      .selectFrom('recovery_codes')
      .select((e) => e.fn.countAll<string | number>().as('n'))
      .where('user_id', '=', userId)
      .where('used_at', 'is', null)
      .as('f_recovery_codes'),
    eb
      .selectFrom('passkeys')
      .select((e) => e.fn.countAll<string | number>().as('n'))
      .where('user_id', '=', userId)
      // A passkey an app registered signs in only at that app: it is no factor of the account.
      .where('app_id', 'is', null)
      .as('f_passkeys'),
  ] as const;
}

/** The summary in a row that selected factorSummaryColumns (SQLite answers booleans and counts as numbers, PostgreSQL counts as strings). */
export function toFactorSummary(row: { f_totp: unknown; f_passkeys: string | number | null; f_recovery_codes: string | number | null }): FactorSummary {
  return { totp: Boolean(Number(row.f_totp)), passkeys: Number(row.f_passkeys ?? 0), recoveryCodes: Number(row.f_recovery_codes ?? 0) };
}

const selectFactorSummary = precompiled((db, userId: string) => db.selectNoFrom((eb) => factorSummaryColumns(eb, userId)));

/** Whether the user has a confirmed authenticator app, and how many passkeys and unused recovery codes. One query. */
export async function findFactorSummary(db: Kysely<Database>, userId: string): Promise<FactorSummary> {
  return toFactorSummary((await selectFactorSummary(db, userId)).rows[0]!);
}
